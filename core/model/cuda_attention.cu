// gpu::slot_attention: a decoding step's attention over the slot cache in one
// kernel. LibTorch's fused attention needs the additive mask copied per query
// head, pads it, and leaves its result for a transpose copy before o_proj:
// three or four launches per layer, and every row reads the whole span of
// keys. Here a block serves one row's kv head for all the query heads that
// share it (keys and values read once), over that row's own keys only,
// rotates the queries as it reads them (no rope launch for q either) and
// writes o_proj's input; when rows x kv heads are too few to fill the GPU
// (small batches), a row's keys are split among blocks whose parts the last
// of them joins (slot_attention_math.h), so a step stays one launch.
#include "model/cuda_kernels.h"

#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

#include <algorithm>

#include "model/cuda_common.cuh"
#include "model/slot_attention_kernel.cuh"

namespace grpo::model::gpu {

using detail::check_on_device_of;

bool slot_attention_applies(const at::Tensor& q, const at::Tensor& cos, const at::Tensor& sin, const at::Tensor& keys,
                            const at::Tensor& values) {
  if (!applies({q, cos, sin, keys, values}) || q.dim() != 4 || q.size(2) != 1 || q.size(3) % 2 != 0) return false;
  const int64_t b = q.size(0);
  return cos.dim() == 3 && cos.size(0) == b && cos.size(1) == 1 && sin.sizes() == cos.sizes() && keys.dim() == 4 &&
         keys.size(0) == b && keys.size(3) == q.size(3) && keys.stride(3) == 1 && q.size(1) % keys.size(1) == 0 &&
         values.sizes() == keys.sizes() && values.strides() == keys.strides() && b <= 65535 && keys.size(1) <= 65535 &&
         math::attention_fits(q.size(1) / keys.size(1), q.size(3));
}

at::Tensor slot_attention(const at::Tensor& q, const at::Tensor& cos, const at::Tensor& sin, const at::Tensor& keys,
                          const at::Tensor& values, const at::Tensor& positions, int64_t span, double scale,
                          const at::Tensor& counters) {
  check_on_device_of(q, {cos, sin, keys, values, positions, counters}, "slot_attention");
  TORCH_CHECK(q.dim() == 4 && q.size(2) == 1 && q.size(3) % 2 == 0,
              "slot_attention: q must be one step's [b, Hq, 1, D] with D even, got ", q.sizes());
  const int64_t b = q.size(0), heads = q.size(1), D = q.size(3);
  for (const at::Tensor* t : {&cos, &sin})
    TORCH_CHECK(t->dim() == 3 && t->size(0) == b && t->size(1) == 1 && t->size(2) == D &&
                    t->scalar_type() == q.scalar_type(),
                "slot_attention: cos/sin ", t->sizes(), " ", t->scalar_type(), " for q ", q.sizes(), " ",
                q.scalar_type());
  TORCH_CHECK(keys.dim() == 4 && keys.size(0) == b && keys.size(3) == D && keys.stride(3) == 1 &&
                  heads % keys.size(1) == 0 && values.sizes() == keys.sizes() && values.strides() == keys.strides() &&
                  keys.scalar_type() == q.scalar_type() && values.scalar_type() == q.scalar_type(),
              "slot_attention: caches ", keys.sizes(), " / ", values.sizes(), " do not serve q ", q.sizes());
  const int64_t kv_heads = keys.size(1), rep = heads / kv_heads;
  TORCH_CHECK(math::attention_fits(rep, D), "slot_attention: ", rep, " query heads per kv head of dim ", D,
              " are past what the kernel takes");
  TORCH_CHECK(span >= 1 && span <= keys.size(2), "slot_attention: a span of ", span, " in ", keys.size(2),
              " positions");
  TORCH_CHECK(positions.scalar_type() == at::kLong && positions.numel() == b && positions.is_contiguous(),
              "slot_attention: positions must be [b] int64");
  TORCH_CHECK(counters.scalar_type() == at::kInt && counters.is_contiguous() && counters.numel() >= b * kv_heads,
              "slot_attention: counters must be int32, one per row and kv head");
  TORCH_CHECK(b <= 65535 && kv_heads <= 65535, "slot_attention: ", b, " rows of ", kv_heads,
              " kv heads are more than one launch takes");
  at::Tensor out = at::empty({b, 1, heads * D}, q.options());
  if (b == 0) return out;
  const c10::cuda::CUDAGuard guard(q.device());
  const math::AttentionSplit split =
      math::attention_split(b, kv_heads, span, at::cuda::getCurrentDeviceProperties()->multiProcessorCount);
  const attention::Shape s = attention::shape_of(q, cos, sin, keys, span, scale, split);
  at::Tensor part_acc, part_ml;  // the splits' parts, allocated only when a row is split
  if (split.splits > 1) {
    part_acc = at::empty({b * kv_heads * split.splits * rep * D}, q.options().dtype(at::kFloat));
    part_ml = at::empty({b * kv_heads * 2 * rep * split.splits}, q.options().dtype(at::kFloat));
  }
  const dim3 grid(static_cast<unsigned int>(split.splits), static_cast<unsigned int>(kv_heads),
                  static_cast<unsigned int>(b));
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, q.scalar_type(), "grpo_slot_attention", [&] {
    attention::slot_attention_kernel<scalar_t>
        <<<grid, attention::kThreads, attention::shared_bytes(s), at::cuda::getCurrentCUDAStream()>>>(
        q.const_data_ptr<scalar_t>(), cos.const_data_ptr<scalar_t>(), sin.const_data_ptr<scalar_t>(),
        keys.const_data_ptr<scalar_t>(), values.const_data_ptr<scalar_t>(),
        positions.const_data_ptr<int64_t>(), out.mutable_data_ptr<scalar_t>(),
        part_acc.defined() ? part_acc.mutable_data_ptr<float>() : nullptr,
        part_ml.defined() ? part_ml.mutable_data_ptr<float>() : nullptr,
        reinterpret_cast<unsigned int*>(counters.mutable_data_ptr<int>()), s, attention::region_a_floats(s));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return out;
}

}  // namespace grpo::model::gpu
