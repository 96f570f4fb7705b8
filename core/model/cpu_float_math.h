// Element loops for the fused CPU kernels, written so that the compiler
// vectorises them: conversions on raw bits, no library calls, no branches.
// Internal to the fused CPU kernels (model/cpu_*.cpp, trainer/fused_adamw.cpp).
#pragma once

#include <c10/core/ScalarType.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Exception.h>
#include <c10/util/Half.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

// Each worker is compiled three times, for AVX-512, AVX2 + FMA and baseline
// x86-64, and the loader picks the widest the CPU runs: the loops are 3-7x
// faster with wide vectors, and a binary built here still runs anywhere.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define GRPO_VECTOR_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define GRPO_VECTOR_CLONES
#endif

namespace grpo::model::cpu::detail {

// Calls f with a value of the C++ type of `dtype` (float32, bfloat16, float16).
template <class F>
void dispatch(c10::ScalarType dtype, const char* name, F&& f) {
  switch (dtype) {
    case c10::kFloat: return f(float{});
    case c10::kBFloat16: return f(c10::BFloat16{});
    case c10::kHalf: return f(c10::Half{});
    default: TORCH_CHECK(false, name, ": unsupported dtype ", dtype);
  }
}

inline float bits_to_float(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

inline uint32_t float_to_bits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

// float -> bfloat16 bits, rounding to nearest even as LibTorch does; NaN stays NaN.
inline uint16_t bf16_bits(float f) {
  const uint32_t bits = float_to_bits(f);
  const uint32_t rounded = (bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16;
  return f != f ? uint16_t{0x7FC0} : static_cast<uint16_t>(rounded);
}

// Rounds to T (and back to float) as a LibTorch op producing T would.
template <class T>
inline float round_to(float f) {
  if constexpr (std::is_same_v<T, c10::BFloat16>) return bits_to_float(static_cast<uint32_t>(bf16_bits(f)) << 16);
  else if constexpr (std::is_same_v<T, c10::Half>) return static_cast<float>(static_cast<c10::Half>(f));
  else return f;
}

inline void load(const float* p, float* out, int64_t n) { std::memcpy(out, p, n * sizeof(float)); }
inline void load(const c10::BFloat16* p, float* out, int64_t n) {
  const auto* raw = reinterpret_cast<const uint16_t*>(p);
  for (int64_t i = 0; i < n; ++i) out[i] = bits_to_float(static_cast<uint32_t>(raw[i]) << 16);
}
inline void load(const c10::Half* p, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(p[i]);
}

inline void store(const float* in, float* out, int64_t n) { std::memcpy(out, in, n * sizeof(float)); }
inline void store(const float* in, c10::BFloat16* out, int64_t n) {
  auto* raw = reinterpret_cast<uint16_t*>(out);
  for (int64_t i = 0; i < n; ++i) raw[i] = bf16_bits(in[i]);
}
inline void store(const float* in, c10::Half* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<c10::Half>(in[i]);
}

// e^x to within 2 ulp: x = n ln2 + r with |r| <= ln2 / 2, e^r by its Taylor
// polynomial of degree 6 (remainder < 1.3e-7 relative), 2^n built in the
// exponent bits. Below -87 the result is 0 and above 88.4 it is +inf, so that
// no lane ever produces a subnormal: those take a slow path in the FPU, and
// the vectoriser evaluates both sides of the selects for every lane.
inline float exp(float x) {
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float xc = std::max(x, -87.0f);
  const float n = std::min((xc * 1.44269504f + kRound) - kRound, 128.0f);  // 2^128 reads as +inf
  const float r = (xc - n * 0.693145751953125f) - n * 1.428606765330187e-06f;  // ln2 in two parts
  float p = 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const float e = p * bits_to_float(static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23);
  return x < -87.0f ? 0.0f : e;
}

}  // namespace grpo::model::cpu::detail
