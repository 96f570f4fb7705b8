// How a kernel over rows of the last dim can read a tensor in place.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace grpo::model {

// The stride from one row to the next of t seen as [numel / size(-1),
// size(-1)], its last dim contiguous; -1 where no one stride steps from row
// to row (the tensor would need a copy). The halves of a packed product,
// [.., 2n] cut into two [.., n], have rows of a stride of 2n.
inline int64_t row_stride(const at::Tensor& t) {
  if (t.dim() == 0 || t.numel() == 0 || (t.size(-1) > 1 && t.stride(-1) != 1)) return -1;
  int64_t stride = -1, next = 0;  // the first stride met, and what the dim before must have
  for (int64_t d = t.dim() - 2; d >= 0; --d) {
    if (t.size(d) == 1) continue;
    if (stride < 0) stride = next = t.stride(d);
    else if (t.stride(d) != next) return -1;
    next *= t.size(d);
  }
  return stride < 0 ? t.size(-1) : stride;
}

}  // namespace grpo::model
