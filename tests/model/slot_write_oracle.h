// What a decoding step's write of keys and values into slot caches leaves,
// by LibTorch's ops: the oracle of the slot write's per-element math
// (cuda_kernel_math_test.cpp) and of its kernel run on the host
// (pointwise_kernels_test.cpp).
#pragma once

#include <ATen/ATen.h>

#include <initializer_list>
#include <utility>

#include "model/rope.h"

namespace grpo::testing {

// keys and values [slots, H, capacity, D] after the step's k, v [b, H, 1, D]:
// each row of `rows` has its key rotated (cos, sin) and its value at its
// position (positions [b]); every other entry, those of the rows left out
// among them, as it was.
inline std::pair<at::Tensor, at::Tensor> slot_write_by_at_ops(const at::Tensor& keys, const at::Tensor& values,
                                                              const at::Tensor& k, const at::Tensor& v,
                                                              const at::Tensor& cos, const at::Tensor& sin,
                                                              const at::Tensor& positions,
                                                              std::initializer_list<int64_t> rows) {
  at::Tensor want_k = keys.clone(), want_v = values.clone();
  const at::Tensor rotated = grpo::model::apply_rope(k, cos, sin);
  for (int64_t r : rows) {
    const int64_t p = positions[r].item<int64_t>();
    want_k[r].select(1, p).copy_(rotated[r].select(1, 0));
    want_v[r].select(1, p).copy_(v[r].select(1, 0));
  }
  return {want_k, want_v};
}

}  // namespace grpo::testing
