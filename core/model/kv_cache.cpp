#include "model/kv_cache.h"

namespace grpo::model {

std::pair<at::Tensor, at::Tensor> KvCache::append(size_t layer, const at::Tensor& k, const at::Tensor& v) {
  if (layers_.size() <= layer) layers_.resize(layer + 1);
  Layer& l = layers_[layer];
  const int64_t T = k.size(2), need = l.used + T;
  if (!l.k.defined() || need > l.k.size(2)) {
    const int64_t capacity = std::max<int64_t>(need, l.k.defined() ? 2 * l.k.size(2) : need + 64);
    auto sizes = k.sizes().vec();
    sizes[2] = capacity;
    at::Tensor nk = at::empty(sizes, k.options()), nv = at::empty(sizes, v.options());
    if (l.used) {
      nk.narrow(2, 0, l.used).copy_(l.k.narrow(2, 0, l.used));
      nv.narrow(2, 0, l.used).copy_(l.v.narrow(2, 0, l.used));
    }
    l.k = nk;
    l.v = nv;
  }
  l.k.narrow(2, l.used, T).copy_(k);
  l.v.narrow(2, l.used, T).copy_(v);
  l.used = need;
  return {l.k.narrow(2, 0, need), l.v.narrow(2, 0, need)};
}

void KvCache::select_rows(const at::Tensor& index) {
  for (Layer& l : layers_) {
    if (!l.k.defined()) continue;
    l.k = l.k.index_select(0, index);
    l.v = l.v.index_select(0, index);
  }
  if (key_mask.defined()) key_mask = key_mask.index_select(0, index);
}

}  // namespace grpo::model
