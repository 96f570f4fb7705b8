// The run state of decoding: keys and values of every layer, kept apart from
// the model's weights (one model, many caches).
#pragma once

#include <ATen/ATen.h>

#include <vector>

namespace grpo::model {

struct KvCache {
  std::vector<at::Tensor> keys, values;  // per layer: [B, H_kv, S, D]
  at::Tensor key_mask;                   // [B, S] 1 = real token, 0 = padding
  int64_t length() const { return key_mask.defined() ? key_mask.size(1) : 0; }

  // Keeps the rows `index` ([B'] int64) in that order: drops finished rows and
  // shares a prompt's cache across its G copies.
  void select_rows(const at::Tensor& index);
};

}  // namespace grpo::model
