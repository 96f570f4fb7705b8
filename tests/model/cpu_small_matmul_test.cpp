// The decode-step matmul (cpu::small_linear) against the product computed in
// float64, at the row counts, widths and odd output counts the model gives it,
// and the cases it must leave to at::linear.
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/cpu_kernels.h"
#include "model/cpu_small_matmul.h"

using namespace grpo::model;

namespace {

bool cpu_runs(at::ScalarType dtype) {
#if defined(__x86_64__) && defined(__GNUC__)
  return __builtin_cpu_supports("avx512f") && (dtype == at::kFloat || __builtin_cpu_supports("avx512bf16"));
#else
  (void)dtype;
  return false;
#endif
}

class SmallMatmul : public ::testing::TestWithParam<at::ScalarType> {
 protected:
  void SetUp() override { torch::manual_seed(0); }
  at::ScalarType dtype() const { return GetParam(); }
  int64_t max_rows() const {
    return dtype() == at::kFloat ? cpu::kSmallMatmulMaxRowsF32 : cpu::kSmallMatmulMaxRowsBF16;
  }
  at::Tensor randn(at::IntArrayRef sizes) { return at::randn(sizes).to(dtype()); }
  torch::NoGradGuard no_grad_;
  FusedScope fused_;
};

// Float32 accumulation of K products is off the exact sum by at most about
// K * 2^-24 * sum|x w|; a bfloat16 result is then one rounding (2^-8
// relative) from that.
void expect_close(const at::Tensor& got, const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
  at::Tensor xd = x.to(at::kDouble), wd = w.to(at::kDouble);
  at::Tensor exact = at::matmul(xd, wd.t());
  if (b.defined()) exact = exact + b.to(at::kDouble);
  at::Tensor magnitude = at::matmul(xd.abs(), wd.abs().t()) + (b.defined() ? b.to(at::kDouble).abs() : at::zeros({1}, at::kDouble));
  const double rel = got.scalar_type() == at::kFloat ? x.size(-1) * std::ldexp(1.0, -24) : std::ldexp(1.0, -8);
  at::Tensor err = (got.to(at::kDouble) - exact).abs() - magnitude * rel;
  EXPECT_LE(err.max().item<double>(), 0.0) << "K " << x.size(-1) << " rows " << x.numel() / x.size(-1);
}

TEST_P(SmallMatmul, MatchesTheExactProductAtEveryShape) {
  ASSERT_EQ(cpu_runs(dtype()), cpu::small_linear(randn({1, 32}), randn({4, 32}), {}).defined());
  if (!cpu_runs(dtype())) return;  // asserted above: on this CPU the caller keeps at::linear
  // 1-4: a block of weight rows per pass; from 5 on, 16 rows at a time a row per lane, and a last
  // group of 1-4 rows (17) a block per pass.
  for (int64_t rows : {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{4}, int64_t{5}, int64_t{7}, int64_t{16},
                       int64_t{17}, int64_t{21}, max_rows()})
    for (int64_t K : {32, 96, 896})
      for (int64_t N : {1, 4, 7, 130}) {
        at::Tensor x = randn({rows, K}), w = randn({N, K}), b = randn({N});
        at::Tensor y = cpu::small_linear(x, w, {});
        ASSERT_TRUE(y.defined());
        EXPECT_EQ(y.sizes(), at::IntArrayRef({rows, N}));
        EXPECT_EQ(y.scalar_type(), dtype());
        expect_close(y, x, w, {});
        expect_close(cpu::small_linear(x, w, b), x, w, b);
      }
  // Leading dims are kept ([batch, 1, K] in a decode step); strided rows are read.
  at::Tensor x = randn({3, 1, 64}), w = randn({10, 64});
  at::Tensor y = cpu::small_linear(x, w, {});
  ASSERT_TRUE(y.defined());
  EXPECT_EQ(y.sizes(), at::IntArrayRef({3, 1, 10}));
  expect_close(y.view({3, 10}), x.view({3, 64}), w, {});
  at::Tensor wide = randn({2, 128});
  at::Tensor strided = wide.narrow(1, 0, 64);  // rows 128 apart
  expect_close(cpu::small_linear(strided, w, {}), strided.contiguous(), w, {});
}

TEST_P(SmallMatmul, LeavesOtherCasesToLibTorch) {
  at::Tensor x = randn({1, 64}), w = randn({8, 64});
  EXPECT_FALSE(cpu::small_linear(randn({max_rows() + 1, 64}), w, {}).defined());
  EXPECT_FALSE(cpu::small_linear(randn({1, 48}), randn({8, 48}), {}).defined());  // K not a multiple of 32
  EXPECT_FALSE(cpu::small_linear(x.to(at::kHalf), w.to(at::kHalf), {}).defined());
  EXPECT_FALSE(cpu::small_linear(x, w.to(at::kDouble), {}).defined());
  EXPECT_FALSE(cpu::small_linear(x, randn({64, 8}).t(), {}).defined());  // a transposed weight view
  {
    torch::AutoGradMode grad(true);
    at::Tensor trained = w.clone().requires_grad_(true);
    EXPECT_FALSE(cpu::small_linear(x, trained, {}).defined());
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, SmallMatmul, ::testing::Values(at::kFloat, at::kBFloat16),
                         [](const auto& info) { return std::string(c10::toString(info.param)); });

TEST(SmallMatmulScope, OnlyInsideAFusedScope) {
  torch::NoGradGuard no_grad;
  EXPECT_FALSE(cpu::small_linear(at::randn({1, 64}), at::randn({8, 64}), {}).defined());
}

}  // namespace
