#include "model/cpu_kernels.h"

#include <ATen/Parallel.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "model/cpu_float_math.h"
#include "model/row_layout.h"

namespace grpo::model::cpu {

namespace {

using detail::dispatch;
using detail::load;
using detail::round_to;
using detail::store;

// Elements per parallel chunk: below this a second thread costs more than it saves.
constexpr int64_t kGrainElements = 16384;

int64_t rows_per_chunk(int64_t row_elements) { return std::max<int64_t>(1, kGrainElements / row_elements); }

template <class T>
GRPO_VECTOR_CLONES void rms_norm_rows(const T* x, const T* weight, T* out, int64_t N, float eps, int64_t begin,
                                      int64_t end) {
  std::vector<float> row(N), w(N);
  load(weight, w.data(), N);
  for (int64_t r = begin; r < end; ++r) {
    load(x + r * N, row.data(), N);
    float sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t i = 0; i < N; ++i) sum += row[i] * row[i];
    const float inv = 1.0f / std::sqrt(sum / static_cast<float>(N) + eps);
    for (int64_t i = 0; i < N; ++i) row[i] = w[i] * round_to<T>(row[i] * inv);
    store(row.data(), out + r * N, N);
  }
}

template <class T>
GRPO_VECTOR_CLONES void silu_mul_span(const T* gate, const T* up, T* out, int64_t begin, int64_t end) {
  constexpr int64_t kBlock = 1024;
  float g[kBlock], u[kBlock];
  for (int64_t b = begin; b < end; b += kBlock) {
    const int64_t len = std::min(kBlock, end - b);
    load(gate + b, g, len);
    load(up + b, u, len);
    for (int64_t i = 0; i < len; ++i) g[i] = round_to<T>(g[i] / (1.0f + detail::exp(-g[i]))) * u[i];
    store(g, out + b, len);
  }
}

// Rows i of x [B, H, T, D] (strides xs) into contiguous out; cos/sin [B, T, D].
template <class T>
GRPO_VECTOR_CLONES void rope_rows(const T* x, const int64_t* xs, const T* cos, const T* sin, T* out, int64_t H,
                                  int64_t T_, int64_t D, int64_t begin, int64_t end) {
  const int64_t half = D / 2;
  std::vector<float> row(D), c(D), s(D), res(D);
  for (int64_t i = begin; i < end; ++i) {
    const int64_t b = i / (H * T_), h = i / T_ % H, t = i % T_;
    load(x + b * xs[0] + h * xs[1] + t * xs[2], row.data(), D);
    load(cos + (b * T_ + t) * D, c.data(), D);
    load(sin + (b * T_ + t) * D, s.data(), D);
    // x * cos + rotate_half(x) * sin with rotate_half(x) = (-x2, x1), each
    // product and the sum rounded as the three at:: ops round them.
    for (int64_t d = 0; d < half; ++d)
      res[d] = round_to<T>(round_to<T>(row[d] * c[d]) + round_to<T>(-row[d + half] * s[d]));
    for (int64_t d = half; d < D; ++d)
      res[d] = round_to<T>(round_to<T>(row[d] * c[d]) + round_to<T>(row[d - half] * s[d]));
    store(res.data(), out + i * D, D);
  }
}

struct SlotAttentionArgs {
  int64_t kv_heads, rep, D;
  const int64_t *qs, *ks;  // strides of q [b, Hq, 1, D] and of the caches [b, H_kv, capacity, D] (values' alike)
  const int64_t* keys;     // [b] keys of each row
  float scale;
};

// The KV cache is larger than the caches and each (row, kv head) reads its
// own block: asking for the next block while this one computes hides the
// memory latency that otherwise dominates.
template <class T>
void prefetch_block(const T* k, const T* v, const SlotAttentionArgs& a, int64_t pair) {
  const int64_t b = pair / a.kv_heads, h = pair % a.kv_heads, row_bytes = a.D * static_cast<int64_t>(sizeof(T));
  for (int64_t s = 0; s < a.keys[b]; ++s)
    for (int64_t line = 0; line < row_bytes; line += 64) {  // a cache line is 64 bytes
      const int64_t at = b * a.ks[0] + h * a.ks[1] + s * a.ks[2];
      __builtin_prefetch(reinterpret_cast<const char*>(k + at) + line);
      __builtin_prefetch(reinterpret_cast<const char*>(v + at) + line);
    }
}

// q . k over D with kLanes partial sums folded as a tree: one vector
// register, and no serial chain of scalar adds.
constexpr int64_t kLanes = 16;

template <class T>
inline float dot(const float* q, const T* k, int64_t D) {
  float part[kLanes] = {};
  float kf[kLanes];
  int64_t i = 0;
  for (; i + kLanes <= D; i += kLanes) {
    load(k + i, kf, kLanes);
    for (int64_t j = 0; j < kLanes; ++j) part[j] += q[i + j] * kf[j];
  }
  for (int64_t j = 0; j < 8; ++j) part[j] += part[j + 8];
  for (int64_t j = 0; j < 4; ++j) part[j] += part[j + 4];
  for (int64_t j = 0; j < 2; ++j) part[j] += part[j + 2];
  float sum = part[0] + part[1];
  if (i < D) {
    load(k + i, kf, D - i);
    for (int64_t j = 0; i + j < D; ++j) sum += q[i + j] * kf[j];
  }
  return sum;
}

// out[0, n) = scale * sum_s p_s v_s[0, n), n <= kChunk: a fixed-size
// accumulator stays in registers across the keys.
constexpr int64_t kChunk = 64;

template <class T>
inline void weighted_sum(const float* p, const T* v, int64_t v_stride, int64_t S, int64_t n, float scale,
                         float* out) {
  float part[kChunk] = {};
  float vf[kChunk];
  if (n == kChunk) {
    for (int64_t s = 0; s < S; ++s) {
      load(v + s * v_stride, vf, kChunk);
      for (int64_t j = 0; j < kChunk; ++j) part[j] += p[s] * vf[j];
    }
  } else {
    for (int64_t s = 0; s < S; ++s) {
      load(v + s * v_stride, vf, n);
      for (int64_t j = 0; j < n; ++j) part[j] += p[s] * vf[j];
    }
  }
  for (int64_t j = 0; j < n; ++j) out[j] = part[j] * scale;
}

// (row, kv head) pairs [begin, end): each pair's rep query heads over the
// row's keys, into out [b, Hq D].
template <class T>
GRPO_VECTOR_CLONES void attend_pairs(const T* q, const T* k, const T* v, T* out, const SlotAttentionArgs& a,
                                     int64_t begin, int64_t end) {
  const int64_t rep = a.rep, D = a.D;
  std::vector<float> qf(D), scores, acc(rep * D);  // one query row's scores at a time
  for (int64_t pair = begin; pair < end; ++pair) {
    const int64_t b = pair / a.kv_heads, h = pair % a.kv_heads, S = a.keys[b];
    if (pair + 1 < end) prefetch_block(k, v, a, pair + 1);
    const T* kb = k + b * a.ks[0] + h * a.ks[1];
    const T* vb = v + b * a.ks[0] + h * a.ks[1];
    scores.resize(S);
    for (int64_t r = 0; r < rep; ++r) {
      load(q + b * a.qs[0] + (h * rep + r) * a.qs[1], qf.data(), D);
      float* sr = scores.data();
      for (int64_t s = 0; s < S; ++s) sr[s] = dot(qf.data(), kb + s * a.ks[2], D) * a.scale;
      float max = -INFINITY;
#pragma omp simd reduction(max : max)
      for (int64_t s = 0; s < S; ++s) max = std::max(max, sr[s]);
      float sum = 0;
#pragma omp simd reduction(+ : sum)
      for (int64_t s = 0; s < S; ++s) sum += sr[s] = detail::exp(sr[s] - max);
      for (int64_t i = 0; i < D; i += kChunk)
        weighted_sum(sr, vb + i, a.ks[2], S, std::min(kChunk, D - i), 1.0f / sum, acc.data() + r * D + i);
    }
    store(acc.data(), out + pair * rep * D, rep * D);
  }
}

at::Tensor last_dim_contiguous(const at::Tensor& t) { return t.stride(-1) == 1 ? t : t.contiguous(); }

}  // namespace

bool applies(std::initializer_list<at::Tensor> tensors) {
  if (!FusedScope::open()) return false;
  const bool grad = c10::GradMode::is_enabled();
  const at::ScalarType dtype = tensors.begin()->scalar_type();
  if (dtype != at::kFloat && dtype != at::kBFloat16 && dtype != at::kHalf) return false;
  for (const at::Tensor& t : tensors)
    if (!t.device().is_cpu() || t.scalar_type() != dtype || (grad && t.requires_grad())) return false;
  return true;
}

at::Tensor rms_norm(const at::Tensor& x_in, const at::Tensor& weight_in, double eps) {
  at::Tensor x = x_in.contiguous(), weight = weight_in.contiguous();
  TORCH_CHECK(weight.numel() == x.size(-1) && weight.scalar_type() == x.scalar_type(), "rms_norm: weight ",
              weight.sizes(), " ", weight.scalar_type(), " does not fit x ", x.sizes(), " ", x.scalar_type());
  at::Tensor out = at::empty_like(x);
  const int64_t N = x.size(-1), rows = x.numel() / N;
  dispatch(x.scalar_type(), "rms_norm", [&](auto tag) {
    using T = decltype(tag);
    at::parallel_for(0, rows, rows_per_chunk(N), [&](int64_t begin, int64_t end) {
      rms_norm_rows(x.data_ptr<T>(), weight.data_ptr<T>(), out.data_ptr<T>(), N, static_cast<float>(eps), begin, end);
    });
  });
  return out;
}

at::Tensor silu_mul(const at::Tensor& gate_in, const at::Tensor& up_in) {
  TORCH_CHECK(gate_in.sizes() == up_in.sizes() && gate_in.scalar_type() == up_in.scalar_type(), "silu_mul: gate ",
              gate_in.sizes(), " and up ", up_in.sizes(), " differ");
  // The halves of a packed gate/up product (packed_proj.h) are read in place.
  const bool in_place = row_stride(gate_in) >= 0 && row_stride(up_in) >= 0;
  const at::Tensor gate = in_place ? gate_in : gate_in.contiguous(), up = in_place ? up_in : up_in.contiguous();
  at::Tensor out = at::empty(gate.sizes(), gate.options());
  if (out.numel() == 0) return out;
  const int64_t cols = gate.size(-1), gate_stride = row_stride(gate), up_stride = row_stride(up);
  dispatch(gate.scalar_type(), "silu_mul", [&](auto tag) {
    using T = decltype(tag);
    const T *g = gate.data_ptr<T>(), *u = up.data_ptr<T>();
    T* o = out.data_ptr<T>();
    at::parallel_for(0, out.numel(), kGrainElements, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end;) {  // the chunk's part of each row it meets
        const int64_t r = i / cols, c = i - r * cols, len = std::min(end - i, cols - c);
        silu_mul_span(g + r * gate_stride, u + r * up_stride, o + r * cols, c, c + len);
        i += len;
      }
    });
  });
  return out;
}

at::Tensor rope(const at::Tensor& x_in, const at::Tensor& cos_in, const at::Tensor& sin_in) {
  at::Tensor x = last_dim_contiguous(x_in);
  const int64_t B = x.size(0), H = x.size(1), T = x.size(2), D = x.size(3);
  at::Tensor cos = cos_in.expand({B, T, D}).contiguous(), sin = sin_in.expand({B, T, D}).contiguous();
  TORCH_CHECK(cos.scalar_type() == x.scalar_type() && sin.scalar_type() == x.scalar_type() && D % 2 == 0, "rope: x ",
              x.sizes(), " ", x.scalar_type(), " and cos/sin ", cos_in.sizes(), " ", cos_in.scalar_type(),
              " do not fit");
  at::Tensor out = at::empty({B, H, T, D}, x.options().memory_format(at::MemoryFormat::Contiguous));
  dispatch(x.scalar_type(), "rope", [&](auto tag) {
    using S = decltype(tag);
    at::parallel_for(0, B * H * T, rows_per_chunk(D), [&](int64_t begin, int64_t end) {
      rope_rows(x.data_ptr<S>(), x.strides().data(), cos.data_ptr<S>(), sin.data_ptr<S>(), out.data_ptr<S>(), H, T,
                D, begin, end);
    });
  });
  return out;
}

at::Tensor slot_attention(const at::Tensor& q_in, const at::Tensor& keys, const at::Tensor& values,
                          const at::Tensor& positions_in, int64_t span, double scale) {
  const at::Tensor q = last_dim_contiguous(q_in);
  TORCH_CHECK(q.dim() == 4 && q.size(2) == 1 && keys.dim() == 4 && keys.size(0) == q.size(0) &&
                  keys.size(3) == q.size(3) && keys.stride(3) == 1 && q.size(1) % keys.size(1) == 0 &&
                  values.sizes() == keys.sizes() && values.strides() == keys.strides() &&
                  keys.scalar_type() == q.scalar_type() && values.scalar_type() == q.scalar_type(),
              "slot_attention: q ", q.sizes(), " and caches ", keys.sizes(), " / ", values.sizes(), " do not fit");
  TORCH_CHECK(span >= 1 && span <= keys.size(2), "slot_attention: a span of ", span, " in ", keys.size(2),
              " positions");
  const int64_t b = q.size(0), heads = q.size(1), kv_heads = keys.size(1), D = q.size(3);
  const at::Tensor positions = positions_in.to(at::kLong).contiguous();
  TORCH_CHECK(positions.numel() == b, "slot_attention: ", positions.numel(), " positions for ", b, " rows");
  std::vector<int64_t> key_counts(b);
  for (int64_t i = 0; i < b; ++i)
    key_counts[i] = std::clamp<int64_t>(positions.data_ptr<int64_t>()[i] + 1, 1, span);
  at::Tensor out = at::empty({b, 1, heads * D}, q.options().memory_format(at::MemoryFormat::Contiguous));
  const SlotAttentionArgs args{kv_heads, heads / kv_heads, D, q.strides().data(), keys.strides().data(),
                               key_counts.data(), static_cast<float>(scale)};
  dispatch(q.scalar_type(), "slot_attention", [&](auto tag) {
    using T = decltype(tag);
    at::parallel_for(0, b * kv_heads, 1, [&](int64_t begin, int64_t end) {
      attend_pairs(q.data_ptr<T>(), keys.data_ptr<T>(), values.data_ptr<T>(), out.data_ptr<T>(), args, begin, end);
    });
  });
  return out;
}

}  // namespace grpo::model::cpu
