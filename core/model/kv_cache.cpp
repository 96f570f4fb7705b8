#include "model/kv_cache.h"

namespace grpo::model {

void KvCache::select_rows(const at::Tensor& index) {
  for (auto& k : keys) k = k.index_select(0, index);
  for (auto& v : values) v = v.index_select(0, index);
  if (key_mask.defined()) key_mask = key_mask.index_select(0, index);
}

}  // namespace grpo::model
