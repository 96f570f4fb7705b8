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

#include "model/cuda_kernel_math.h"
#include "model/fused_scope.h"

namespace grpo::model::gpu {

namespace {

// GRPO_FUSED_KERNELS=0 runs every decoding step on LibTorch's ops instead:
// a way around a kernel that misbehaves on a machine, read once.
bool enabled_by_environment() {
  const char* value = std::getenv("GRPO_FUSED_KERNELS");
  return value == nullptr || std::string(value) != "0";
}

std::atomic<bool> g_enabled{enabled_by_environment()};

constexpr int kWarp = 32;

// `op` over every thread's v in the block (blockDim.x a multiple of 32),
// `identity` standing in for the warps the block does not have.
template <class Op>
__device__ float block_reduce(float v, Op op, float identity) {
  __shared__ float partial[kWarp];
  __shared__ float total;
  for (int o = kWarp / 2; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < static_cast<int>(blockDim.x / kWarp) ? partial[lane] : identity;
    for (int o = kWarp / 2; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
    if (lane == 0) total = v;
  }
  __syncthreads();
  return total;
}

struct Add {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct Max {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

// One block per row of N: out = rms_norm(x (+ residual)); with a residual,
// sum = x + residual, the row the normalisation reads.
template <class T>
__global__ void rms_norm_kernel(const T* __restrict__ x, const T* __restrict__ residual, const T* __restrict__ weight,
                                T* __restrict__ sum, T* __restrict__ out, int64_t N, float eps) {
  const int64_t offset = static_cast<int64_t>(blockIdx.x) * N;
  auto input = [&](int64_t i) { return residual ? math::add_value(x[offset + i], residual[offset + i]) : x[offset + i]; };
  float squares = 0.0f;
  for (int64_t i = threadIdx.x; i < N; i += blockDim.x) {
    const T h = input(i);
    if (sum) sum[offset + i] = h;
    const float v = static_cast<float>(h);
    squares = math::add_rn(squares, math::mul_rn(v, v));
  }
  // at:: takes the mean (the sum times the float 1/N), adds eps and takes
  // rsqrt in float32 (CUDA's rsqrtf).
  const float mean = math::mul_rn(block_reduce(squares, Add{}, 0.0f), 1.0f / static_cast<float>(N));
  const float inv = rsqrtf(math::add_rn(mean, eps));
  for (int64_t i = threadIdx.x; i < N; i += blockDim.x) out[offset + i] = math::rms_norm_value(input(i), weight[i], inv);
}

template <class T>
__global__ void silu_mul_kernel(const T* __restrict__ gate, const T* __restrict__ up, T* __restrict__ out, int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = math::silu_mul_value(gate[i], up[i]);
}

template <class T>
__global__ void rope_kernel(const T* __restrict__ x, const T* __restrict__ cos, const T* __restrict__ sin,
                            T* __restrict__ out, math::RopeShape s, int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = math::rope_value(x, cos, sin, s, i);
}

template <class T>
__global__ void rope_into_slots_kernel(const T* __restrict__ k, const T* __restrict__ v, const T* __restrict__ cos,
                                       const T* __restrict__ sin, const int64_t* __restrict__ positions,
                                       T* __restrict__ keys, T* __restrict__ values, math::SlotWrite w, int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    math::write_slot_element(k, v, cos, sin, positions, keys, values, w, i);
}

constexpr int kSampleThreads = 1024;

// One block per row; warp w takes the row's w-th contiguous segment, its
// lanes reading it 32 ids at a time. Pass 1: the row's largest scaled logit
// m. Pass 2: each segment's sum of exp(scaled - m). Then every thread walks
// the 32 segment sums to the one where the cumulative sum passes u * total,
// and that segment's warp scans it, 32 ids a step, for the first id that
// passes it.
template <class T>
__global__ void __launch_bounds__(kSampleThreads)
    sample_kernel(const T* __restrict__ logits, int64_t stride, int64_t V, float inverse_temperature,
                  const float* __restrict__ draws, int64_t* __restrict__ tokens, float* __restrict__ logprobs) {
  __shared__ float segment_sum[kSampleThreads / kWarp];
  const int64_t row = blockIdx.x;
  const T* x = logits + row * stride;
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, warps = blockDim.x / kWarp;
  const int64_t length = (V + warps - 1) / warps;
  const int64_t begin = std::min<int64_t>(V, warp * length), end = std::min<int64_t>(V, begin + length);
  // logits / temperature as LibTorch's CUDA division by a scalar computes it:
  // times the scalar's float reciprocal.
  auto scaled = [&](int64_t i) { return math::mul_rn(static_cast<float>(x[i]), inverse_temperature); };
  float m = -INFINITY;
  for (int64_t i = begin + lane; i < end; i += kWarp) m = fmaxf(m, scaled(i));
  m = block_reduce(m, Max{}, -INFINITY);
  float sum = 0.0f;
  for (int64_t i = begin + lane; i < end; i += kWarp) sum += expf(scaled(i) - m);
  for (int o = kWarp / 2; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if (lane == 0) segment_sum[warp] = sum;
  __syncthreads();
  float total = 0.0f;
  for (int w = 0; w < warps; ++w) total += segment_sum[w];
  const float target = draws[row] * total;
  float before = 0.0f;
  int crossing = -1;
  for (int w = 0; w < warps && crossing < 0; ++w) {
    if (before + segment_sum[w] > target) crossing = w;
    else before += segment_sum[w];
  }
  const float log_total = logf(total);
  if (crossing < 0) {  // u * total at or past the total (rounding): the last id, as searchsorted's clamp gives
    if (threadIdx.x == 0) {
      tokens[row] = V - 1;
      logprobs[row] = scaled(V - 1) - m - log_total;
    }
    return;
  }
  if (warp != crossing) return;
  float running = before;
  int64_t last_nonzero = end - 1;
  for (int64_t base = begin; base < end; base += kWarp) {
    const int64_t i = base + lane;
    const float e = i < end ? expf(scaled(i) - m) : 0.0f;
    const unsigned nonzero = __ballot_sync(0xffffffffu, e > 0.0f);
    if (nonzero != 0) last_nonzero = base + (kWarp - 1 - __clz(nonzero));
    float inclusive = e;
    for (int o = 1; o < kWarp; o <<= 1) {
      const float up = __shfl_up_sync(0xffffffffu, inclusive, o);
      if (lane >= o) inclusive += up;
    }
    const unsigned passed = __ballot_sync(0xffffffffu, i < end && running + inclusive > target);
    if (passed != 0) {
      if (lane == __ffs(passed) - 1) {
        tokens[row] = i;
        logprobs[row] = scaled(i) - m - log_total;
      }
      return;
    }
    running += __shfl_sync(0xffffffffu, inclusive, kWarp - 1);
  }
  // The scan's sums fell short of the segment's by rounding: its last id of
  // nonzero probability.
  if (lane == 0) {
    tokens[row] = last_nonzero;
    logprobs[row] = scaled(last_nonzero) - m - log_total;
  }
}

__global__ void record_step_kernel(const int64_t* __restrict__ sampled, const float* __restrict__ logprob,
                                   const int64_t* __restrict__ budget, const int64_t* __restrict__ stop_ids,
                                   bool* done, int64_t* generated, int64_t* positions, int64_t* tokens,
                                   int64_t* out_ids, float* out_logprobs, math::StepBooks books, int64_t rows) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r < rows)
    math::record_step_row(r, sampled, logprob, budget, stop_ids, done, generated, positions, tokens, out_ids,
                          out_logprobs, books);
}

// Blocks for a grid-stride loop over n elements.
unsigned int blocks_for(int64_t n, int threads) {
  const int64_t most = int64_t{65535} * 16;
  return static_cast<unsigned int>(std::max<int64_t>(1, std::min<int64_t>((n + threads - 1) / threads, most)));
}

// Every tensor on x's device: a tensor elsewhere would be read as a device
// address of this one.
void check_on_device_of(const at::Tensor& x, std::initializer_list<at::Tensor> others, const char* what) {
  TORCH_CHECK(x.is_cuda(), what, ": x is on ", x.device(), ", not a GPU");
  for (const at::Tensor& t : others)
    TORCH_CHECK(!t.defined() || t.device() == x.device(), what, ": a tensor on ", t.device(), " beside x on ",
                x.device());
}

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
  const int threads = static_cast<int>(std::min<int64_t>(256, (N + kWarp - 1) / kWarp * kWarp));
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "grpo_rms_norm", [&] {
    rms_norm_kernel<scalar_t><<<static_cast<unsigned int>(rows), threads, 0, at::cuda::getCurrentCUDAStream()>>>(
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
  at::Tensor gate = gate_in.contiguous(), up = up_in.contiguous(), out = at::empty_like(gate);
  const int64_t n = gate.numel();
  if (n == 0) return out;
  const c10::cuda::CUDAGuard guard(gate.device());
  constexpr int kThreads = 256;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, gate.scalar_type(), "grpo_silu_mul", [&] {
    silu_mul_kernel<scalar_t><<<blocks_for(n, kThreads), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
        gate.const_data_ptr<scalar_t>(), up.const_data_ptr<scalar_t>(), out.mutable_data_ptr<scalar_t>(), n);
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
    rope_kernel<scalar_t><<<blocks_for(n, kThreads), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
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
    rope_into_slots_kernel<scalar_t><<<blocks_for(n, kThreads), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
        k.const_data_ptr<scalar_t>(), v.const_data_ptr<scalar_t>(), cos.const_data_ptr<scalar_t>(),
        sin.const_data_ptr<scalar_t>(), positions.const_data_ptr<int64_t>(), keys.mutable_data_ptr<scalar_t>(),
        values.mutable_data_ptr<scalar_t>(), w, n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
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
    sample_kernel<scalar_t><<<static_cast<unsigned int>(B), kSampleThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
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
  record_step_kernel<<<static_cast<unsigned int>((b + kThreads - 1) / kThreads), kThreads, 0,
                       at::cuda::getCurrentCUDAStream()>>>(
      sampled.const_data_ptr<int64_t>(), logprobs.const_data_ptr<float>(), budget.const_data_ptr<int64_t>(),
      stop_ids.const_data_ptr<int64_t>(), done.mutable_data_ptr<bool>(), generated.mutable_data_ptr<int64_t>(),
      positions.mutable_data_ptr<int64_t>(), tokens.mutable_data_ptr<int64_t>(), out_ids.mutable_data_ptr<int64_t>(),
      out_logprobs.mutable_data_ptr<float>(), books, b);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace grpo::model::gpu
