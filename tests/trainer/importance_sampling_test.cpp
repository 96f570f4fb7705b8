// The importance-sampling correction for completions from other weights
// (grpo.md §7): ratios, truncation and masking per token and per sequence,
// and how the loss applies it (the policy term only, not the KL).
#include "trainer/importance_sampling.h"

#include <cmath>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "trainer/grpo_loss.h"

using namespace grpo::trainer;

namespace {

const at::Tensor kOld = torch::tensor({{-1.0f, -2.0f, -0.5f}, {-1.0f, -1.0f, 0.0f}});
const at::Tensor kSampler = torch::tensor({{-1.5f, -1.0f, -0.5f}, {-3.0f, -1.0f, -9.0f}});
const at::Tensor kMask = torch::tensor({{1.0f, 1.0f, 1.0f}, {1.0f, 1.0f, 0.0f}});  // row 1, token 2 is padding

}  // namespace

TEST(ImportanceSampling, TokenModesTruncateOrMaskAboveTheCap) {
  MetricTensors on_device;
  at::Tensor t = importance_weights(kOld, kSampler, kMask, IsCorrectionMode::TokenTruncate, 3.0, on_device);
  // exp(0.5), exp(-1), 1; exp(2) -> 3, 1, padding exp(0) = 1
  EXPECT_NEAR(t[0][0].item<float>(), std::exp(0.5f), 1e-6);
  EXPECT_NEAR(t[0][1].item<float>(), std::exp(-1.0f), 1e-6);
  EXPECT_EQ(t[1][0].item<float>(), 3.0f);
  EXPECT_EQ(t[1][2].item<float>(), 1.0f) << "padding has no ratio of its own";
  at::Tensor k = importance_weights(kOld, kSampler, kMask, IsCorrectionMode::TokenMask, 3.0, on_device);
  EXPECT_EQ(k[1][0].item<float>(), 0.0f);
  EXPECT_NEAR(k[0][0].item<float>(), std::exp(0.5f), 1e-6);
  std::map<std::string, double> m = read_metrics(on_device);
  EXPECT_NEAR(m["sampling/importance_sampling_ratio/max"], std::exp(0.5), 1e-6);
  EXPECT_EQ(m["sampling/importance_sampling_ratio/min"], 0.0);
  EXPECT_NEAR(m["sampling/sampling_logp_difference/max"], 2.0, 1e-6);
  EXPECT_NEAR(m["sampling/sampling_logp_difference/mean"], (0.5 + 1 + 0 + 2 + 0) / 5, 1e-6);
}

TEST(ImportanceSampling, SequenceModesUseTheProductOfTheTokenRatios) {
  MetricTensors m;
  at::Tensor s = importance_weights(kOld, kSampler, kMask, IsCorrectionMode::SequenceTruncate, 3.0, m);
  ASSERT_EQ(s.sizes(), (at::IntArrayRef{2, 1}));
  EXPECT_NEAR(s[0][0].item<float>(), std::exp(-0.5f), 1e-6);  // 0.5 - 1 + 0
  EXPECT_EQ(s[1][0].item<float>(), 3.0f);                      // exp(2), the padding's -9 left out
  at::Tensor k = importance_weights(kOld, kSampler, kMask, IsCorrectionMode::SequenceMask, 3.0, m);
  EXPECT_EQ(k[1][0].item<float>(), 0.0f);
  EXPECT_THROW(is_correction_mode("sequence"), std::invalid_argument);
}

TEST(ImportanceSampling, TheLossWeighsThePolicyTermButNotTheKl) {
  at::Tensor logp = torch::tensor({{-1.0f, -2.0f}}).requires_grad_(true);
  at::Tensor ref = torch::tensor({{-1.2f, -1.5f}});
  at::Tensor mask = torch::ones({1, 2});
  LossOptions opt;
  opt.beta = 0.1;
  LossOutput plain = grpo_loss({logp, {}, ref, torch::tensor({1.0f}), mask}, opt);
  LossInputs weighted{logp, {}, ref, torch::tensor({1.0f}), mask};
  weighted.is_weight = torch::tensor({{0.5f}});
  LossOutput half = grpo_loss(weighted, opt);
  // On-policy the policy term per token is -A = -1; the KL term is unchanged.
  at::Tensor kl = plain.per_token_kl;
  EXPECT_TRUE(torch::allclose(half.per_token_loss, -0.5 * torch::ones({1, 2}) + 0.1 * kl));
  EXPECT_TRUE(torch::allclose(plain.per_token_loss, -torch::ones({1, 2}) + 0.1 * kl));
  weighted.is_weight = torch::ones({2, 1});
  EXPECT_THROW(grpo_loss(weighted, opt), std::invalid_argument);
}
