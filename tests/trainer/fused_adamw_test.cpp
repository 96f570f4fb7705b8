// The one-pass AdamW against LibTorch's torch::optim::AdamW (float32, and
// what the loop leaves to LibTorch's ops) and against the update worked out
// in float64 (bfloat16, where LibTorch rounds after each of its ops).
#include <filesystem>
#include <vector>

#include <gtest/gtest.h>
#include <torch/serialize.h>
#include <torch/torch.h>

#include "trainer/checkpoint.h"
#include "trainer/fused_adamw.h"

using grpo::trainer::FusedAdamW;

namespace {

torch::optim::AdamWOptions options() {
  return torch::optim::AdamWOptions(1e-2).betas({0.9, 0.95}).eps(1e-8).weight_decay(0.1);
}

// Sizes below, at and across the vector width and the threads' grain.
std::vector<at::Tensor> params(at::ScalarType dtype, uint64_t seed) {
  at::manual_seed(seed);
  std::vector<at::Tensor> out;
  for (int64_t n : {1, 15, 16, 37, 1000, 70001}) out.push_back(at::randn({n}, at::kFloat).to(dtype).requires_grad_());
  out.push_back(at::randn({33, 65}, at::kFloat).to(dtype).requires_grad_());
  return out;
}

std::vector<at::Tensor> copies(const std::vector<at::Tensor>& ps) {
  std::vector<at::Tensor> out;
  for (const auto& p : ps) out.push_back(p.detach().clone().requires_grad_());
  return out;
}

// The same gradients for both lists at step `step`.
void set_grads(std::vector<at::Tensor>& a, std::vector<at::Tensor>& b, int step) {
  at::manual_seed(100 + step);
  for (size_t i = 0; i < a.size(); ++i) {
    const at::Tensor g = at::randn(a[i].sizes(), at::kFloat).mul(0.1 * (i + 1)).to(a[i].scalar_type());
    a[i].mutable_grad() = g.clone();
    b[i].mutable_grad() = g.clone();
  }
}

}  // namespace

TEST(FusedAdamW, Float32FollowsLibTorchsAdamW) {
  auto ours = params(at::kFloat, 1), theirs = copies(ours);
  FusedAdamW fused(ours, options());
  torch::optim::AdamW reference(theirs, options());
  for (int step = 0; step < 6; ++step) {
    set_grads(ours, theirs, step);
    fused.step();
    reference.step();
  }
  for (size_t i = 0; i < ours.size(); ++i) {
    // Same formula, same order, the same fused multiply-adds: bitwise.
    EXPECT_TRUE(at::equal(ours[i], theirs[i]))
        << "parameter " << i << ": max difference " << (ours[i] - theirs[i]).abs().max().item<float>();
    const auto& a = static_cast<torch::optim::AdamWParamState&>(*fused.state().at(
        grpo::trainer::optimizer_state_key(ours[i])));
    const auto& b = static_cast<torch::optim::AdamWParamState&>(*reference.state().at(
        grpo::trainer::optimizer_state_key(theirs[i])));
    EXPECT_EQ(a.step(), 6);
    EXPECT_TRUE(at::equal(a.exp_avg(), b.exp_avg())) << i;
    EXPECT_TRUE(at::equal(a.exp_avg_sq(), b.exp_avg_sq())) << i;
  }
  // The update moved every weight (the comparison above is not of two unchanged lists).
  const auto start = params(at::kFloat, 1);
  for (size_t i = 0; i < ours.size(); ++i) EXPECT_GT((ours[i] - start[i]).abs().min().item<float>(), 0.0f) << i;
}

TEST(FusedAdamW, WhatTheLoopDoesNotTakeRunsLibTorchsOpsBitwise) {
  for (bool amsgrad : {false, true}) {
    // float64 parameters, amsgrad, a non-contiguous gradient: LibTorch's own step.
    at::manual_seed(3);
    std::vector<at::Tensor> ours = {at::randn({40}, at::kDouble).requires_grad_(),
                                    at::randn({8, 6}, at::kDouble).requires_grad_()};
    auto theirs = copies(ours);
    FusedAdamW fused(ours, options().amsgrad(amsgrad));
    torch::optim::AdamW reference(theirs, options().amsgrad(amsgrad));
    for (int step = 0; step < 4; ++step) {
      set_grads(ours, theirs, step);
      ours[1].mutable_grad() = ours[1].grad().t().contiguous().t();  // same values, transposed strides
      fused.step();
      reference.step();
    }
    for (size_t i = 0; i < ours.size(); ++i) EXPECT_TRUE(at::equal(ours[i], theirs[i])) << amsgrad << " " << i;
  }
}

TEST(FusedAdamW, BFloat16RoundsOnceFromFloat32Arithmetic) {
  auto ours = params(at::kBFloat16, 2), libtorch = copies(ours);
  FusedAdamW fused(ours, options());
  torch::optim::AdamW reference(libtorch, options());
  // The update in float64 from the same bfloat16 starting point, one step.
  std::vector<at::Tensor> expect, slack;
  set_grads(ours, libtorch, 0);
  for (const auto& p : ours) {
    const at::Tensor w = p.detach().to(at::kDouble), g = p.grad().to(at::kDouble);
    const double lr = 1e-2, b1 = 0.9, b2 = 0.95;
    const at::Tensor m = (1 - b1) * g, v = (1 - b2) * g * g;
    const at::Tensor denom = v.sqrt() / std::sqrt(1 - b2) + 1e-8;
    expect.push_back(w * (1 - lr * 0.1) - (lr / (1 - b1)) * m / denom);
    slack.push_back((w.abs() + lr) * 1e-6);  // float32's error on the operands, however small the result
  }
  fused.step();
  reference.step();
  double ours_error = 0, libtorch_error = 0;
  for (size_t i = 0; i < ours.size(); ++i) {
    const at::Tensor e = expect[i];
    const at::Tensor err = (ours[i].detach().to(at::kDouble) - e).abs();
    // Within one bfloat16 rounding of the exact update: half an ulp (2^(exponent - 7)), plus float32's
    // own error, which can tip a value lying within it of a rounding midpoint to the other side.
    const at::Tensor ulp = at::pow(2.0, at::floor(at::log2(e.abs())) - 7);
    EXPECT_TRUE(at::all(err <= ulp * 0.5 + slack[i]).item<bool>())
        << "parameter " << i << ": worst error in ulps " << (err / ulp).max().item<double>();
    ours_error += err.sum().item<double>();
    libtorch_error += (libtorch[i].detach().to(at::kDouble) - e).abs().sum().item<double>();
  }
  EXPECT_LT(ours_error, libtorch_error);  // LibTorch rounds each of its nine ops to bfloat16
  const auto& s = static_cast<torch::optim::AdamWParamState&>(
      *fused.state().at(grpo::trainer::optimizer_state_key(ours[0])));
  EXPECT_EQ(s.exp_avg().scalar_type(), at::kBFloat16);  // moments in the weights' dtype, as LibTorch keeps them
}

TEST(FusedAdamW, ItsStateIsLibTorchsAndParametersWithoutGradientsWait) {
  auto ours = params(at::kFloat, 4), theirs = copies(ours);
  FusedAdamW fused(ours, options());
  torch::optim::AdamW reference(theirs, options());
  set_grads(ours, theirs, 0);
  ours.back().mutable_grad() = at::Tensor();  // no gradient: neither a state nor a move
  const at::Tensor untouched = ours.back().detach().clone();
  fused.step();
  EXPECT_TRUE(at::equal(ours.back(), untouched));
  EXPECT_EQ(fused.state().size(), ours.size() - 1);

  // Saved by the fused optimizer, read by LibTorch's (a checkpoint resumed), and the next steps agree.
  theirs.back().mutable_grad() = at::Tensor();
  reference.step();
  const std::string path = (std::filesystem::temp_directory_path() / "fused_adamw_state.pt").string();
  torch::save(fused, path);
  auto resumed_params = copies(ours);
  torch::optim::AdamW resumed(resumed_params, options());
  torch::load(resumed, path);
  std::filesystem::remove(path);
  for (int step = 1; step < 3; ++step) {
    set_grads(ours, resumed_params, step);
    fused.step();
    resumed.step();
  }
  for (size_t i = 0; i < ours.size(); ++i)
    EXPECT_TRUE(at::allclose(ours[i], resumed_params[i], 1e-6, 1e-7)) << "parameter " << i;
}

TEST(FusedAdamW, StateMadeBeforeTheFirstStepIsTheStateThatStepWouldMake) {
  auto ours = params(at::kFloat, 5), theirs = copies(ours);
  FusedAdamW fused(ours, options());
  torch::optim::AdamW reference(theirs, options());
  fused.allocate_state();
  ASSERT_EQ(fused.state().size(), ours.size());
  for (const auto& p : ours) {
    const auto& s = static_cast<torch::optim::AdamWParamState&>(*fused.state().at(
        grpo::trainer::optimizer_state_key(p)));
    EXPECT_EQ(s.step(), 0);
    EXPECT_TRUE(at::equal(s.exp_avg(), at::zeros_like(p)) && at::equal(s.exp_avg_sq(), at::zeros_like(p)));
  }
  // The last parameter has no gradient at the first step: it keeps its value and its step count.
  for (int step = 0; step < 4; ++step) {
    set_grads(ours, theirs, step);
    if (step == 0) ours.back().mutable_grad() = theirs.back().mutable_grad() = at::Tensor();
    fused.step();
    reference.step();
  }
  for (size_t i = 0; i < ours.size(); ++i) {
    EXPECT_TRUE(at::equal(ours[i], theirs[i])) << "parameter " << i;
    const auto& s = static_cast<torch::optim::AdamWParamState&>(*fused.state().at(
        grpo::trainer::optimizer_state_key(ours[i])));
    EXPECT_EQ(s.step(), i + 1 == ours.size() ? 3 : 4) << i;
  }
}

TEST(FusedAdamW, TheTrainersOptimizerHasItsMomentsAndGradientsBeforeTheFirstStep) {
  auto ps = params(at::kBFloat16, 6);
  ps.front().mutable_grad() = at::ones_like(ps.front());  // one left as it is
  const auto optimizer = grpo::trainer::make_adamw(grpo::trainer::OptimizerSettings{}, ps);
  ASSERT_NE(dynamic_cast<FusedAdamW*>(optimizer.get()), nullptr);
  EXPECT_EQ(optimizer->state().size(), ps.size());
  EXPECT_TRUE(at::equal(ps.front().grad(), at::ones_like(ps.front())));
  for (size_t i = 1; i < ps.size(); ++i) {
    ASSERT_TRUE(ps[i].grad().defined()) << i;
    EXPECT_TRUE(at::equal(ps[i].grad(), at::zeros_like(ps[i]))) << i;
    EXPECT_EQ(ps[i].grad().scalar_type(), at::kBFloat16) << i;
  }
  // A backward adds into the gradient made here, as it does from the second step on.
  const at::Tensor before = ps[1].grad();
  ps[1].sum().backward();
  EXPECT_TRUE(ps[1].grad().is_same(before));
  EXPECT_TRUE(at::equal(ps[1].grad(), at::ones_like(ps[1])));
}
