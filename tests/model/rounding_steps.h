// Comparing a kernel's result with the at:: ops it stands for, where the two
// may round differently (a sum in another order, exp's last bit): every
// element within a few of the dtype's rounding steps.
#pragma once

#include <gtest/gtest.h>
#include <ATen/ATen.h>

#include <string>

namespace grpo::testing {

// The relative spacing of the dtype's numbers: one rounding step.
inline double step_of(at::ScalarType t) { return t == at::kFloat ? 0x1p-23 : t == at::kBFloat16 ? 0x1p-7 : 0x1p-10; }

// Every element of got within `steps` rounding steps of want's.
inline void expect_within_steps(const at::Tensor& got, const at::Tensor& want, double steps, const std::string& what) {
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  ASSERT_EQ(got.scalar_type(), want.scalar_type()) << what;
  const at::Tensor g = got.to(at::kCPU, at::kDouble), w = want.to(at::kCPU, at::kDouble);
  const double floor = 1e-6 * w.abs().max().item<double>();
  const at::Tensor bound = w.abs() * (steps * step_of(want.scalar_type())) + floor;
  const at::Tensor over = (g - w).abs() > bound;
  EXPECT_EQ(over.sum().item<int64_t>(), 0) << what << ": largest difference " << (g - w).abs().max().item<double>();
}

}  // namespace grpo::testing
