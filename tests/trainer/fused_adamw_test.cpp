// The one-pass AdamW against LibTorch's torch::optim::AdamW (what the loop
// leaves to LibTorch's ops, bitwise) and against the update worked out in
// float64 (float32, where both are within float32's rounding of it, and
// bfloat16, where LibTorch rounds after each of its ops).
#include <cmath>
#include <filesystem>
#include <string>
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

// AdamW with options() in float64, fed the float32 gradients each step, and
// for each value how far float32 arithmetic may stray from it. A step rounds
// about eight times (decay, two ops per moment, square root, two divisions,
// the sums), each by at most u = 2^-24 of the values involved: the weight and
// the update for the weight, the moment and its gradient term for a moment.
// The moments' own accumulated error (2u a step so far) reaches the update
// through m / sqrt(v). Bitwise agreement with LibTorch is not promised: its
// vectorised kernels fuse multiply-adds differently across releases and CPUs.
struct ExactAdamW {
  at::Tensor p, m, v, p_tol, m_tol, v_tol;
  int64_t step = 0;
  explicit ExactAdamW(const at::Tensor& start)
      : p(start.detach().to(at::kDouble)), m(at::zeros_like(p)), v(at::zeros_like(p)), p_tol(at::zeros_like(p)),
        m_tol(at::zeros_like(p)), v_tol(at::zeros_like(p)) {}
  void update(const at::Tensor& grad) {
    const double lr = 1e-2, b1 = 0.9, b2 = 0.95, eps = 1e-8, wd = 0.1, u = std::ldexp(1.0, -24);
    const at::Tensor g = grad.to(at::kDouble);
    ++step;
    m = b1 * m + (1 - b1) * g;
    v = b2 * v + (1 - b2) * g * g;
    const double bc1 = 1 - std::pow(b1, step), bc2 = 1 - std::pow(b2, step);
    const at::Tensor upd = (lr / bc1) * m / (v.sqrt() / std::sqrt(bc2) + eps);
    p = p * (1 - lr * wd) - upd;
    m_tol += 3 * u * (m.abs() + (1 - b1) * g.abs());
    v_tol += 3 * u * (v.abs() + (1 - b2) * g * g);
    p_tol += 8 * u * (p.abs() + upd.abs() * static_cast<double>(step));
  }
};

void expect_within(const at::Tensor& got, const at::Tensor& exact, const at::Tensor& tol, const std::string& what) {
  const at::Tensor excess = (got.detach().to(at::kDouble) - exact).abs() - tol;
  EXPECT_LE(excess.max().item<double>(), 0.0) << what << ": worst error over the bound, in bounds "
                                               << (excess / tol + 1).max().item<double>();
}

}  // namespace

TEST(FusedAdamW, Float32FollowsLibTorchsAdamW) {
  auto ours = params(at::kFloat, 1), theirs = copies(ours);
  FusedAdamW fused(ours, options());
  torch::optim::AdamW reference(theirs, options());
  std::vector<ExactAdamW> exact(ours.begin(), ours.end());
  for (int step = 0; step < 6; ++step) {
    set_grads(ours, theirs, step);
    for (size_t i = 0; i < ours.size(); ++i) exact[i].update(ours[i].grad());
    fused.step();
    reference.step();
  }
  for (size_t i = 0; i < ours.size(); ++i) {
    // Both the one pass and LibTorch's nine ops are within float32's rounding of the exact update.
    const std::string name = "parameter " + std::to_string(i);
    expect_within(ours[i], exact[i].p, exact[i].p_tol, name + ", ours");
    expect_within(theirs[i], exact[i].p, exact[i].p_tol, name + ", LibTorch's");
    const auto& a = static_cast<torch::optim::AdamWParamState&>(*fused.state().at(
        grpo::trainer::optimizer_state_key(ours[i])));
    EXPECT_EQ(a.step(), 6);
    expect_within(a.exp_avg(), exact[i].m, exact[i].m_tol, name + ", exp_avg");
    expect_within(a.exp_avg_sq(), exact[i].v, exact[i].v_tol, name + ", exp_avg_sq");
  }
  // The update moved every weight (the comparison above is not of two unchanged lists).
  const auto start = params(at::kFloat, 1);
  for (size_t i = 0; i < ours.size(); ++i) EXPECT_GT((ours[i] - start[i]).abs().min().item<float>(), 0.0f) << i;
}

// What a step on a GPU runs: LibTorch's fused kernel (torch.optim.AdamW(fused=True)),
// here through its CPU build, within the same float32 bounds of the exact update.
TEST(FusedAdamW, TheFusedKernelAGpuRunsFollowsTheSameUpdate) {
  auto ours = params(at::kFloat, 5), unused = copies(ours);
  FusedAdamW fused(ours, options());
  std::vector<ExactAdamW> exact(ours.begin(), ours.end());
  for (int step = 0; step < 6; ++step) {
    set_grads(ours, unused, step);
    for (size_t i = 0; i < ours.size(); ++i) exact[i].update(ours[i].grad());
    fused.kernel_step();
  }
  const auto start = params(at::kFloat, 5);
  for (size_t i = 0; i < ours.size(); ++i) {
    const std::string name = "parameter " + std::to_string(i);
    expect_within(ours[i], exact[i].p, exact[i].p_tol, name);
    const auto& a = static_cast<torch::optim::AdamWParamState&>(*fused.state().at(
        grpo::trainer::optimizer_state_key(ours[i])));
    EXPECT_EQ(a.step(), 6) << "the host's step count, which checkpoints save";
    expect_within(a.exp_avg(), exact[i].m, exact[i].m_tol, name + ", exp_avg");
    expect_within(a.exp_avg_sq(), exact[i].v, exact[i].v_tol, name + ", exp_avg_sq");
    EXPECT_GT((ours[i] - start[i]).abs().min().item<float>(), 0.0f) << name << " never moved";
  }
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
  std::vector<ExactAdamW> exact(ours.begin(), ours.end());
  for (int step = 0; step < 4; ++step) {
    set_grads(ours, theirs, step);
    if (step == 0) ours.back().mutable_grad() = theirs.back().mutable_grad() = at::Tensor();
    for (size_t i = 0; i < ours.size(); ++i)
      if (ours[i].grad().defined()) exact[i].update(ours[i].grad());
    fused.step();
    reference.step();
  }
  for (size_t i = 0; i < ours.size(); ++i) {
    expect_within(ours[i], exact[i].p, exact[i].p_tol, "parameter " + std::to_string(i));
    expect_within(theirs[i], exact[i].p, exact[i].p_tol, "LibTorch's parameter " + std::to_string(i));
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
