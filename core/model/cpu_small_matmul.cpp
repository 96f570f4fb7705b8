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

// Float32, and bfloat16 below kLaneMinRows rows (further down).
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

// One vector step of K for each element type: float32 by FMA; bfloat16 by
// VDPBF16PS, which multiplies pairs of bfloat16 values exactly and adds them
// into float32 lanes.
struct F32Lanes {
  using T = float;
  using Vec = __m512;
  static constexpr int64_t kStep = 16;
  GRPO_AVX512 static Vec load(const T* p) { return _mm512_loadu_ps(p); }
  GRPO_AVX512 static __m512 madd(__m512 acc, Vec w, Vec x) { return _mm512_fmadd_ps(w, x, acc); }
};

struct BF16Lanes {
  using T = c10::BFloat16;
  using Vec = __m512bh;
  static constexpr int64_t kStep = 32;
  GRPO_AVX512 static Vec load(const T* p) { return (__m512bh)_mm512_loadu_si512(p); }
  GRPO_AVX512 static __m512 madd(__m512 acc, Vec w, Vec x) { return _mm512_dpbf16_ps(acc, w, x); }
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

// bfloat16 x rows from kLaneMinRows to 16 go the other way round: one x row
// per float32 lane. x is regrouped once per call so that the vector for pair
// p holds the pair (x[m][2p], x[m][2p+1]) of every row m, and each weight
// pair is broadcast to all lanes, so one VDPBF16PS advances 16 rows' sums
// with one weight pair. That is one vector load per kLaneBlock products,
// where the kernel above loads a vector per 2 products at 16 rows, and no
// sums across lanes at the end. At 16 rows over Qwen2.5-0.5B's weights it
// ran 2.3-2.6x faster than the kernel above (27-28 ms against 62-80 ms for
// one decode step's products, 2 threads), compute-bound at about two thirds
// of VDPBF16PS's peak. Below kLaneMinRows the unused lanes cost more than
// the loads saved.
constexpr int64_t kLaneMinRows = 5;
constexpr int kLanes = 16;
constexpr int kLaneBlock = 12;  // weight rows per block: 12 accumulators, the fastest of 8-20 measured
static_assert(kSmallMatmulMaxRowsBF16 <= kLanes, "a bfloat16 x row per lane");

using Pair = uint32_t __attribute__((may_alias));  // two bfloat16 values, read as one

// The kLaneBlock weight rows at w (`pairs` pairs each) against the regrouped
// x, into out[j][m]. The next block's rows are fetched into cache meanwhile,
// a line of each row per 16 pairs: the hardware prefetcher does not follow
// kLaneBlock streams read 4 bytes at a time.
__attribute__((target("avx512f,avx512bf16"))) void lane_block(const Pair* xp, const Pair* w, const Pair* next,
                                                              int64_t pairs, float* out) {
  __m512 acc[kLaneBlock];
  for (int j = 0; j < kLaneBlock; ++j) acc[j] = _mm512_setzero_ps();
  for (int64_t p = 0; p < pairs; ++p) {
    const __m512bh xv = (__m512bh)_mm512_loadu_si512(xp + p * kLanes);
    if ((p & 15) == 0)
      for (int j = 0; j < kLaneBlock; ++j) _mm_prefetch(reinterpret_cast<const char*>(next + j * pairs + p), _MM_HINT_T0);
    for (int j = 0; j < kLaneBlock; ++j)
      acc[j] = _mm512_dpbf16_ps(acc[j], (__m512bh)_mm512_set1_epi32(static_cast<int>(w[j * pairs + p])), xv);
  }
  for (int j = 0; j < kLaneBlock; ++j) _mm512_storeu_ps(out + j * kLanes, acc[j]);
}

void lane_matmul(const c10::BFloat16* x, const c10::BFloat16* w, const c10::BFloat16* bias, c10::BFloat16* y,
                 int64_t M, int64_t N, int64_t K) {
  const int64_t pairs = K / 2;
  std::vector<uint32_t> xp(pairs * kLanes, 0);  // [pair][row]; rows from M on stay zero
  for (int64_t m = 0; m < M; ++m) {
    const Pair* row = reinterpret_cast<const Pair*>(x + m * K);
    for (int64_t p = 0; p < pairs; ++p) xp[p * kLanes + m] = row[p];
  }
  const Pair* w2 = reinterpret_cast<const Pair*>(w);
  auto store = [&](const float* out, int64_t n, int64_t rows) {
    for (int64_t m = 0; m < M; ++m)
      for (int64_t j = 0; j < rows; ++j)
        y[m * N + n + j] =
            static_cast<c10::BFloat16>(out[j * kLanes + m] + (bias ? static_cast<float>(bias[n + j]) : 0.f));
  };
  const int64_t grain = std::max<int64_t>(1, (64 << 10) / (kLaneBlock * K * 2));
  const int64_t full = N / kLaneBlock;
  at::parallel_for(0, full, grain, [&](int64_t begin, int64_t end) {
    alignas(64) float out[kLaneBlock * kLanes];
    for (int64_t b = begin; b < end; ++b) {
      const Pair* block_w = w2 + b * kLaneBlock * pairs;
      lane_block(xp.data(), block_w, b + 1 < end ? block_w + kLaneBlock * pairs : block_w, pairs, out);
      store(out, b * kLaneBlock, kLaneBlock);
    }
  });
  if (const int64_t rest = N - full * kLaneBlock) {  // the last rows, zero-padded to a block
    std::vector<uint32_t> padded(kLaneBlock * pairs, 0);
    std::memcpy(padded.data(), w2 + full * kLaneBlock * pairs, rest * pairs * sizeof(Pair));
    alignas(64) float out[kLaneBlock * kLanes];
    lane_block(xp.data(), padded.data(), padded.data(), pairs, out);
    store(out, full * kLaneBlock, rest);
  }
}

template <class T>
void small_matmul(const T* x, const T* w, const T* bias, T* y, int64_t M, int64_t N, int64_t K) {
  if constexpr (std::is_same_v<T, c10::BFloat16>)
    if (M >= kLaneMinRows) return lane_matmul(x, w, bias, y, M, N, K);
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
