// trainer/offload.h on the CPU: which tensors move where, and the gradients'
// round trip. On a GPU (train_gpu_test) the moves go through pinned host
// memory: a round trip trains bit-identically, and the peaks fall.
#include <stdexcept>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "trainer/checkpoint.h"
#include "trainer/offload.h"

namespace t = grpo::trainer;

namespace {

std::vector<at::Tensor> params(uint64_t seed) {
  at::manual_seed(seed);
  return {at::randn({37}).requires_grad_(), at::randn({8, 5}).requires_grad_()};
}

void set_gradients(const std::vector<at::Tensor>& ps, int step) {
  for (size_t i = 0; i < ps.size(); ++i)
    ps[i].mutable_grad() = at::full_like(ps[i], 0.1 * static_cast<double>(step + 1) - 0.05 * static_cast<double>(i));
}

std::vector<at::Tensor> moments(torch::optim::Optimizer& optimizer) {
  std::vector<at::Tensor> out;
  for (const at::Tensor& p : optimizer.param_groups()[0].params()) {
    auto& s = static_cast<torch::optim::AdamWParamState&>(*optimizer.state().at(p.unsafeGetTensorImpl()));
    out.push_back(s.exp_avg());
    out.push_back(s.exp_avg_sq());
  }
  return out;
}

}  // namespace

// The meta device stands in for a second device in these tests (a CPU tensor
// cannot take a meta tensor's place as a module's data, so modules are moved
// on a GPU only: train_gpu_test).
TEST(Offload, EveryMomentMovesToTheDeviceAskedAndBackToItsParametersDevice) {
  t::OptimizerSettings settings;
  std::vector<at::Tensor> ps = params(1);
  auto adam = t::make_adamw(settings, ps);
  set_gradients(ps, 0);
  adam->step();
  const std::vector<at::Tensor> before = moments(*adam);
  ASSERT_EQ(before.size(), 4u);
  EXPECT_EQ(t::optimizer_state_to(*adam, at::kCPU), 0) << "already in host memory: nothing moves";
  for (size_t i = 0; i < before.size(); ++i) EXPECT_TRUE(moments(*adam)[i].is_same(before[i]));
  EXPECT_EQ(t::optimizer_state_to(*adam, at::kMeta), int64_t{2 * (37 + 40) * 4});
  for (const at::Tensor& m : moments(*adam)) EXPECT_TRUE(m.is_meta());

  // Parameters on the other device, moments in host memory (a checkpoint
  // saved from offloaded state): the moments go to the parameters.
  std::vector<at::Tensor> on_meta = {at::empty({37}, at::kMeta).requires_grad_(), at::empty({8, 5}, at::kMeta).requires_grad_()};
  torch::optim::AdamW meta_adam(on_meta, torch::optim::AdamWOptions(1e-2));
  for (const at::Tensor& p : on_meta) {
    auto state = std::make_unique<torch::optim::AdamWParamState>();
    state->exp_avg(at::zeros(p.sizes())).exp_avg_sq(at::zeros(p.sizes()));
    meta_adam.state()[p.unsafeGetTensorImpl()] = std::move(state);
  }
  EXPECT_EQ(t::optimizer_state_to_devices(meta_adam), int64_t{2 * (37 + 40) * 4});
  for (const at::Tensor& m : moments(meta_adam)) EXPECT_TRUE(m.is_meta());
}

TEST(Offload, AModuleOnItsOwnDeviceStaysAsItIs) {
  torch::nn::Sequential net(torch::nn::Linear(4, 3), torch::nn::BatchNorm1d(3));
  std::vector<const void*> data;
  for (const at::Tensor& p : net->parameters()) data.push_back(p.data_ptr());
  EXPECT_EQ(t::move_module(*net, at::kCPU), 0);
  for (size_t i = 0; i < data.size(); ++i) EXPECT_EQ(net->parameters()[i].data_ptr(), data[i]);
}

TEST(Offload, GradientsBetweenStepsAreFreedAndComeBackAsZeros) {
  std::vector<at::Tensor> ps = params(2);
  ps.push_back(at::randn({3}).requires_grad_());  // another ZeRO rank's: no gradient here
  ps[0].mutable_grad() = at::zeros_like(ps[0]);
  ps[1].mutable_grad() = at::zeros_like(ps[1]);
  t::ParkedGradients parked(ps, /*all_zero=*/true);
  EXPECT_EQ(parked.bytes(), int64_t{(37 + 40) * 4});
  for (const at::Tensor& p : ps) EXPECT_FALSE(p.grad().defined());
  parked.restore();
  EXPECT_TRUE(at::equal(ps[0].grad(), at::zeros({37})));
  EXPECT_TRUE(at::equal(ps[1].grad(), at::zeros({8, 5})));
  EXPECT_FALSE(ps[2].grad().defined());
}

TEST(Offload, GradientsInsideAStepComeBackWithTheirValues) {
  std::vector<at::Tensor> ps = params(3);
  set_gradients(ps, 2);
  const at::Tensor g0 = ps[0].grad().clone(), g1 = ps[1].grad().clone();
  t::ParkedGradients parked(ps, /*all_zero=*/false);
  for (const at::Tensor& p : ps) EXPECT_FALSE(p.grad().defined());
  parked.restore();
  EXPECT_TRUE(at::equal(ps[0].grad(), g0));
  EXPECT_TRUE(at::equal(ps[1].grad(), g1));
}

TEST(Offload, WhatAPhaseThatThrowsTookAwayComesBackWithItsValues) {
  std::vector<at::Tensor> ps = params(4);
  set_gradients(ps, 1);
  const at::Tensor g0 = ps[0].grad().clone(), g1 = ps[1].grad().clone();
  EXPECT_THROW(
      {
        t::AwayForSampling away(nullptr, at::kCPU, ps, /*gradients_zero=*/false);
        EXPECT_FALSE(ps[0].grad().defined());
        throw std::runtime_error("the sampler failed");
      },
      std::runtime_error);
  EXPECT_TRUE(at::equal(ps[0].grad(), g0));
  EXPECT_TRUE(at::equal(ps[1].grad(), g1));
}

TEST(Offload, WhatWasAwayComesBackOnceWhoeverHoldsIt) {
  std::vector<at::Tensor> ps = params(5);
  for (const at::Tensor& p : ps) p.mutable_grad() = at::zeros_like(p);
  {
    t::AwayForSampling first(nullptr, at::kCPU, ps, /*gradients_zero=*/true);
    t::AwayForSampling second(std::move(first));
    EXPECT_EQ(second.bytes(), int64_t{(37 + 40) * 4});
    first.restore();  // moved from: nothing of its own
    EXPECT_FALSE(ps[0].grad().defined());
    second.restore();
    EXPECT_TRUE(at::equal(ps[0].grad(), at::zeros({37})));
    set_gradients(ps, 3);  // the next micro-batch's backward
  }  // neither destructor zeroes them again
  EXPECT_TRUE(at::equal(ps[0].grad(), at::full({37}, 0.4)));
}
