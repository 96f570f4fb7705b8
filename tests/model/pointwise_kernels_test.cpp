// gpu::silu_mul's, gpu::rope's and gpu::rope_into_slots' kernels
// (model/pointwise_kernels.cuh) run on the host, their own source, block by
// block and thread by thread (cuda_block_emulation.h), with the arguments
// their launches in cuda_kernels.cu derive from the tensors the model hands
// them: the halves of a packed gate/up product read in place, a projection's
// transposed view, cos/sin broadcast over the batch, a step's keys written
// into slots with one row outside its slot. Each grid is the launch's and
// one too small for an element per thread (the loops stride). The per-element
// math is CudaKernelMath's; what these check is that every element is
// visited once, at the right place. The GPU's tests run them on the device.
#include <gtest/gtest.h>
#include <torch/types.h>

#include <cmath>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "model/model_config.h"
#include "model/rope.h"
#include "model/row_layout.h"
#include "rounding_steps.h"
#include "slot_write_oracle.h"
// After every other header: it defines CUDA's keywords for the kernels' source.
#include "cuda_block_emulation.h"
#include "model/cuda_common.cuh"
#include "model/pointwise_kernels.cuh"

using namespace grpo::model;
namespace emu = grpo::testing::cuda_emulation;
namespace math = grpo::model::gpu::math;
namespace pointwise = grpo::model::gpu::pointwise;

namespace {

// The launch's grid for n elements (256 threads a block, as cuda_kernels.cu
// launches these), and 2 blocks of 32 threads, which stride.
std::vector<std::pair<unsigned int, int>> grids_for(int64_t n) {
  return {{gpu::detail::blocks_for(n, 256), 256}, {2, 32}};
}

std::string grid_name(at::ScalarType dtype, const std::pair<unsigned int, int>& grid) {
  return std::string(c10::toString(dtype)) + ", " + std::to_string(grid.first) + " blocks of " +
         std::to_string(grid.second);
}

// silu_mul over [2, 3, I] halves of a packed [2, 3, 2I] product, read in place
// (rows 2I apart), and over contiguous ones: each element is the per-element
// math of its own gate and up, to the bit, and at::silu(gate) * up within a
// rounding step.
TEST(PointwiseKernels, SiluMulReadsPackedHalvesInPlaceAndContiguousOnes) {
  torch::manual_seed(11);
  const int64_t I = 72;
  for (at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
    const at::Tensor packed = (at::randn({2, 3, 2 * I}) * 4).to(dtype);
    const at::Tensor halves[2] = {packed.narrow(-1, 0, I), packed.narrow(-1, I, I)};
    const at::Tensor copies[2] = {halves[0].contiguous(), halves[1].contiguous()};
    for (const at::Tensor* pair : {halves, copies}) {
      const at::Tensor &gate = pair[0], &up = pair[1];
      ASSERT_EQ(row_stride(gate), gate.is_contiguous() ? I : 2 * I);
      const int64_t n = gate.numel();
      at::Tensor want = at::empty(gate.sizes(), gate.options());
      AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, dtype, "silu_mul_math", [&] {
        for (int64_t i = 0; i < n; ++i)
          want.data_ptr<scalar_t>()[i] = math::silu_mul_value(copies[0].const_data_ptr<scalar_t>()[i],
                                                              copies[1].const_data_ptr<scalar_t>()[i]);
      });
      for (const auto& grid : grids_for(n)) {
        SCOPED_TRACE(grid_name(dtype, grid) + (gate.is_contiguous() ? ", contiguous" : ", packed halves"));
        at::Tensor out = at::full(gate.sizes(), NAN, gate.options());
        AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, dtype, "emulated_silu_mul", [&] {
          emu::launch({grid.first, 1, 1}, grid.second, 0, /*seed=*/3, pointwise::silu_mul_kernel<scalar_t>,
                      gate.const_data_ptr<scalar_t>(), up.const_data_ptr<scalar_t>(), out.mutable_data_ptr<scalar_t>(),
                      n, gate.size(-1), row_stride(gate), row_stride(up));
        });
        EXPECT_TRUE(at::equal(out, want));
        grpo::testing::expect_within_steps(out, at::silu(gate) * up, 1, "silu_mul");
      }
    }
  }
}

// rope over x [B, H, T, D] as the attention hands it (a transposed view of
// the projection [B, T, H, D]) with cos/sin per row and broadcast from one:
// the at:: ops' rotation to the bit, written contiguously.
TEST(PointwiseKernels, RopeRotatesATransposedViewWithCosAndSinPerRowOrBroadcast) {
  torch::manual_seed(12);
  ModelConfig c;
  c.head_dim = 16;
  const at::Tensor positions = at::randint(0, 30000, {3, 5}, at::kLong);
  for (at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    // Tensors, not structured bindings: the lambdas below capture them.
    at::Tensor cos, sin, cos1, sin1;
    std::tie(cos, sin) = rope_cos_sin(rope_inv_freq(c), positions, dtype);
    std::tie(cos1, sin1) = rope_cos_sin(rope_inv_freq(c), positions.narrow(0, 0, 1), dtype);
    const at::Tensor x = at::randn({3, 5, 4, 16}).to(dtype).transpose(1, 2);
    for (bool broadcast : {false, true}) {
      const at::Tensor& co = broadcast ? cos1 : cos;
      const at::Tensor& si = broadcast ? sin1 : sin;
      const at::Tensor want = apply_rope(x, co, si);  // outside a FusedScope: the at:: ops
      const math::RopeShape s = math::rope_shape(x, co, si);
      for (const auto& grid : grids_for(x.numel())) {
        SCOPED_TRACE(grid_name(dtype, grid) + (broadcast ? ", cos/sin broadcast" : ""));
        at::Tensor out = at::full(x.sizes(), NAN, x.options());
        AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, dtype, "emulated_rope", [&] {
          emu::launch({grid.first, 1, 1}, grid.second, 0, /*seed=*/5, pointwise::rope_kernel<scalar_t>,
                      x.const_data_ptr<scalar_t>(), co.const_data_ptr<scalar_t>(), si.const_data_ptr<scalar_t>(),
                      out.mutable_data_ptr<scalar_t>(), s, x.numel());
        });
        EXPECT_TRUE(at::equal(out, want));
      }
    }
  }
}

// A step's keys and values [b, H, 1, D] (transposed views, as the projection
// hands them) into slot caches [slots, H, capacity, D]: each row's rotated key
// and its value at the row's position, a row outside its slot writing
// nothing, every other entry of the caches as it was.
TEST(PointwiseKernels, RopeIntoSlotsWritesEachRowAtItsPositionAndNothingOutside) {
  torch::manual_seed(13);
  ModelConfig c;
  c.head_dim = 16;
  const int64_t b = 3, H = 4, D = 16, capacity = 10;
  const at::Tensor positions = at::tensor(std::vector<int64_t>{3, capacity, 9});  // row 1 past its slot
  for (at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    at::Tensor cos, sin;
    std::tie(cos, sin) = rope_cos_sin(rope_inv_freq(c), positions.view({b, 1}), dtype);
    const at::Tensor k = at::randn({b, 1, H, D}).to(dtype).transpose(1, 2);
    const at::Tensor v = at::randn({b, 1, H, D}).to(dtype).transpose(1, 2);
    const at::Tensor keys = at::randn({4, H, capacity, D}).to(dtype), values = at::randn({4, H, capacity, D}).to(dtype);
    const auto [want_k, want_v] = grpo::testing::slot_write_by_at_ops(keys, values, k, v, cos, sin, positions, {0, 2});
    for (const auto& grid : grids_for(k.numel())) {
      SCOPED_TRACE(grid_name(dtype, grid));
      at::Tensor got_k = keys.clone(), got_v = values.clone();
      const math::SlotWrite w = math::slot_write(k, v, cos, sin, got_k);
      AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, dtype, "emulated_rope_into_slots", [&] {
        emu::launch({grid.first, 1, 1}, grid.second, 0, /*seed=*/7, pointwise::rope_into_slots_kernel<scalar_t>,
                    k.const_data_ptr<scalar_t>(), v.const_data_ptr<scalar_t>(), cos.const_data_ptr<scalar_t>(),
                    sin.const_data_ptr<scalar_t>(), positions.const_data_ptr<int64_t>(),
                    got_k.mutable_data_ptr<scalar_t>(), got_v.mutable_data_ptr<scalar_t>(), w, k.numel());
      });
      EXPECT_TRUE(at::equal(got_k, want_k));
      EXPECT_TRUE(at::equal(got_v, want_v));
    }
  }
}

}  // namespace
