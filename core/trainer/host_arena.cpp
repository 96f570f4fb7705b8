#include "trainer/host_arena.h"

#include <algorithm>

namespace grpo::trainer {

namespace {

constexpr int64_t kAlign = 256;  // every copy starts aligned for any dtype and for DMA

int64_t power_of_two_at_least(int64_t n) {
  int64_t p = 1;
  while (p < n) p <<= 1;
  return p;
}

}  // namespace

at::Tensor HostArena::take(int64_t nbytes, bool pinned) {
  for (; chunk_ < chunks_.size(); ++chunk_, offset_ = 0) {
    const at::Tensor& chunk = chunks_[chunk_];
    // A chunk of the other kind (pinned or not) is passed over: sources on a GPU need pinned memory.
    if (pinned_[chunk_] != pinned || offset_ + nbytes > chunk.numel()) continue;
    at::Tensor place = chunk.narrow(0, offset_, nbytes);
    offset_ = (offset_ + nbytes + kAlign - 1) / kAlign * kAlign;
    used_ += nbytes;
    return place;
  }
  // A new chunk, after those there are (a rewound arena fills them again in the same order).
  const int64_t size = power_of_two_at_least(std::max(next_chunk_, nbytes));
  next_chunk_ = std::min(2 * size, std::max(max_chunk_, next_chunk_));
  chunks_.push_back(at::empty({size}, at::TensorOptions().dtype(at::kByte).pinned_memory(pinned)));
  pinned_.push_back(pinned);
  chunk_ = chunks_.size() - 1;
  offset_ = (nbytes + kAlign - 1) / kAlign * kAlign;
  used_ += nbytes;
  return chunks_.back().narrow(0, 0, nbytes);
}

at::Tensor HostArena::copy_of(const at::Tensor& t) {
  const int64_t nbytes = static_cast<int64_t>(t.numel()) * static_cast<int64_t>(t.element_size());
  if (nbytes == 0) return at::empty(t.sizes(), t.options().device(at::kCPU));
  at::Tensor host = take(nbytes, t.is_cuda()).view(t.scalar_type()).view(t.sizes());
  host.copy_(t, /*non_blocking=*/t.is_cuda());
  return host;
}

int64_t HostArena::held_bytes() const {
  int64_t held = 0;
  for (const at::Tensor& c : chunks_) held += c.numel();
  return held;
}

}  // namespace grpo::trainer
