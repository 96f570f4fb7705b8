// Host memory for what --offload_model and --offload_optimizer move off the
// GPU. LibTorch's pinned allocator rounds every block up to a power of two,
// so the moments of a 7B model (tensors of 26 MB to 1.1 GB) would take about
// 1.8x their size of page-locked memory, which the OS can neither page out
// nor give to anyone else. The arena asks it for chunks that are powers of
// two already (nothing rounded) and places the copies in them one after
// another; after rewind() the same sequence of sizes lands in the same
// places, so each step's offload reuses the last one's memory.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/ATen.h>

namespace grpo::trainer {

class HostArena {
 public:
  // Chunks double from `first_chunk` bytes up to `max_chunk` (a copy larger
  // than that gets a chunk of its own): a small model takes little, a 7B
  // model's 30 GB of moments waste a few percent at the chunks' ends.
  explicit HostArena(int64_t first_chunk = int64_t{1} << 20, int64_t max_chunk = int64_t{1} << 30)
      : next_chunk_(first_chunk), max_chunk_(max_chunk) {}

  // `t` copied into the arena (contiguous, its dtype and sizes); pinned and
  // issued asynchronously when `t` lives on a GPU. The copy is valid until
  // the next rewind(): whoever holds copies rewinds only once they are gone.
  at::Tensor copy_of(const at::Tensor& t);
  // The next copies reuse the arena from its start.
  void rewind() { chunk_ = 0, offset_ = 0, used_ = 0; }
  // What the arena holds of host memory, and how much of it is in use since the last rewind.
  int64_t held_bytes() const;
  int64_t used_bytes() const { return used_; }

 private:
  at::Tensor take(int64_t nbytes, bool pinned);  // bytes at the next free place

  int64_t next_chunk_, max_chunk_;
  std::vector<at::Tensor> chunks_;  // uint8, each a power of two of bytes
  std::vector<bool> pinned_;        // per chunk
  size_t chunk_ = 0;                // where the next copy goes
  int64_t offset_ = 0;
  int64_t used_ = 0;
};

}  // namespace grpo::trainer
