// Decoding steps replayed as CUDA graphs: one graph per (b, span) a call
// meets, all sharing one memory pool. A step of a (b, span) not seen before
// runs eagerly on a side stream — that warms cuBLAS and the allocator and
// does the step's work — and is then captured, without running, for the next
// steps of that shape to replay: one launch per token instead of hundreds of
// kernels and host round trips. Elsewhere (the CPU, a build without CUDA,
// graphs turned off) every step runs eagerly.
#pragma once

#include <cstdint>
#include <memory>

#include "model/slot_decoder.h"

namespace grpo::model {

class DecodeGraphs {
 public:
  // `enabled`: capture when the decoder's device is a GPU.
  explicit DecodeGraphs(bool enabled);
  ~DecodeGraphs();
  DecodeGraphs(const DecodeGraphs&) = delete;
  DecodeGraphs& operator=(const DecodeGraphs&) = delete;

  // One step of `decoder`'s first b slots over `span` positions. The graphs
  // capture the decoder's buffers: clear() before a new decoder steps.
  void step(SlotDecoder& decoder, int64_t b, int64_t span, at::Device device);

  void clear();
  int64_t captured() const;  // graphs held
  int64_t replays() const;   // steps that replayed a graph

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace grpo::model
