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

// A decoding step's attention in double precision as the model's masked
// path computes it: the query heads of each kv head over the keys repeated,
// every key past a row's position (or past the span) masked out.
at::Tensor reference_slot_attention(const at::Tensor& q, const at::Tensor& keys, const at::Tensor& values,
                                    const at::Tensor& positions, int64_t span, double scale) {
  const int64_t b = q.size(0), heads = q.size(1), rep = heads / keys.size(1), D = q.size(3);
  at::Tensor k = keys.narrow(2, 0, span).to(at::kDouble).repeat_interleave(rep, 1);  // [b, Hq, span, D]
  at::Tensor v = values.narrow(2, 0, span).to(at::kDouble).repeat_interleave(rep, 1);
  at::Tensor seen = at::arange(span).view({1, 1, 1, span}) <= positions.to(at::kCPU).view({b, 1, 1, 1});
  at::Tensor scores = at::matmul(q.to(at::kDouble), k.transpose(-2, -1)) * scale;  // [b, Hq, 1, span]
  scores = scores.masked_fill(seen.logical_not(), -std::numeric_limits<double>::infinity());
  return at::matmul(at::softmax(scores, -1), v).view({b, 1, heads * D});
}

TEST_P(CpuKernels, SlotAttentionIsTheMaskedAttentionOverEachRowsOwnKeys) {
  const double tol = dtype() == at::kFloat ? 1e-5 : dtype() == at::kHalf ? 2e-3 : 1e-2;
  for (int64_t D : {64, 128, 40}) {
    for (int64_t rep : {1, 3}) {
      const int64_t b = 4, kv_heads = 2, capacity = 40, span = 33;
      // The caches as the slots hold them: the first b of more slots, and a
      // query as the rotary kernel leaves it, or a view of a packed product.
      const at::Tensor keys = randn({b + 2, kv_heads, capacity, D}).narrow(0, 0, b);
      const at::Tensor values = randn({b + 2, kv_heads, capacity, D}).narrow(0, 0, b);
      const at::Tensor q = randn({b, 1, kv_heads * rep + 1, D}).narrow(2, 0, kv_heads * rep).transpose(1, 2);
      // A row at its first position, two in the span, one past it (a finished
      // row's slot: it sees the whole span, as the mask lets it).
      const at::Tensor positions = at::tensor({int64_t{0}, int64_t{7}, int64_t{32}, int64_t{39}});
      const double scale = 1.0 / std::sqrt(static_cast<double>(D));
      const at::Tensor got = cpu::slot_attention(q, keys, values, positions, span, scale);
      const at::Tensor want = reference_slot_attention(q, keys, values, positions, span, scale);
      ASSERT_EQ(got.sizes(), want.sizes());
      EXPECT_EQ(got.scalar_type(), dtype());
      EXPECT_TRUE(at::allclose(got.to(at::kDouble), want, tol, tol))
          << "D " << D << " rep " << rep << " max diff " << (got.to(at::kDouble) - want).abs().max().item<double>();
      // A row at position 0 sees its first key alone: its output is that value.
      EXPECT_TRUE(at::allclose(got[0].view({kv_heads, rep, D}).to(at::kFloat),
                               values[0].narrow(1, 0, 1).expand({kv_heads, rep, D}).to(at::kFloat), 1e-6, 1e-6));
    }
  }
}

TEST_P(CpuKernels, SlotAttentionReadsNoKeyPastARowsPosition) {
  // Keys past each row's position hold NaN (stale or unwritten slots): the
  // result is still finite and that of the keys before.
  const int64_t b = 2, kv_heads = 1, rep = 2, D = 16, capacity = 12;
  at::Tensor keys = randn({b, kv_heads, capacity, D}), values = randn({b, kv_heads, capacity, D});
  const at::Tensor clean_keys = keys.clone(), clean_values = values.clone();
  const at::Tensor positions = at::tensor({int64_t{3}, int64_t{6}});
  keys[0].narrow(1, 4, capacity - 4).fill_(NAN);
  values[0].narrow(1, 4, capacity - 4).fill_(NAN);
  keys[1].narrow(1, 7, capacity - 7).fill_(NAN);
  values[1].narrow(1, 7, capacity - 7).fill_(NAN);
  const at::Tensor q = randn({b, kv_heads * rep, 1, D});
  const at::Tensor got = cpu::slot_attention(q, keys, values, positions, capacity, 0.25);
  EXPECT_TRUE(at::isfinite(got).all().item<bool>());
  EXPECT_TRUE(at::equal(got, cpu::slot_attention(q, clean_keys, clean_values, positions, capacity, 0.25)));
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
