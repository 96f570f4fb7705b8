#include "model/cuda_kernels.h"

#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/core/GradMode.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <string>

#include "model/cuda_common.cuh"
#include "model/cuda_kernel_math.h"
#include "model/fused_scope.h"
#include "model/norm_kernel.cuh"
#include "model/pointwise_kernels.cuh"
#include "model/row_layout.h"

namespace grpo::model::gpu {

using detail::blocks_for;
using detail::check_on_device_of;

namespace {

// GRPO_FUSED_KERNELS=0 runs every decoding step on LibTorch's ops instead:
// a way around a kernel that misbehaves on a machine, read once.
bool enabled_by_environment() {
  const char* value = std::getenv("GRPO_FUSED_KERNELS");
  return value == nullptr || std::string(value) != "0";
}

std::atomic<bool> g_enabled{enabled_by_environment()};

// rms_norm over rows of the last dim; with residual defined, of x + residual,
// written to `sum` too.
void launch_rms_norm(const at::Tensor& x, const at::Tensor& residual, const at::Tensor& weight, const at::Tensor& sum,
                     const at::Tensor& out, double eps) {
  check_on_device_of(x, {residual, weight}, "rms_norm");
  const int64_t N = x.size(-1), rows = x.numel() / std::max<int64_t>(N, 1);
  TORCH_CHECK(weight.numel() == N && weight.scalar_type() == x.scalar_type(), "rms_norm: weight ", weight.sizes(), " ",
              weight.scalar_type(), " does not fit x ", x.sizes(), " ", x.scalar_type());
  if (rows == 0 || N == 0) return;
  TORCH_CHECK(rows <= INT32_MAX, "rms_norm: ", rows, " rows are more than one launch takes");
  const c10::cuda::CUDAGuard guard(x.device());
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "grpo_rms_norm", [&] {
    norm::rms_norm_kernel<scalar_t>
        <<<static_cast<unsigned int>(rows), norm::threads_for(N), 0, at::cuda::getCurrentCUDAStream()>>>(
        x.const_data_ptr<scalar_t>(), residual.defined() ? residual.const_data_ptr<scalar_t>() : nullptr,
        weight.const_data_ptr<scalar_t>(), sum.defined() ? sum.mutable_data_ptr<scalar_t>() : nullptr,
        out.mutable_data_ptr<scalar_t>(), N, static_cast<float>(eps));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

}  // namespace

void set_enabled(bool on) { g_enabled.store(on); }
bool enabled() { return g_enabled.load(); }

bool applies(std::initializer_list<at::Tensor> tensors) {
  if (!FusedScope::open() || !g_enabled.load()) return false;
  const bool grad = c10::GradMode::is_enabled();
  const at::ScalarType dtype = tensors.begin()->scalar_type();
  if (dtype != at::kFloat && dtype != at::kBFloat16 && dtype != at::kHalf) return false;
  const at::Device device = tensors.begin()->device();
  for (const at::Tensor& t : tensors)
    if (!t.is_cuda() || t.device() != device || t.scalar_type() != dtype || (grad && t.requires_grad())) return false;
  return true;
}

at::Tensor rms_norm(const at::Tensor& x_in, const at::Tensor& weight, double eps) {
  const at::Tensor x = x_in.contiguous(), out = at::empty_like(x);
  launch_rms_norm(x, {}, weight.contiguous(), {}, out, eps);
  return out;
}

std::pair<at::Tensor, at::Tensor> add_rms_norm(const at::Tensor& x_in, const at::Tensor& residual_in,
                                               const at::Tensor& weight, double eps) {
  TORCH_CHECK(x_in.sizes() == residual_in.sizes(), "add_rms_norm: x ", x_in.sizes(), " and residual ",
              residual_in.sizes());
  const at::Tensor x = x_in.contiguous(), residual = residual_in.contiguous();
  at::Tensor sum = at::empty_like(x), out = at::empty_like(x);
  launch_rms_norm(x, residual, weight.contiguous(), sum, out, eps);
  return {sum, out};
}

at::Tensor silu_mul(const at::Tensor& gate_in, const at::Tensor& up_in) {
  TORCH_CHECK(gate_in.sizes() == up_in.sizes(), "silu_mul: gate ", gate_in.sizes(), " and up ", up_in.sizes());
  check_on_device_of(gate_in, {up_in}, "silu_mul");
  // The halves of a packed gate/up product (packed_proj.h) are read in place.
  const bool in_place = row_stride(gate_in) >= 0 && row_stride(up_in) >= 0;
  const at::Tensor gate = in_place ? gate_in : gate_in.contiguous(), up = in_place ? up_in : up_in.contiguous();
  at::Tensor out = at::empty(gate.sizes(), gate.options());
  const int64_t n = gate.numel();
  if (n == 0) return out;
  const c10::cuda::CUDAGuard guard(gate.device());
  constexpr int kThreads = 256;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, gate.scalar_type(), "grpo_silu_mul", [&] {
    pointwise::silu_mul_kernel<scalar_t><<<blocks_for(n, kThreads), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
        gate.const_data_ptr<scalar_t>(), up.const_data_ptr<scalar_t>(), out.mutable_data_ptr<scalar_t>(), n,
        gate.size(-1), row_stride(gate), row_stride(up));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return out;
}

at::Tensor rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  TORCH_CHECK(x.dim() == 4 && x.size(-1) % 2 == 0, "rope: x must be [B, H, T, D] with D even, got ", x.sizes());
  check_on_device_of(x, {cos, sin}, "rope");
  const int64_t B = x.size(0), T = x.size(2), D = x.size(3);
  for (const at::Tensor* t : {&cos, &sin})
    TORCH_CHECK(t->dim() == 3 && (t->size(0) == B || t->size(0) == 1) && t->size(1) == T && t->size(2) == D,
                "rope: cos/sin must be [B or 1, T, D] for x ", x.sizes(), ", got ", t->sizes());
  at::Tensor out = at::empty(x.sizes(), x.options());  // contiguous whatever x's layout
  const int64_t n = out.numel();
  if (n == 0) return out;
  const math::RopeShape s = math::rope_shape(x, cos, sin);
  const c10::cuda::CUDAGuard guard(x.device());
  constexpr int kThreads = 256;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "grpo_rope", [&] {
    pointwise::rope_kernel<scalar_t><<<blocks_for(n, kThreads), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.const_data_ptr<scalar_t>(), cos.const_data_ptr<scalar_t>(), sin.const_data_ptr<scalar_t>(),
        out.mutable_data_ptr<scalar_t>(), s, n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return out;
}

void rope_into_slots(const at::Tensor& k, const at::Tensor& v, const at::Tensor& cos, const at::Tensor& sin,
                     const at::Tensor& positions, const at::Tensor& keys, const at::Tensor& values) {
  TORCH_CHECK(k.dim() == 4 && k.size(2) == 1 && v.sizes() == k.sizes(), "rope_into_slots: k ", k.sizes(), " and v ",
              v.sizes(), " must be one step's [b, H, 1, D]");
  check_on_device_of(k, {v, cos, sin, positions, keys, values}, "rope_into_slots");
  const int64_t b = k.size(0), H = k.size(1), D = k.size(3);
  TORCH_CHECK(keys.dim() == 4 && keys.size(0) >= b && keys.size(1) == H && keys.size(3) == D &&
                  values.sizes() == keys.sizes() && values.strides() == keys.strides() &&
                  keys.scalar_type() == k.scalar_type() && values.scalar_type() == k.scalar_type(),
              "rope_into_slots: caches ", keys.sizes(), " / ", values.sizes(), " do not take keys ", k.sizes());
  TORCH_CHECK(positions.scalar_type() == at::kLong && positions.numel() == b && positions.is_contiguous(),
              "rope_into_slots: positions must be [b] int64");
  for (const at::Tensor* t : {&cos, &sin})
    TORCH_CHECK(t->dim() == 3 && t->size(0) == b && t->size(1) == 1 && t->size(2) == D, "rope_into_slots: cos/sin ",
                t->sizes(), " for keys ", k.sizes());
  const int64_t n = k.numel();
  if (n == 0) return;
  const math::SlotWrite w = math::slot_write(k, v, cos, sin, keys);
  const c10::cuda::CUDAGuard guard(k.device());
  constexpr int kThreads = 256;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, k.scalar_type(), "grpo_rope_into_slots", [&] {
    pointwise::rope_into_slots_kernel<scalar_t>
        <<<blocks_for(n, kThreads), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
        k.const_data_ptr<scalar_t>(), v.const_data_ptr<scalar_t>(), cos.const_data_ptr<scalar_t>(),
        sin.const_data_ptr<scalar_t>(), positions.const_data_ptr<int64_t>(), keys.mutable_data_ptr<scalar_t>(),
        values.mutable_data_ptr<scalar_t>(), w, n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

}  // namespace grpo::model::gpu
