// The fused CPU kernels against the at:: ops they replace, in every dtype and
// at the shapes the model gives them (strided KV-cache views, grouped query
// rows, padding masks, head dims that are not a multiple of the vector width).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <limits>

#include "model/cpu_kernels.h"
#include "model/row_layout.h"

using namespace grpo::model;

namespace {

// Largest |a - b| in units of b's dtype spacing at b's magnitude.
double max_ulps(const at::Tensor& a, const at::Tensor& b) {
  const double eps = b.scalar_type() == at::kFloat ? std::ldexp(1.0, -23)
                     : b.scalar_type() == at::kHalf ? std::ldexp(1.0, -10)
                                                     : std::ldexp(1.0, -7);
  at::Tensor af = a.to(at::kDouble), bf = b.to(at::kDouble);
  at::Tensor spacing = bf.abs().clamp_min(1e-30).log2().floor().exp2() * eps;
  return ((af - bf).abs() / spacing).max().item<double>();
}

class CpuKernels : public ::testing::TestWithParam<at::ScalarType> {
 protected:
  void SetUp() override { torch::manual_seed(0); }
  at::ScalarType dtype() const { return GetParam(); }
  at::Tensor randn(at::IntArrayRef sizes, double scale = 1.0) { return (at::randn(sizes) * scale).to(dtype()); }
  torch::NoGradGuard no_grad_;
  FusedScope fused_;
};

TEST_P(CpuKernels, RmsNormRoundsAsHuggingFaceDoes) {
  at::Tensor x = randn({3, 5, 96}, 3.0), w = randn({96});
  at::Tensor xf = x.to(at::kFloat);
  at::Tensor expected = w * (xf * at::rsqrt(xf.pow(2).mean(-1, true) + 1e-6)).to(dtype());
  at::Tensor got = cpu::rms_norm(x, w, 1e-6);
  EXPECT_EQ(got.scalar_type(), dtype());
  // The sum of squares is added in another order: a few float ulps, which can
  // move a 16-bit rounding by one step.
  EXPECT_LE(max_ulps(got, expected), dtype() == at::kFloat ? 8.0 : 1.0);
}

TEST_P(CpuKernels, SiluMulMatchesTheTwoOps) {
  at::Tensor gate = randn({4, 1, 1000}, 4.0), up = randn({4, 1, 1000});
  gate.view(-1).narrow(0, 0, 4).copy_(at::tensor({-100.0, 100.0, 0.0, -87.5}).to(dtype()));  // saturated ends
  // silu computed in float and rounded, as LibTorch's 16-bit kernels do (1.13 has none for half).
  at::Tensor expected = at::silu(gate.to(at::kFloat)).to(dtype()) * up;
  at::Tensor got = cpu::silu_mul(gate, up);
  // e^x is a polynomial within 2 float ulps; one step in silu's rounding can
  // become two in the product.
  EXPECT_LE(max_ulps(got, expected), dtype() == at::kFloat ? 8.0 : 2.0);
  EXPECT_TRUE(at::isfinite(got).all().item<bool>());
}

// The halves of a packed gate/up product, rows of a stride of 2n, read in
// place: the values of the same halves copied out first, to the bit, with
// chunks of the parallel loop that start and end inside rows.
TEST_P(CpuKernels, SiluMulReadsTheHalvesOfAPackedProductInPlace) {
  at::Tensor both = randn({3, 7, 2 * 3000}, 4.0);
  at::Tensor gate = both.narrow(-1, 0, 3000), up = both.narrow(-1, 3000, 3000);
  EXPECT_EQ(row_stride(gate), 6000);
  const at::Tensor got = cpu::silu_mul(gate, up);
  EXPECT_TRUE(got.is_contiguous());
  EXPECT_TRUE(at::equal(got, cpu::silu_mul(gate.contiguous(), up.contiguous())));
  // A layout without one row stride is copied first: the same values.
  at::Tensor crossed = randn({3000, 7}).t();
  EXPECT_EQ(row_stride(crossed), -1);
  EXPECT_TRUE(at::equal(cpu::silu_mul(crossed, up.select(0, 1)), cpu::silu_mul(crossed.contiguous(), up.select(0, 1))));
}

TEST(RowStride, StepsFromRowToRowWhereOneStrideDoes) {
  const at::Tensor t = at::zeros({2, 3, 8});
  EXPECT_EQ(row_stride(t), 8);
  EXPECT_EQ(row_stride(t.narrow(-1, 4, 4)), 8);
  EXPECT_EQ(row_stride(t.narrow(1, 0, 2)), -1);  // rows 0-1 and 3-4 of 6: no one stride
  EXPECT_EQ(row_stride(t.narrow(0, 1, 1).narrow(-1, 0, 4)), 8);
  EXPECT_EQ(row_stride(t.select(1, 0).narrow(-1, 0, 2).unsqueeze(1)), 24);
  EXPECT_EQ(row_stride(at::zeros({1, 1, 5})), 5);
  EXPECT_EQ(row_stride(t.transpose(1, 2)), -1);
  EXPECT_EQ(row_stride(at::zeros({0, 8})), -1);
}

TEST_P(CpuKernels, RopeMatchesRotateHalf) {
  // x as the model hands it over: [B, T, H, D] from the projection, viewed as [B, H, T, D].
  at::Tensor x = randn({2, 3, 4, 48}).transpose(1, 2);
  at::Tensor cos = randn({2, 3, 48}), sin = randn({2, 3, 48});
  at::Tensor rotated = at::cat({-x.narrow(-1, 24, 24), x.narrow(-1, 0, 24)}, -1);
  at::Tensor expected = x * cos.unsqueeze(1) + rotated * sin.unsqueeze(1);
  at::Tensor got = cpu::rope(x, cos, sin);
  ASSERT_EQ(got.sizes(), expected.sizes());
  if (dtype() == at::kFloat)
    EXPECT_TRUE(at::allclose(got, expected, 1e-6, 1e-6));  // a fused multiply-add may round once less
  else
    EXPECT_TRUE(at::equal(got, expected));
}

// Attention in double precision with the same broadcasting as the model's path.
at::Tensor reference_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& mask,
                               double scale) {
  at::Tensor scores = at::matmul(q.to(at::kDouble), k.to(at::kDouble).transpose(-2, -1)) * scale + mask.to(at::kDouble);
  return at::matmul(at::softmax(scores, -1), v.to(at::kDouble));
}

TEST_P(CpuKernels, DecodeAttentionMatchesSoftmaxAttention) {
  const double tol = dtype() == at::kFloat ? 1e-5 : dtype() == at::kHalf ? 2e-3 : 1e-2;
  for (int64_t D : {64, 128, 40}) {
    for (int64_t S : {1, 7, 33}) {
      const int64_t B = 3, H = 2, R = 4, capacity = S + 5;
      // Keys and values as KV-cache views: a prefix of a larger buffer.
      at::Tensor k = randn({B, H, capacity, D}).narrow(2, 0, S), v = randn({B, H, capacity, D}).narrow(2, 0, S);
      at::Tensor q = randn({B, H, R, D});
      at::Tensor mask = at::zeros({B, 1, R, S});
      if (S > 2) mask.select(0, 1).narrow(-1, 0, 2).fill_(-1e4);  // left padding of row 1
      mask = mask.to(dtype());
      const double scale = 1.0 / std::sqrt(static_cast<double>(D));
      at::Tensor got = cpu::decode_attention(q, k, v, mask, scale);
      at::Tensor expected = reference_attention(q, k, v, mask, scale);
      EXPECT_EQ(got.scalar_type(), dtype());
      EXPECT_TRUE(at::allclose(got.to(at::kDouble), expected, tol, tol))
          << "D " << D << " S " << S << " max diff " << (got.to(at::kDouble) - expected).abs().max().item<double>();
    }
  }
}

TEST_P(CpuKernels, AFullyMaskedRowAveragesTheValues) {
  // Padding rows see only masked keys: their output is finite, and in float32,
  // where the mask is the lowest float and swamps the scores, the softmax is
  // uniform, as in the unfused path.
  at::Tensor q = randn({1, 1, 1, 64}), k = randn({1, 1, 5, 64}), v = randn({1, 1, 5, 64});
  const double lowest = dtype() == at::kFloat ? std::numeric_limits<float>::lowest() : -1e4;
  at::Tensor mask = at::full({1, 1, 1, 5}, lowest).to(dtype());
  at::Tensor got = cpu::decode_attention(q, k, v, mask, 0.125);
  EXPECT_TRUE(at::isfinite(got).all().item<bool>());
  if (dtype() == at::kFloat) EXPECT_TRUE(at::allclose(got, v.mean(2, true), 1e-6, 1e-6));
  // The same row with its last key unmasked attends to that key alone.
  mask.index_put_({0, 0, 0, 4}, 0);
  got = cpu::decode_attention(q, k, v, mask, 0.125);
  EXPECT_TRUE(at::allclose(got.to(at::kFloat), v.narrow(2, 4, 1).to(at::kFloat), 1e-2, 1e-2));
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CpuKernels, ::testing::Values(at::kFloat, at::kBFloat16, at::kHalf),
                         [](const auto& info) { return std::string(c10::toString(info.param)); });

TEST(CpuKernelsApply, OnlyInAFusedScopeWithoutGradientOnTheCpu) {
  at::Tensor x = at::randn({2, 3});
  EXPECT_FALSE(cpu::applies({x}));
  FusedScope fused;
  EXPECT_TRUE(cpu::applies({x}));
  EXPECT_FALSE(cpu::applies({x.to(at::kDouble)}));
  EXPECT_FALSE(cpu::applies({x.to(at::kBFloat16), x}));  // mixed dtypes promote in the at:: ops
  at::Tensor p = torch::randn({3}, torch::requires_grad());
  EXPECT_FALSE(cpu::applies({x, p}));
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(cpu::applies({x, p}));
}

}  // namespace
