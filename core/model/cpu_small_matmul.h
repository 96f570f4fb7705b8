// x W^T + b for the few rows of a decode step, in float32 and bfloat16 on
// CPUs with AVX-512. At batch 1 the product reads every weight once and does
// little with it, so it can run at the speed weights stream from memory;
// LibTorch 1.13's CPU linear reaches about 40% of that (a Qwen2.5-0.5B
// token's matmuls: 106 ms in float32 against 42 ms streamed). Up to 4 rows,
// each block of weights is read from memory once and reused from cache for
// every row; from 5 rows on, 16 rows at a time share each vector
// instruction, a row per lane.
#pragma once

#include <ATen/ATen.h>

namespace grpo::model::cpu {

// Most rows small_linear takes. Decoding Qwen2.5-0.5B's shape at batch 64
// with it: 446-461 bfloat16 tokens/s, against 407-416 with oneDNN's kernels.
constexpr int64_t kSmallMatmulMaxRowsF32 = 64;
constexpr int64_t kSmallMatmulMaxRowsBF16 = 64;

// x [..., K] times weight [N, K]^T plus bias [N] (may be undefined), when
// applies() holds (a FusedScope, no gradient), the dtype is float32 or
// bfloat16, x has at most the rows above, the weight is contiguous, K is a multiple of 32
// and the CPU has AVX-512 (and AVX512-BF16 for bfloat16). Accumulates in
// float32 and rounds once, as LibTorch's bfloat16 matmul does. Otherwise
// returns an undefined tensor and the caller keeps at::linear.
at::Tensor small_linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);

// How many products small_linear has computed in this process: the engine's
// tests check that decoding goes through it.
int64_t small_linear_count();

}  // namespace grpo::model::cpu
