// The fused CUDA kernels' per-element math (cuda_kernel_math.h), run on the
// host over whole tensors against LibTorch's CPU ops: rope to the bit in every
// layout the model hands it (a projection's transposed view, cos/sin of one
// row broadcast), a decoding step's keys and values written into slot caches,
// the residual add and RMSNorm's last step (given the same rsqrt), silu_mul
// within a rounding step of the dtype (the host's expf is not CUDA's), a
// decoding step's record in slots against hand-worked values. The
// GPU's tests (gpu_kernels_test.cpp) run the kernels themselves.
#include <gtest/gtest.h>
#include <torch/types.h>
#include <torch/utils.h>

#include <cmath>
#include <limits>
#include <tuple>

#include "model/cuda_kernel_math.h"
#include "model/rope.h"
#include "slot_write_oracle.h"

using namespace grpo::model;
namespace math = grpo::model::gpu::math;

namespace {

// Calls fn(scalar_type_tag) for float, bfloat16 and float16.
template <class Fn>
void each_dtype(Fn fn) {
  fn(float{}, at::kFloat, 0x1p-23);
  fn(c10::BFloat16{}, at::kBFloat16, 0x1p-7);
  fn(c10::Half{}, at::kHalf, 0x1p-10);
}

// Every element of got within one rounding step (relative `step`) of want's.
void expect_within_a_step(const at::Tensor& got, const at::Tensor& want, double step, const std::string& what) {
  const at::Tensor g = got.to(at::kDouble), w = want.to(at::kDouble);
  const at::Tensor bound = w.abs() * step + 1e-6 * w.abs().max().item<double>();
  EXPECT_EQ(((g - w).abs() > bound).sum().item<int64_t>(), 0)
      << what << ": largest difference " << (g - w).abs().max().item<double>();
}

TEST(CudaKernelMath, RopeIsTheAtOpsToTheBitInTheModelsLayouts) {
  torch::manual_seed(5);
  ModelConfig c;
  c.head_dim = 16;
  each_dtype([&](auto tag, at::ScalarType dtype, double) {
    using T = decltype(tag);
    const at::Tensor positions = at::randint(0, 30000, {3, 5}, at::kLong);
    auto [cos, sin] = rope_cos_sin(rope_inv_freq(c), positions, dtype);
    auto [cos1, sin1] = rope_cos_sin(rope_inv_freq(c), positions.narrow(0, 0, 1), dtype);
    const at::Tensor projected = at::randn({3, 5, 4, 16}).to(dtype);  // [B, T, H, D]
    for (const at::Tensor& x : {projected.transpose(1, 2), projected.transpose(1, 2).contiguous()}) {
      for (bool broadcast : {false, true}) {
        const at::Tensor& co = broadcast ? cos1 : cos;
        const at::Tensor& si = broadcast ? sin1 : sin;
        const at::Tensor want = apply_rope(x, co, si);  // outside a FusedScope: the at:: ops
        at::Tensor got = at::empty(x.sizes(), x.options());
        const math::RopeShape s = math::rope_shape(x, co, si);
        T* out = got.data_ptr<T>();
        for (int64_t i = 0; i < got.numel(); ++i)
          out[i] = math::rope_value(x.const_data_ptr<T>(), co.const_data_ptr<T>(), si.const_data_ptr<T>(), s, i);
        EXPECT_TRUE(at::equal(got, want)) << dtype << (x.is_contiguous() ? " contiguous" : " transposed")
                                          << (broadcast ? ", cos/sin broadcast" : "");
      }
    }
  });
}

TEST(CudaKernelMath, SiluMulIsTheAtOpsWithinARoundingStep) {
  torch::manual_seed(6);
  each_dtype([&](auto tag, at::ScalarType dtype, double step) {
    using T = decltype(tag);
    const at::Tensor gate = (at::randn({4000}) * 6).to(dtype), up = at::randn({4000}).to(dtype);
    at::Tensor got = at::empty_like(gate);
    for (int64_t i = 0; i < gate.numel(); ++i)
      got.data_ptr<T>()[i] = math::silu_mul_value(gate.const_data_ptr<T>()[i], up.const_data_ptr<T>()[i]);
    expect_within_a_step(got, at::silu(gate) * up, step, std::string("silu_mul ") + c10::toString(dtype));
  });
}

TEST(CudaKernelMath, RmsNormsLastStepIsHuggingFacesToTheBit) {
  torch::manual_seed(7);
  each_dtype([&](auto tag, at::ScalarType dtype, double) {
    using T = decltype(tag);
    const int64_t N = 896;
    const at::Tensor x = (at::randn({N}) * 3).to(dtype), weight = (at::rand({N}) + 0.5).to(dtype);
    const at::Tensor xf = x.to(at::kFloat);
    const float inv = at::rsqrt(xf.pow(2).mean() + 1e-6).item<float>();
    at::Tensor got = at::empty_like(x);
    for (int64_t i = 0; i < N; ++i)
      got.data_ptr<T>()[i] = math::rms_norm_value(x.const_data_ptr<T>()[i], weight.const_data_ptr<T>()[i], inv);
    EXPECT_TRUE(at::equal(got, weight * (xf * inv).to(dtype))) << "rms_norm " << dtype;
  });
}

TEST(CudaKernelMath, TheResidualAddIsTheAtOpsToTheBit) {
  torch::manual_seed(8);
  each_dtype([&](auto tag, at::ScalarType dtype, double) {
    using T = decltype(tag);
    const at::Tensor x = (at::randn({4000}) * 50).to(dtype), residual = at::randn({4000}).to(dtype);
    at::Tensor got = at::empty_like(x);
    for (int64_t i = 0; i < x.numel(); ++i)
      got.data_ptr<T>()[i] = math::add_value(x.const_data_ptr<T>()[i], residual.const_data_ptr<T>()[i]);
    EXPECT_TRUE(at::equal(got, x + residual)) << "add " << dtype;
  });
}

// A decoding step's keys and values written into slot caches: each row's key
// rotated and both written at the row's position, as the at:: path (rope,
// then a scatter along positions) writes them; a position past the slot
// writes nothing.
TEST(CudaKernelMath, ASlotWriteIsTheRotationAndTheScatterToTheBit) {
  torch::manual_seed(9);
  ModelConfig c;
  c.head_dim = 8;
  each_dtype([&](auto tag, at::ScalarType dtype, double) {
    using T = decltype(tag);
    const int64_t b = 3, H = 2, D = 8, capacity = 10;
    const at::Tensor positions = at::tensor(std::vector<int64_t>{3, 0, 9});
    auto [cos, sin] = rope_cos_sin(rope_inv_freq(c), positions.view({b, 1}), dtype);
    const at::Tensor k = at::randn({b, 1, H, D}).to(dtype).transpose(1, 2);
    const at::Tensor v = at::randn({b, 1, H, D}).to(dtype).transpose(1, 2);
    const at::Tensor keys = at::randn({4, H, capacity, D}).to(dtype), values = at::randn({4, H, capacity, D}).to(dtype);
    for (int64_t past : {int64_t{-1}, capacity}) {  // row 1 outside its slot, on either side
      at::Tensor where = positions.clone();
      where[1] = past;
      const auto [want_k, want_v] = grpo::testing::slot_write_by_at_ops(keys, values, k, v, cos, sin, where, {0, 2});
      at::Tensor got_k = keys.clone(), got_v = values.clone();
      const math::SlotWrite w = math::slot_write(k, v, cos, sin, got_k);
      for (int64_t i = 0; i < k.numel(); ++i)
        math::write_slot_element(k.const_data_ptr<T>(), v.const_data_ptr<T>(), cos.const_data_ptr<T>(),
                                 sin.const_data_ptr<T>(), where.const_data_ptr<int64_t>(), got_k.data_ptr<T>(),
                                 got_v.data_ptr<T>(), w, i);
      EXPECT_TRUE(at::equal(got_k, want_k)) << dtype << ", a row at " << past;
      EXPECT_TRUE(at::equal(got_v, want_v)) << dtype << ", a row at " << past;
    }
  });
}

// A decoding step's record in slots, for rows in each state, against values
// worked out by hand: a live row, a done one (untouched), one that samples a
// stop id, one whose record is full (the last column) and its budget spent.
TEST(CudaKernelMath, AStepsRecordIsWhatTheAtOpsOfTheSlotStepKeep) {
  const auto longs = [](std::vector<int64_t> v) { return at::tensor(v, at::kLong); };
  const at::Tensor sampled = longs({5, 9, 3, 7});
  const at::Tensor logprob = at::tensor(std::vector<float>{-0.5f, -1.5f, -2.5f, -3.5f});
  const at::Tensor budget = longs({4, 4, 4, 5});
  // Two stop ids per row, -1 the padding, read through rows of three.
  const at::Tensor stops = longs({9, -1, 0, 9, -1, 0, 9, 3, 0, -1, -1, 0}).view({4, 3}).narrow(1, 0, 2);
  at::Tensor done = at::tensor(std::vector<uint8_t>{0, 1, 0, 0}).to(at::kBool);
  at::Tensor generated = longs({1, 2, 0, 4}), positions = longs({17, 12, 20, 30}), tokens = longs({8, 8, 8, 8});
  at::Tensor out_ids = at::full({4, 4}, -7, at::kLong), out_logprobs = at::full({4, 4}, 1.0f);
  const math::StepBooks books{4, out_ids.stride(0), 2, stops.stride(0)};
  for (int64_t r = 0; r < 4; ++r)
    math::record_step_row(r, sampled.const_data_ptr<int64_t>(), logprob.const_data_ptr<float>(),
                          budget.const_data_ptr<int64_t>(), stops.const_data_ptr<int64_t>(), done.data_ptr<bool>(),
                          generated.data_ptr<int64_t>(), positions.data_ptr<int64_t>(), tokens.data_ptr<int64_t>(),
                          out_ids.data_ptr<int64_t>(), out_logprobs.data_ptr<float>(), books);
  EXPECT_TRUE(at::equal(done, at::tensor(std::vector<uint8_t>{0, 1, 1, 1}).to(at::kBool))) << done;
  EXPECT_TRUE(at::equal(generated, longs({2, 2, 1, 5}))) << generated;
  EXPECT_TRUE(at::equal(positions, longs({18, 12, 21, 31}))) << positions;
  EXPECT_TRUE(at::equal(tokens, longs({5, 8, 3, 7}))) << tokens;
  at::Tensor want_ids = at::full({4, 4}, -7, at::kLong), want_logprobs = at::full({4, 4}, 1.0f);
  for (auto [r, c, id, lp] : {std::tuple{0, 1, 5, -0.5f}, std::tuple{2, 0, 3, -2.5f}, std::tuple{3, 3, 7, -3.5f}}) {
    want_ids[r][c] = id;
    want_logprobs[r][c] = lp;
  }
  EXPECT_TRUE(at::equal(out_ids, want_ids)) << out_ids;
  EXPECT_TRUE(at::equal(out_logprobs, want_logprobs)) << out_logprobs;
}

}  // namespace

// A decoding step's prelude: the angles, taken the cosine and sine of in
// LibTorch's ops and rounded to the dtype, are rope_cos_sin's to the bit (the
// angle and its column's frequency both right); the mask is the model's
// additive mask (0 up to the row's position, the dtype's mask value past it).
TEST(CudaKernelMath, AStepsRotaryAnglesAndMaskAreTheModelsToTheBit) {
  ModelConfig c;
  c.head_dim = 64;
  const at::Tensor inv_freq = rope_inv_freq(c), positions = at::tensor({0, 5, 77, 4095, 30001}, at::kLong);
  const int64_t b = positions.size(0), D = c.head_dim, span = 96;
  at::Tensor angles = at::empty({b, 1, D});
  for (int64_t r = 0; r < b; ++r)
    for (int64_t j = 0; j < D; ++j)
      angles[r][0][j] = math::rope_angle(positions[r].item<int64_t>(), inv_freq.const_data_ptr<float>(), D / 2, j);
  each_dtype([&](auto tag, at::ScalarType dtype, double) {
    using T = decltype(tag);
    auto [cos, sin] = rope_cos_sin(inv_freq, positions.view({b, 1}), dtype);
    EXPECT_TRUE(at::equal(angles.cos().to(dtype), cos)) << dtype;
    EXPECT_TRUE(at::equal(angles.sin().to(dtype), sin)) << dtype;
    const double masked = dtype == at::kFloat ? std::numeric_limits<float>::lowest() : -1e4;
    const at::Tensor allowed = at::arange(span, at::kLong).view({1, span}) <= positions.view({b, 1});
    const at::Tensor want = at::zeros({b, span}, dtype).masked_fill_(allowed.logical_not(), masked);
    at::Tensor got = at::empty({b, span}, dtype);
    for (int64_t r = 0; r < b; ++r)
      for (int64_t k = 0; k < span; ++k)
        got.data_ptr<T>()[r * span + k] = math::step_mask_value<T>(positions[r].item<int64_t>(), k);
    EXPECT_TRUE(at::equal(got, want)) << dtype;
  });
}
