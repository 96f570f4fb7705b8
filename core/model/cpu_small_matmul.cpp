#include "model/cpu_small_matmul.h"

#include <ATen/Parallel.h>
#include <c10/util/BFloat16.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "model/cpu_kernels.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define GRPO_SMALL_MATMUL 1
#endif

namespace grpo::model::cpu {

namespace {
std::atomic<int64_t> g_count{0};
}  // namespace

int64_t small_linear_count() { return g_count.load(std::memory_order_relaxed); }

#ifdef GRPO_SMALL_MATMUL
namespace {

// Up to 4 rows, and the last 1-4 of more than 16 (lane kernels further down).
// Weight rows per block and x rows per pass over it: each loaded vector of W
// serves kGroup x rows, each loaded vector of x serves kBlock weight rows
// (16 accumulators of the 32 registers). Further groups of x rows re-read the
// block from cache (kBlock x K weights: 14 KB in float32 at K = 896).
constexpr int kBlock = 4;
constexpr int kGroup = 4;

using Sums = float[kGroup][kBlock];

// Both kernels are compiled for AVX-512F and AVX512-BF16; the float32 one
// uses no bfloat16 instruction, so it runs wherever AVX-512F does (cpu_has()
// is asked before either runs).
#define GRPO_AVX512 __attribute__((target("avx512f,avx512bf16"), always_inline)) inline

// A 4-byte unit of a row: one float32 value, or a pair of bfloat16 values
// (what one lane of VDPBF16PS takes), read in place of the row's own type.
using Unit = uint32_t __attribute__((may_alias));

// One vector step of K for each element type: float32 by FMA; bfloat16 by
// VDPBF16PS, which multiplies pairs of bfloat16 values exactly and adds them
// into float32 lanes. madd_unit: a lane kernel's step (below), the unit at w
// times each lane's unit of x. kLaneBlock: weight rows per lane block, the
// fastest of 8-20 measured at Qwen2.5-0.5B's shapes.
struct F32Lanes {
  using T = float;
  using Vec = __m512;
  static constexpr int64_t kStep = 16;
  static constexpr int kLaneBlock = 8;
  GRPO_AVX512 static Vec load(const T* p) { return _mm512_loadu_ps(p); }
  GRPO_AVX512 static __m512 madd(__m512 acc, Vec w, Vec x) { return _mm512_fmadd_ps(w, x, acc); }
  GRPO_AVX512 static __m512 madd_unit(__m512 acc, const Unit* w, __m512i x) {
    return _mm512_fmadd_ps(_mm512_set1_ps(*reinterpret_cast<const float*>(w)), _mm512_castsi512_ps(x), acc);
  }
};

struct BF16Lanes {
  using T = c10::BFloat16;
  using Vec = __m512bh;
  static constexpr int64_t kStep = 32;
  static constexpr int kLaneBlock = 12;
  GRPO_AVX512 static Vec load(const T* p) { return (__m512bh)_mm512_loadu_si512(p); }
  GRPO_AVX512 static __m512 madd(__m512 acc, Vec w, Vec x) { return _mm512_dpbf16_ps(acc, w, x); }
  GRPO_AVX512 static __m512 madd_unit(__m512 acc, const Unit* w, __m512i x) {
    return _mm512_dpbf16_ps(acc, (__m512bh)_mm512_set1_epi32(static_cast<int>(*w)), (__m512bh)x);
  }
};
#undef GRPO_AVX512

// Sums for x rows [0, G) (x points at the group's first row) against the
// kBlock weight rows at w.
template <class L, int G>
__attribute__((target("avx512f,avx512bf16"))) void group(const typename L::T* x, const typename L::T* w, int64_t K,
                                                         Sums& sums) {
  __m512 acc[G][kBlock];
  for (int m = 0; m < G; ++m)
    for (int j = 0; j < kBlock; ++j) acc[m][j] = _mm512_setzero_ps();
  for (int64_t k = 0; k < K; k += L::kStep) {
    typename L::Vec wv[kBlock];
    for (int j = 0; j < kBlock; ++j) wv[j] = L::load(w + j * K + k);
    for (int m = 0; m < G; ++m) {
      const typename L::Vec xv = L::load(x + m * K + k);
      for (int j = 0; j < kBlock; ++j) acc[m][j] = L::madd(acc[m][j], wv[j], xv);
    }
  }
  for (int m = 0; m < G; ++m)
    for (int j = 0; j < kBlock; ++j) sums[m][j] = _mm512_reduce_add_ps(acc[m][j]);
}

template <class T>
using LanesOf = std::conditional_t<std::is_same_v<T, float>, F32Lanes, BF16Lanes>;

// Outputs [n, n + rows) of every x row, from the kBlock weight rows at w.
template <class T>
void block(const T* x, const T* w, const T* bias, T* y, int64_t M, int64_t N, int64_t K, int64_t n, int64_t rows) {
  for (int64_t m0 = 0; m0 < M; m0 += kGroup) {
    Sums sums;
    const T* xg = x + m0 * K;
    switch (std::min<int64_t>(kGroup, M - m0)) {
      case 1: group<LanesOf<T>, 1>(xg, w, K, sums); break;
      case 2: group<LanesOf<T>, 2>(xg, w, K, sums); break;
      case 3: group<LanesOf<T>, 3>(xg, w, K, sums); break;
      default: group<LanesOf<T>, 4>(xg, w, K, sums); break;
    }
    for (int64_t m = m0; m < std::min<int64_t>(M, m0 + kGroup); ++m)
      for (int64_t j = 0; j < rows; ++j)
        y[m * N + n + j] = static_cast<T>(sums[m - m0][j] + (bias ? static_cast<float>(bias[n + j]) : 0.f));
  }
}

// From kLaneMinRows rows on the product goes the other way round, kLanes x
// rows at a time: one x row per float32 lane. x is regrouped once per call so that the
// vector for unit u holds unit u of every row, and each weight unit is
// broadcast to all lanes, so one FMA (VDPBF16PS) advances 16 rows' sums with
// one weight (pair). That is one vector load per kLaneBlock products, where
// the kernel above loads a vector per 2 products at 16 rows, and no sums
// across lanes at the end. One decode step's products over Qwen2.5-0.5B's
// weights at 16 rows, 2 threads, standalone: bfloat16 27-28 ms against
// 62-80 ms for the kernel above, float32 56-57 ms against 165-180 ms. Below
// kLaneMinRows the unused lanes cost more than the loads saved (level at 4).
constexpr int64_t kLaneMinRows = 5;
constexpr int kLanes = 16;

// The kLaneBlock weight rows at w (`units` units each) against the regrouped
// x, into out[j][m]. The next block's rows are fetched into cache meanwhile,
// a line of each row per 16 units: the hardware prefetcher does not follow
// kLaneBlock streams read 4 bytes at a time.
template <class L>
__attribute__((target("avx512f,avx512bf16"))) void lane_block(const Unit* xp, const Unit* w, const Unit* next,
                                                              int64_t units, float* out) {
  constexpr int kRows = L::kLaneBlock;
  __m512 acc[kRows];
  for (int j = 0; j < kRows; ++j) acc[j] = _mm512_setzero_ps();
  for (int64_t u = 0; u < units; ++u) {
    const __m512i xv = _mm512_loadu_si512(xp + u * kLanes);
    if ((u & 15) == 0)
      for (int j = 0; j < kRows; ++j) _mm_prefetch(reinterpret_cast<const char*>(next + j * units + u), _MM_HINT_T0);
    for (int j = 0; j < kRows; ++j) acc[j] = L::madd_unit(acc[j], w + j * units + u, xv);
  }
  for (int j = 0; j < kRows; ++j) _mm512_storeu_ps(out + j * kLanes, acc[j]);
}

template <class T>
void lane_matmul(const T* x, const T* w, const T* bias, T* y, int64_t M, int64_t N, int64_t K) {
  using L = LanesOf<T>;
  constexpr int kRows = L::kLaneBlock;
  const int64_t units = K * static_cast<int64_t>(sizeof(T)) / static_cast<int64_t>(sizeof(Unit));
  // [unit][row]; rows from M on stay zero. Kept per thread: 168 calls per decode step would each allocate it.
  static thread_local std::vector<uint32_t> xp;
  xp.assign(units * kLanes, 0);
  for (int64_t m = 0; m < M; ++m) {
    const Unit* row = reinterpret_cast<const Unit*>(x + m * K);
    for (int64_t u = 0; u < units; ++u) xp[u * kLanes + m] = row[u];
  }
  // The pool's workers run the blocks: they read the caller's buffer through
  // this pointer (naming xp inside the task would be each worker's own, empty one).
  const uint32_t* xpd = xp.data();
  const Unit* wu = reinterpret_cast<const Unit*>(w);
  auto store = [&](const float* out, int64_t n, int64_t rows) {
    for (int64_t m = 0; m < M; ++m)
      for (int64_t j = 0; j < rows; ++j)
        y[m * N + n + j] = static_cast<T>(out[j * kLanes + m] + (bias ? static_cast<float>(bias[n + j]) : 0.f));
  };
  const int64_t grain = std::max<int64_t>(1, (64 << 10) / (kRows * K * static_cast<int64_t>(sizeof(T))));
  const int64_t full = N / kRows;
  at::parallel_for(0, full, grain, [&](int64_t begin, int64_t end) {
    alignas(64) float out[kRows * kLanes];
    for (int64_t b = begin; b < end; ++b) {
      const Unit* block_w = wu + b * kRows * units;
      lane_block<L>(xpd, block_w, b + 1 < end ? block_w + kRows * units : block_w, units, out);
      store(out, b * kRows, kRows);
    }
  });
  if (const int64_t rest = N - full * kRows) {  // the last rows, zero-padded to a block
    std::vector<uint32_t> padded(kRows * units, 0);
    std::memcpy(padded.data(), wu + full * kRows * units, rest * units * sizeof(Unit));
    alignas(64) float out[kRows * kLanes];
    lane_block<L>(xpd, padded.data(), padded.data(), units, out);
    store(out, full * kRows, rest);
  }
}

template <class T>
void small_matmul(const T* x, const T* w, const T* bias, T* y, int64_t M, int64_t N, int64_t K) {
  // 16 rows at a time a row per lane; fewer than kLaneMinRows left, a block of weight rows per pass.
  for (; M >= kLaneMinRows; x += kLanes * K, y += kLanes * N, M -= std::min<int64_t>(M, kLanes))
    lane_matmul(x, w, bias, y, std::min<int64_t>(M, kLanes), N, K);
  if (M == 0) return;
  // ~64 KB of weights per task at the least, so that a thread's share of a
  // small projection is not eaten by scheduling.
  const int64_t grain = std::max<int64_t>(1, (64 << 10) / (kBlock * K * static_cast<int64_t>(sizeof(T))));
  const int64_t full = N / kBlock;
  at::parallel_for(0, full, grain, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) block(x, w + b * kBlock * K, bias, y, M, N, K, b * kBlock, kBlock);
  });
  if (const int64_t rest = N - full * kBlock) {  // the last rows, zero-padded to a block
    std::vector<T> padded(kBlock * K, T(0));
    std::memcpy(padded.data(), w + full * kBlock * K, rest * K * sizeof(T));
    block(x, padded.data(), bias, y, M, N, K, full * kBlock, rest);
  }
}

bool cpu_has(at::ScalarType dtype) {
  static const bool f32 = __builtin_cpu_supports("avx512f");
  static const bool bf16 = f32 && __builtin_cpu_supports("avx512bf16");
  return dtype == at::kFloat ? f32 : bf16;
}

}  // namespace
#endif

at::Tensor small_linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
#ifdef GRPO_SMALL_MATMUL
  const at::ScalarType dtype = x.scalar_type();
  if (dtype != at::kFloat && dtype != at::kBFloat16) return {};
  if (weight.dim() != 2 || x.dim() < 1 || x.size(-1) != weight.size(1)) return {};
  const int64_t N = weight.size(0), K = weight.size(1);
  const int64_t max_rows = dtype == at::kFloat ? kSmallMatmulMaxRowsF32 : kSmallMatmulMaxRowsBF16;
  if (K == 0 || K % 32 != 0 || x.numel() == 0 || x.numel() / K > max_rows) return {};
  if (bias.defined() ? !applies({x, weight, bias}) || bias.numel() != N : !applies({x, weight})) return {};
  // A weight that is not laid out row by row (a transposed view) would cost a
  // copy of every weight per call: LibTorch reads it in place.
  if (!weight.is_contiguous() || !cpu_has(dtype)) return {};
  const at::Tensor xc = x.contiguous();
  const at::Tensor bc = bias.defined() ? bias.contiguous() : bias;
  std::vector<int64_t> sizes = x.sizes().vec();
  sizes.back() = N;
  at::Tensor y = at::empty(sizes, x.options());
  const int64_t M = x.numel() / K;
  if (dtype == at::kFloat)
    small_matmul<float>(xc.data_ptr<float>(), weight.data_ptr<float>(), bc.defined() ? bc.data_ptr<float>() : nullptr,
                        y.data_ptr<float>(), M, N, K);
  else
    small_matmul<c10::BFloat16>(xc.data_ptr<c10::BFloat16>(), weight.data_ptr<c10::BFloat16>(),
                                bc.defined() ? bc.data_ptr<c10::BFloat16>() : nullptr, y.data_ptr<c10::BFloat16>(), M,
                                N, K);
  g_count.fetch_add(1, std::memory_order_relaxed);
  return y;
#else
  (void)x, (void)weight, (void)bias;
  return {};
#endif
}

}  // namespace grpo::model::cpu
