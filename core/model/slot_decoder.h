// Decoding in fixed slots with no host in the loop: each slot holds one row
// (a completion being sampled) and every per-row quantity lives in a tensor
// of the model's device, allocated once per shape — the id fed next, its
// position, the ids and log-probabilities sampled so far, the row's uniform
// draws, its stop ids and token budget, and whether it is done. step() feeds,
// samples (model/sampling.h, on the device), records and checks the stop
// conditions with device operations of shapes fixed by (b, span), so one
// step can be captured as a CUDA graph and replayed (model/decode_graphs.h);
// the host reads `done` and `generated` back every few steps, takes finished
// rows out and gives their slots to waiting rows (admit).
#pragma once

#include <cstdint>
#include <vector>

#include "model/sampling.h"
#include "model/slot_cache.h"
#include "model/transformer.h"

namespace grpo::model {

struct SlotShape {
  int64_t slots = 0;         // rows decoded at once
  int64_t capacity = 0;      // positions per slot: the longest prompt and its completion
  int64_t max_new = 0;       // ids a row may sample
  int64_t stop_width = 0;    // stop ids per row
  int64_t top_logprobs = 0;  // most likely tokens recorded per id
  bool seen = false;         // rows track their ids (repetition penalty)

  // True when a decoder of this shape can run what `need` asks for.
  bool holds(const SlotShape& need) const;
};

// A row starting in a slot; its prompt's keys and values are loaded already.
struct SlotAdmission {
  int64_t slot = 0;
  const std::vector<int32_t>* prompt = nullptr;
  int64_t budget = 0;               // ids to sample at most (>= 1)
  std::vector<int32_t> stop_ids;
  std::vector<float> draws;         // one uniform draw per id, in order
};

class SlotDecoder {
 public:
  SlotDecoder(CausalLM model, const SlotShape& shape, const SamplingParams& params);

  const SlotShape& shape() const { return shape_; }
  const SamplingParams& params() const { return params_; }
  SlotCache& cache() { return cache_; }

  // Starts `rows`, sampling each one's first id from `logits` [m, V], the
  // last prompt logits of row i in row i. A row whose first id ends it is
  // done at once.
  void admit(const std::vector<SlotAdmission>& rows, const at::Tensor& logits);

  // One decoding step of the first b slots over their first `span` positions:
  // device operations only. Done rows compute along and change nothing of
  // their own state.
  void step(int64_t b, int64_t span);

  // Ends the rows of `slots` where they are (a stop string, a cancelled
  // request): they change nothing more, and their slots may be admitted to.
  void retire(const std::vector<int64_t>& slots);

  // Moves the rows of slots from[i] to slots to[i] (free ones), all they
  // hold included; the slots they leave are free. Packs the rows that are
  // left into the first slots, so the steps run over fewer.
  void move(const std::vector<int64_t>& from, const std::vector<int64_t>& to);

  // [2, b] int64 on the CPU: done (0/1) and ids sampled, per slot.
  at::Tensor read_progress(int64_t b) const;

  // What the first b slots sampled, their first n ids: ids [b, n] int64,
  // their log-probabilities [b, n] and most likely tokens [b, n, k].
  at::Tensor ids(int64_t b, int64_t n) const { return out_ids_.narrow(0, 0, b).narrow(1, 0, n); }
  at::Tensor logprobs(int64_t b, int64_t n) const { return out_logprobs_.narrow(0, 0, b).narrow(1, 0, n); }
  at::Tensor top_ids(int64_t b, int64_t n) const { return out_top_ids_.narrow(0, 0, b).narrow(1, 0, n); }
  at::Tensor top_logprobs(int64_t b, int64_t n) const { return out_top_logprobs_.narrow(0, 0, b).narrow(1, 0, n); }

 private:
  CausalLM model_;
  SlotShape shape_;
  SamplingParams params_;
  SlotCache cache_;
  at::Tensor tokens_, positions_, generated_, budget_, done_;  // [slots]
  at::Tensor stop_ids_;                                        // [slots, stop_width], -1 pads
  at::Tensor draws_;                                           // [slots, max_new] float32
  at::Tensor out_ids_, out_logprobs_;                          // [slots, max_new]
  at::Tensor out_top_ids_, out_top_logprobs_;                  // [slots, max_new, top_logprobs]
  at::Tensor seen_;                                            // [slots, V] bool when shape.seen
};

}  // namespace grpo::model
