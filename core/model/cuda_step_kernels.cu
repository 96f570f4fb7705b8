// The fused kernels of a decoding step around its layers (cuda_kernels.h):
// the rotary cos/sin and mask before the first layer, sampling after the
// last, and the step's record in slots.
#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

#include <algorithm>
#include <cmath>
#include <tuple>

#include "model/cuda_common.cuh"
#include "model/cuda_kernel_math.h"
#include "model/cuda_kernels.h"
#include "model/sample_kernel.cuh"
#include "model/step_kernels.cuh"

namespace grpo::model::gpu {

using detail::blocks_for;
using detail::check_on_device_of;

std::tuple<at::Tensor, at::Tensor, at::Tensor> step_prelude(const at::Tensor& positions, const at::Tensor& inv_freq,
                                                            int64_t span, at::ScalarType dtype) {
  check_on_device_of(positions, {inv_freq}, "step_prelude");
  TORCH_CHECK(positions.dim() == 1 && positions.is_contiguous() && positions.scalar_type() == at::kLong,
              "step_prelude: positions must be [b] int64, got ", positions.sizes(), " ", positions.scalar_type());
  TORCH_CHECK(inv_freq.dim() == 1 && inv_freq.is_contiguous() && inv_freq.scalar_type() == at::kFloat &&
                  inv_freq.numel() > 0 && span > 0,
              "step_prelude: inv_freq must be [D/2] float32 and span positive, got ", inv_freq.sizes(), " ",
              inv_freq.scalar_type(), ", span ", span);
  const int64_t b = positions.size(0), D = 2 * inv_freq.numel();
  const at::TensorOptions options = positions.options().dtype(dtype);
  at::Tensor cos = at::empty({b, 1, D}, options), sin = at::empty({b, 1, D}, options);
  at::Tensor mask = at::empty({b, 1, 1, span}, options);
  const int64_t n = b * (D + span);
  if (n == 0) return {cos, sin, mask};
  const c10::cuda::CUDAGuard guard(positions.device());
  constexpr int kThreads = 256;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, dtype, "grpo_step_prelude", [&] {
    step::step_prelude_kernel<scalar_t>
        <<<blocks_for(n, kThreads), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
        positions.const_data_ptr<int64_t>(), inv_freq.const_data_ptr<float>(), cos.mutable_data_ptr<scalar_t>(),
        sin.mutable_data_ptr<scalar_t>(), mask.mutable_data_ptr<scalar_t>(), n, D, span);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return {cos, sin, mask};
}

std::pair<at::Tensor, at::Tensor> sample_rows(const at::Tensor& logits_in, double temperature, const at::Tensor& draws) {
  TORCH_CHECK(logits_in.dim() == 2 && logits_in.size(1) > 0, "sample_rows: logits must be [B, V], got ",
              logits_in.sizes());
  const at::Tensor logits = logits_in.stride(1) == 1 ? logits_in : logits_in.contiguous();
  const int64_t B = logits.size(0), V = logits.size(1);
  TORCH_CHECK(draws.scalar_type() == at::kFloat && draws.numel() == B && draws.is_contiguous() &&
                  draws.device() == logits.device(),
              "sample_rows: draws must be [B] float32 on ", logits.device());
  TORCH_CHECK(temperature > 0, "sample_rows: temperature must be positive");
  at::Tensor tokens = at::empty({B}, logits.options().dtype(at::kLong)),
             logprobs = at::empty({B}, logits.options().dtype(at::kFloat));
  if (B == 0) return {tokens, logprobs};
  TORCH_CHECK(B <= INT32_MAX, "sample_rows: ", B, " rows are more than one launch takes");
  const c10::cuda::CUDAGuard guard(logits.device());
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, logits.scalar_type(), "grpo_sample_rows", [&] {
    sampling::sample_kernel<scalar_t>
        <<<static_cast<unsigned int>(B), sampling::kSampleThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
        logits.const_data_ptr<scalar_t>(), logits.stride(0), V, 1.0f / static_cast<float>(temperature),
        draws.const_data_ptr<float>(), tokens.mutable_data_ptr<int64_t>(), logprobs.mutable_data_ptr<float>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return {tokens, logprobs};
}

void record_step(const at::Tensor& sampled_in, const at::Tensor& logprobs_in, const at::Tensor& budget,
                 const at::Tensor& stop_ids, const at::Tensor& done, const at::Tensor& generated,
                 const at::Tensor& positions, const at::Tensor& tokens, const at::Tensor& out_ids,
                 const at::Tensor& out_logprobs) {
  const int64_t b = done.numel();
  const at::Tensor sampled = sampled_in.contiguous(), logprobs = logprobs_in.contiguous();
  const at::Device device = done.device();
  for (const at::Tensor* t : {&sampled, &logprobs, &budget, &done, &generated, &positions, &tokens})
    TORCH_CHECK(t->dim() == 1 && t->size(0) == b && t->is_contiguous() && t->device() == device,
                "record_step: every per-row tensor must be [", b, "] and contiguous on ", device, ", got ", t->sizes());
  for (const at::Tensor* t : {&stop_ids, &out_ids, &out_logprobs})
    TORCH_CHECK(t->dim() == 2 && t->size(0) == b && t->size(1) > 0 && t->stride(1) == 1 && t->device() == device,
                "record_step: stop ids and the record must be [", b, ", n] with rows contiguous, got ", t->sizes());
  TORCH_CHECK(sampled.scalar_type() == at::kLong && budget.scalar_type() == at::kLong &&
                  generated.scalar_type() == at::kLong && positions.scalar_type() == at::kLong &&
                  tokens.scalar_type() == at::kLong && stop_ids.scalar_type() == at::kLong &&
                  out_ids.scalar_type() == at::kLong && logprobs.scalar_type() == at::kFloat &&
                  out_logprobs.scalar_type() == at::kFloat && done.scalar_type() == at::kBool &&
                  out_ids.sizes() == out_logprobs.sizes() && out_ids.stride(0) == out_logprobs.stride(0),
              "record_step: ids, counts and positions int64, log-probabilities float32, done bool");
  if (b == 0) return;
  const math::StepBooks books{out_ids.size(1), out_ids.stride(0), stop_ids.size(1), stop_ids.stride(0)};
  const c10::cuda::CUDAGuard guard(device);
  constexpr int kThreads = 128;
  step::record_step_kernel<<<static_cast<unsigned int>((b + kThreads - 1) / kThreads), kThreads, 0,
                             at::cuda::getCurrentCUDAStream()>>>(
      sampled.const_data_ptr<int64_t>(), logprobs.const_data_ptr<float>(), budget.const_data_ptr<int64_t>(),
      stop_ids.const_data_ptr<int64_t>(), done.mutable_data_ptr<bool>(), generated.mutable_data_ptr<int64_t>(),
      positions.mutable_data_ptr<int64_t>(), tokens.mutable_data_ptr<int64_t>(), out_ids.mutable_data_ptr<int64_t>(),
      out_logprobs.mutable_data_ptr<float>(), books, b);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace grpo::model::gpu
