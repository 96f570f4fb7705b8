// Gradient buckets: a run of parameters' gradients as one float32 buffer on
// their device, a missing gradient as zeros there, and the reduced buffer put
// back into each parameter's gradient in its own dtype.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "trainer/gradient_buckets.h"

using namespace grpo::trainer;

TEST(GradientBuckets, AMissingGradientIsZerosBesideThePresentOnes) {
  at::Tensor a = torch::zeros({2, 2}).requires_grad_();
  at::Tensor b = torch::zeros({3}, torch::kBFloat16).requires_grad_();  // no gradient: unused by this rank's loss
  at::Tensor c = torch::zeros({1}).requires_grad_();
  a.mutable_grad() = torch::tensor({{1.f, 2.f}, {3.f, 4.f}});
  c.mutable_grad() = torch::tensor({5.f});
  const at::Tensor flat = flat_gradients({a, b, c}, {0, 3});
  EXPECT_EQ(flat.scalar_type(), at::kFloat);
  EXPECT_TRUE(at::equal(flat, torch::tensor({1.f, 2.f, 3.f, 4.f, 0.f, 0.f, 0.f, 5.f})));

  set_gradients({a, b, c}, {0, 3}, torch::arange(8, torch::kFloat), 0.5);
  EXPECT_TRUE(at::equal(a.grad(), torch::tensor({{0.f, 0.5f}, {1.f, 1.5f}})));
  ASSERT_TRUE(b.grad().defined());
  EXPECT_EQ(b.grad().scalar_type(), at::kBFloat16);  // the parameter's dtype, for its optimizer
  EXPECT_TRUE(at::equal(b.grad(), torch::tensor({2.f, 2.5f, 3.f}, torch::kBFloat16)));
  EXPECT_TRUE(at::equal(c.grad(), torch::tensor({3.5f})));
}

// Parameters on a device other than the CPU (the meta device stands in for a
// GPU here): the zeros are made there, so that the bucket is one device's
// tensor for NCCL and its gradients land where the optimizer reads them.
TEST(GradientBuckets, TheZerosOfAMissingGradientAreOnItsParametersDevice) {
  const auto on = at::TensorOptions().device(at::kMeta);
  at::Tensor a = at::empty({4}, on).requires_grad_();
  at::Tensor b = at::empty({2, 3}, on.dtype(at::kBFloat16)).requires_grad_();
  a.mutable_grad() = at::empty({4}, on);
  const at::Tensor mixed = flat_gradients({a, b}, {0, 2});
  EXPECT_EQ(mixed.device(), at::Device(at::kMeta));
  EXPECT_EQ(mixed.numel(), 10);
  const at::Tensor missing = flat_gradients({a, b}, {1, 2});  // a bucket whose every gradient is missing
  EXPECT_EQ(missing.device(), at::Device(at::kMeta));
  EXPECT_EQ(missing.scalar_type(), at::kFloat);
  set_gradients({a, b}, {1, 2}, missing, 1.0);
  EXPECT_EQ(b.grad().device(), at::Device(at::kMeta));
}
