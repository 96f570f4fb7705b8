// Keys and values of a fixed set of decoding slots, allocated once per shape:
// per layer [slots, H_kv, capacity, D]. A slot holds one sequence from
// position 0; a decoding step writes each slot's new key at that slot's own
// position, so no tensor ever moves or grows — what a captured CUDA graph
// needs, and what lets a finished row's slot take a waiting row at once.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "model/kv_cache.h"
#include "model/model_config.h"

namespace grpo::model {

class SlotCache : public LayerKv {
 public:
  SlotCache(const ModelConfig& config, int64_t slots, int64_t capacity, at::TensorOptions options);

  // The step that decode_slots runs next: the first b = positions.size(0)
  // slots, attending over their first `span` positions.
  void set_step(const at::Tensor& positions, int64_t span);

  // k, v: [b, H_kv, 1, D], written at each slot's position; returns the first
  // b slots' keys/values [b, H_kv, span, D].
  std::pair<at::Tensor, at::Tensor> append(size_t layer, const at::Tensor& k, const at::Tensor& v) override;
  // On a GPU while decoding, k's rotation and both writes are one kernel.
  std::pair<at::Tensor, at::Tensor> rotate_and_append(size_t layer, const at::Tensor& k, const at::Tensor& v,
                                                      const at::Tensor& cos, const at::Tensor& sin) override;
  // A step of one query per slot (decoding) attends in one fused kernel on the
  // CPU or a GPU (cpu/gpu::slot_attention), over each slot's own positions;
  // on a GPU the kernel rotates q as it reads it.
  at::Tensor rotate_and_attend(size_t layer, const at::Tensor& q, const at::Tensor& cos, const at::Tensor& sin,
                               double scale) override;

  // Gives slot slots[i] row rows[i] of `prompts` at its positions
  // positions[i] ([m] and [m, n] int64 on the cache's device), as positions
  // 0..n-1: several prompts' prefills at once, a layer at a time so only one
  // layer's gathered copy exists at once. Rows with fewer real positions than
  // n repeat one: their slot's positions past it are written by decoding
  // before any step reads them.
  // max_gather_bytes: the most one gather of a group of rows holds.
  void load_rows(const at::Tensor& slots, const KvCache& prompts, const at::Tensor& rows, const at::Tensor& positions,
                 int64_t max_gather_bytes = int64_t{256} << 20);

  // Copies slots `from` to slots `to` ([m] int64 each, on the cache's device).
  void move(const at::Tensor& from, const at::Tensor& to);

  // Per layer, copies of slot `slot`'s keys/values at positions 0..n-1: [H_kv, n, D].
  std::vector<std::pair<at::Tensor, at::Tensor>> read(int64_t slot, int64_t n) const;

  int64_t slots() const { return slots_; }
  int64_t capacity() const { return capacity_; }

  // Bytes of keys and values per slot position.
  static int64_t bytes_per_position(const ModelConfig& config, at::ScalarType dtype);

 private:
  int64_t slots_, capacity_;
  std::vector<std::pair<at::Tensor, at::Tensor>> layers_;  // [slots, H_kv, capacity, D]
  at::Tensor attention_counters_;  // on a GPU: gpu::slot_attention's, int32 [slots * H_kv] zeros
  at::Tensor positions_;
  int64_t span_ = 0;
};

}  // namespace grpo::model
