// The policy loss against TRL v1.9.0's `_compute_loss` formulas
// (tests/data/grpo_loss_cases.json): loss, metrics, per-token values and
// the gradient w.r.t. logp, plus the masked-batch and error contracts.
#include "trainer/grpo_loss.h"

#include <gtest/gtest.h>
#include <torch/autograd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <stdexcept>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

using namespace grpo::trainer;
using nlohmann::json;

namespace {

constexpr double kTol = 1e-6;  // what the reference supports for the loss (data README)

// A JSON number, row of numbers or matrix of numbers as a float64 tensor.
at::Tensor to_tensor(const json& j) {
  const auto opts = at::TensorOptions().dtype(at::kDouble);
  if (j.is_number()) return at::full({}, j.get<double>(), opts);
  if (j.empty() || !j[0].is_array()) return at::tensor(j.get<std::vector<double>>(), opts);
  std::vector<double> flat;
  for (const json& row : j) {
    std::vector<double> r = row.get<std::vector<double>>();
    flat.insert(flat.end(), r.begin(), r.end());
  }
  return at::tensor(flat, opts).view({static_cast<int64_t>(j.size()), static_cast<int64_t>(j[0].size())});
}

LossType parse_loss_type(const std::string& s) {
  if (s == "grpo") return LossType::Grpo;
  if (s == "bnpo") return LossType::Bnpo;
  if (s == "dr_grpo") return LossType::DrGrpo;
  if (s == "dapo") return LossType::Dapo;
  throw std::runtime_error("unknown loss_type in the fixture: " + s);
}

double max_abs_diff(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

// Max |a - b| over the active tokens only.
double max_abs_diff_active(const at::Tensor& a, const at::Tensor& b, const at::Tensor& active) {
  at::Tensor d = (a.to(at::kDouble) - b.to(at::kDouble)).abs().masked_select(active);
  return d.numel() == 0 ? 0.0 : d.max().item<double>();
}

struct Case {
  LossInputs inputs;
  LossOptions options;
  json expected;
};

Case make_case(const json& c) {
  const json& in = c["input"];
  Case out;
  out.expected = c["expected"];
  out.inputs.logp = to_tensor(in["per_token_logps"]).requires_grad_(true);
  if (in.contains("old_per_token_logps") && !in["old_per_token_logps"].is_null()) {
    out.inputs.old_logp = to_tensor(in["old_per_token_logps"]);
  }
  if (in.contains("ref_per_token_logps") && !in["ref_per_token_logps"].is_null()) {
    out.inputs.ref_logp = to_tensor(in["ref_per_token_logps"]);
  }
  out.inputs.advantages = to_tensor(in["advantages"]);
  out.inputs.mask = to_tensor(in["completion_mask"]);

  LossOptions& o = out.options;
  o.loss_type = parse_loss_type(in["loss_type"].get<std::string>());
  o.level = in.value("importance_sampling_level", std::string("token")) == "sequence" ? IsLevel::Sequence
                                                                                       : IsLevel::Token;
  o.epsilon_low = in["epsilon_low"].get<double>();
  o.epsilon_high = in["epsilon_high"].get<double>();
  if (in.contains("delta") && !in["delta"].is_null()) o.delta = in["delta"].get<double>();
  o.beta = in["beta"].get<double>();
  o.use_bias_correction_kl = in.value("use_bias_correction_kl", false);
  o.gradient_accumulation_steps = in.value("gradient_accumulation_steps", int64_t{1});
  o.max_completion_length = in["max_completion_length"].get<int64_t>();
  // One process whose micro-batch is the whole generation batch, as the
  // reference was run: the dapo normaliser is its active-token count.
  o.dapo_active_tokens = in.contains("num_items_in_batch") ? in["num_items_in_batch"].get<double>()
                                                           : out.inputs.mask.sum().item<double>();
  return out;
}

json load_cases() {
  std::ifstream f(GRPO_TEST_DATA_DIR "/grpo_loss_cases.json");
  if (!f) throw std::runtime_error("cannot open " GRPO_TEST_DATA_DIR "/grpo_loss_cases.json");
  return json::parse(f)["cases"];
}

}  // namespace

TEST(GrpoLoss, EveryReferenceCaseMatchesTrl) {
  const json cases = load_cases();
  ASSERT_FALSE(cases.empty());
  int passed = 0;
  double worst_loss = 0, worst_grad = 0, worst_tok = 0, worst_metric = 0;
  const std::vector<std::string> metric_names = {"kl", "clip_ratio/low_mean", "clip_ratio/low_min",
                                                 "clip_ratio/high_mean", "clip_ratio/high_max",
                                                 "clip_ratio/region_mean"};
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE("case " + std::to_string(i) + " (" + cases[i]["input"]["loss_type"].get<std::string>() + ")");
    Case c = make_case(cases[i]);
    const json& e = c.expected;
    bool ok = true;
    const auto check = [&ok](bool cond) {
      ok = ok && cond;
      return cond;
    };

    LossOutput out = grpo_loss(c.inputs, c.options);
    at::Tensor grad = torch::autograd::grad({out.loss}, {c.inputs.logp})[0];
    at::Tensor active = c.inputs.mask != 0;

    const double d_loss = std::abs(out.loss.item<double>() - e["loss"].get<double>());
    EXPECT_TRUE(check(d_loss <= kTol)) << d_loss;
    if (c.options.loss_type != LossType::Dapo) {
      // The reference's policy_loss is the loss before the division by GA.
      const double policy_loss = out.loss.item<double>() * c.options.gradient_accumulation_steps;
      EXPECT_TRUE(check(std::abs(policy_loss - e["policy_loss"].get<double>()) <= kTol)) << policy_loss;
    }
    const double d_grad = max_abs_diff(grad, to_tensor(e["grad_per_token_logps"]));
    EXPECT_TRUE(check(d_grad <= kTol)) << d_grad;
    // Masked positions carry no loss; the reference keeps its raw values there.
    const double d_tok = max_abs_diff_active(out.per_token_loss, to_tensor(e["per_token_loss"]), active);
    EXPECT_TRUE(check(d_tok <= kTol)) << d_tok;
    EXPECT_TRUE(check(out.per_token_loss.masked_select(~active).abs().sum().item<double>() == 0.0));
    const at::Tensor want_ratio = to_tensor(e["coef_1"]);
    ASSERT_EQ(out.ratio.sizes(), want_ratio.sizes());
    const at::Tensor ratio_active = want_ratio.size(1) == 1 ? at::ones_like(want_ratio, at::kBool) : active;
    EXPECT_TRUE(check(max_abs_diff_active(out.ratio, want_ratio, ratio_active) <= kTol));
    if (e.contains("per_token_kl")) {
      ASSERT_TRUE(out.per_token_kl.defined());
      EXPECT_TRUE(check(max_abs_diff_active(out.per_token_kl, to_tensor(e["per_token_kl"]), active) <= kTol));
    } else {
      EXPECT_TRUE(check(!out.per_token_kl.defined()));
    }

    double d_metric = 0;
    for (const std::string& name : metric_names) {
      if (!e.contains(name)) {
        EXPECT_TRUE(check(read_metrics(out.metrics).count(name) == 0)) << name;
        continue;
      }
      ASSERT_EQ(read_metrics(out.metrics).count(name), 1u) << name;
      const double d = std::abs(read_metrics(out.metrics).at(name) - e[name].get<double>());
      EXPECT_TRUE(check(d <= kTol)) << name << ": got " << read_metrics(out.metrics).at(name) << ", want "
                                    << e[name].get<double>();
      d_metric = std::max(d_metric, d);
    }

    worst_loss = std::max(worst_loss, d_loss);
    worst_grad = std::max(worst_grad, d_grad);
    worst_tok = std::max(worst_tok, d_tok);
    worst_metric = std::max(worst_metric, d_metric);
    if (ok) ++passed;
  }
  std::printf("[ reference ] %d / %zu TRL cases pass; max |diff|: loss %.3e, grad %.3e, per-token loss %.3e, "
              "metrics %.3e\n",
              passed, cases.size(), worst_loss, worst_grad, worst_tok, worst_metric);
  EXPECT_EQ(passed, static_cast<int>(cases.size()));
}

TEST(GrpoLoss, EveryRowMaskedGivesExactlyZeroLossAndGradient) {
  const double inf = std::numeric_limits<double>::infinity();
  for (LossType type : {LossType::Grpo, LossType::Bnpo, LossType::DrGrpo, LossType::Dapo}) {
    for (IsLevel level : {IsLevel::Token, IsLevel::Sequence}) {
      for (double dapo_tokens : {0.0, 12.0}) {
        SCOPED_TRACE(static_cast<int>(type) * 10 + static_cast<int>(level));
        LossInputs in;
        // Padding may hold anything, -inf included: none of it may leak.
        in.logp = at::tensor({-1.0, -inf, 0.5, -2.0, -0.3, -inf}, at::kDouble).view({2, 3}).requires_grad_(true);
        in.old_logp = at::tensor({-0.5, -1.0, inf, -2.5, -0.1, 0.0}, at::kDouble).view({2, 3});
        in.ref_logp = at::tensor({-0.7, 0.0, -inf, -1.0, -0.2, -1.0}, at::kDouble).view({2, 3});
        in.advantages = at::tensor({1.0, -1.0}, at::kDouble);
        in.mask = at::zeros({2, 3}, at::kBool);
        LossOptions opt;
        opt.loss_type = type;
        opt.level = level;
        opt.dapo_active_tokens = dapo_tokens;
        opt.use_bias_correction_kl = true;
        opt.delta = 1.5;
        LossOutput out = grpo_loss(in, opt);
        EXPECT_EQ(out.loss.item<double>(), 0.0);
        at::Tensor grad = torch::autograd::grad({out.loss}, {in.logp})[0];
        EXPECT_EQ(grad.abs().sum().item<double>(), 0.0);
        EXPECT_FALSE(at::isnan(grad).any().item<bool>());
        EXPECT_EQ(out.per_token_loss.abs().sum().item<double>(), 0.0);
        EXPECT_TRUE(read_metrics(out.metrics).empty());  // nothing to average: NaN, left out when read
      }
    }
  }
}

TEST(GrpoLoss, GarbageInMaskedPositionsDoesNotChangeLossOrGradient) {
  const json cases = load_cases();
  Case c = make_case(cases[0]);
  LossOutput clean = grpo_loss(c.inputs, c.options);
  at::Tensor clean_grad = torch::autograd::grad({clean.loss}, {c.inputs.logp})[0];

  at::Tensor masked = c.inputs.mask == 0;
  const double inf = std::numeric_limits<double>::infinity();
  LossInputs dirty = c.inputs;
  dirty.logp = c.inputs.logp.detach().masked_fill(masked, -inf).requires_grad_(true);
  dirty.old_logp = c.inputs.old_logp.masked_fill(masked, std::numeric_limits<double>::quiet_NaN());
  dirty.ref_logp = c.inputs.ref_logp.masked_fill(masked, inf);
  LossOutput out = grpo_loss(dirty, c.options);
  at::Tensor grad = torch::autograd::grad({out.loss}, {dirty.logp})[0];
  EXPECT_NEAR(out.loss.item<double>(), clean.loss.item<double>(), 1e-12);
  EXPECT_LE(max_abs_diff(grad, clean_grad), 1e-12);
  EXPECT_EQ(read_metrics(out.metrics), read_metrics(clean.metrics));
}

TEST(GrpoLoss, DapoWithoutACountUsesTheMicroBatchTokens) {
  // With GA = 1 and the micro-batch being the whole batch, dapo is bnpo.
  const json cases = load_cases();
  Case c = make_case(cases[0]);
  c.options.loss_type = LossType::Dapo;
  c.options.dapo_active_tokens = 0;
  const double dapo = grpo_loss(c.inputs, c.options).loss.item<double>();
  c.options.loss_type = LossType::Bnpo;
  EXPECT_NEAR(dapo, grpo_loss(c.inputs, c.options).loss.item<double>(), 1e-12);
  // Twice the tokens elsewhere in the generation batch halves the loss, and GA does not divide it.
  c.options.loss_type = LossType::Dapo;
  c.options.dapo_active_tokens = 2 * c.inputs.mask.sum().item<double>();
  c.options.gradient_accumulation_steps = 8;
  EXPECT_NEAR(grpo_loss(c.inputs, c.options).loss.item<double>(), dapo / 2, 1e-12);
}

TEST(GrpoLoss, OnPolicyLossIsTheNegatedMeanAdvantageWithReinforceGradient) {
  // old = logp.detach(): ratio 1, so with beta 0 the grpo loss is -mean(A)
  // and d loss / d logp[b, t] = -A[b] / (B * tokens_b).
  LossInputs in;
  in.logp = at::tensor({-1.0, -2.0, -0.5, -0.25}, at::kDouble).view({2, 2}).requires_grad_(true);
  in.advantages = at::tensor({0.5, -1.5}, at::kDouble);
  in.mask = at::tensor({1.0, 1.0, 1.0, 0.0}, at::kDouble).view({2, 2});
  LossOptions opt;
  opt.beta = 0.0;
  LossOutput out = grpo_loss(in, opt);
  EXPECT_NEAR(out.loss.item<double>(), -(0.5 - 1.5) / 2, 1e-12);
  at::Tensor grad = torch::autograd::grad({out.loss}, {in.logp})[0];
  at::Tensor want = at::tensor({-0.5 / 4, -0.5 / 4, 1.5 / 2, 0.0}, at::kDouble).view({2, 2});
  EXPECT_LE(max_abs_diff(grad, want), 1e-12);
  EXPECT_EQ(out.metrics.count("kl"), 0u);
  EXPECT_EQ(read_metrics(out.metrics).at("clip_ratio/region_mean"), 0.0);
}

TEST(GrpoLoss, SixteenBitLogprobsAreComputedInFloat32) {
  const json cases = load_cases();
  Case c = make_case(cases[1]);
  const double want = grpo_loss(c.inputs, c.options).loss.item<double>();
  LossInputs in = c.inputs;
  in.logp = c.inputs.logp.detach().to(at::kFloat).requires_grad_(true);
  in.mask = c.inputs.mask.to(at::kBool);
  LossOutput out = grpo_loss(in, c.options);
  EXPECT_EQ(out.loss.scalar_type(), at::kFloat);
  EXPECT_NEAR(out.loss.item<double>(), want, 1e-5);
  in.logp = c.inputs.logp.detach().to(at::kBFloat16).requires_grad_(true);
  out = grpo_loss(in, c.options);
  EXPECT_EQ(out.loss.scalar_type(), at::kFloat);
  at::Tensor grad = torch::autograd::grad({out.loss}, {in.logp})[0];
  EXPECT_EQ(grad.scalar_type(), at::kBFloat16);
}

TEST(GrpoLoss, RejectsInputsThatDoNotFit) {
  LossInputs in;
  in.logp = at::zeros({2, 3}, at::kDouble).requires_grad_(true);
  in.advantages = at::zeros({2}, at::kDouble);
  in.mask = at::ones({2, 3}, at::kDouble);
  LossOptions opt;  // beta 0.04 by default
  EXPECT_THROW(grpo_loss(in, opt), std::invalid_argument);  // no ref_logp
  opt.beta = 0.0;
  EXPECT_NO_THROW(grpo_loss(in, opt));
  LossInputs bad = in;
  bad.mask = at::ones({2, 4}, at::kDouble);
  EXPECT_THROW(grpo_loss(bad, opt), std::invalid_argument);
  bad = in;
  bad.advantages = at::zeros({3}, at::kDouble);
  EXPECT_THROW(grpo_loss(bad, opt), std::invalid_argument);
  bad = in;
  bad.old_logp = at::zeros({3, 3}, at::kDouble);
  EXPECT_THROW(grpo_loss(bad, opt), std::invalid_argument);
  LossOptions bad_opt = opt;
  bad_opt.gradient_accumulation_steps = 0;
  EXPECT_THROW(grpo_loss(in, bad_opt), std::invalid_argument);
  bad_opt = opt;
  bad_opt.loss_type = LossType::DrGrpo;
  bad_opt.max_completion_length = 0;
  EXPECT_THROW(grpo_loss(in, bad_opt), std::invalid_argument);
}
