#include "model/kv_cache.h"

#include <algorithm>
#include <stdexcept>

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

std::vector<std::pair<at::Tensor, at::Tensor>> KvCache::real_row(int64_t b) const {
  const at::Tensor real = key_mask[b].nonzero().squeeze(1);
  std::vector<std::pair<at::Tensor, at::Tensor>> out;
  for (const Layer& l : layers_) {
    at::Tensor k = l.k[b].narrow(1, 0, l.used), v = l.v[b].narrow(1, 0, l.used);
    out.emplace_back(k.index_select(1, real), v.index_select(1, real));
  }
  return out;
}

std::vector<std::vector<int64_t>> KvCache::real_positions() const {
  std::vector<std::vector<int64_t>> out;
  if (!key_mask.defined()) return out;
  const at::Tensor mask = key_mask.to(at::kCPU, at::kLong).contiguous();
  const int64_t B = mask.size(0), S = mask.size(1);
  const int64_t* m = mask.data_ptr<int64_t>();
  out.resize(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t s = 0; s < S; ++s)
      if (m[b * S + s]) out[static_cast<size_t>(b)].push_back(s);
  return out;
}

std::pair<at::Tensor, at::Tensor> KvCache::gather(size_t layer, const at::Tensor& rows, const at::Tensor& positions) const {
  using at::indexing::Slice;
  using at::indexing::TensorIndex;
  const Layer& l = layers_.at(layer);
  const at::Tensor row_index = rows.view({rows.size(0), 1});
  // Advanced indices around a slice: the result is [m, n, H_kv, D].
  auto pick = [&](const at::Tensor& t) {
    return t.narrow(2, 0, l.used).index({TensorIndex(row_index), Slice(), TensorIndex(positions)}).permute({0, 2, 1, 3});
  };
  return {pick(l.k), pick(l.v)};
}

KvCache KvCache::with_lengths(std::vector<int64_t> lengths) {
  KvCache cache;
  cache.lengths_ = std::move(lengths);
  return cache;
}

void KvCache::place(const KvCache& part, int64_t first_row) {
  using at::indexing::Slice;
  using at::indexing::TensorIndex;
  const at::Device device = part.layers_.at(0).k.device();
  const auto B = static_cast<int64_t>(lengths_.size());
  const int64_t longest = *std::max_element(lengths_.begin(), lengths_.end());
  if (layers_.empty()) {
    for (const Layer& l : part.layers_) {
      // Room for some decoding before the first regrowth, as of_rows leaves.
      at::Tensor k = at::zeros({B, l.k.size(1), longest + 64, l.k.size(3)}, l.k.options());
      layers_.push_back(Layer{k, at::zeros_like(k), longest});
    }
    at::Tensor mask = at::zeros({B, longest}, at::kLong);
    auto mask_at = mask.accessor<int64_t, 2>();
    for (int64_t p = 0; p < B; ++p)
      for (int64_t t = longest - lengths_[static_cast<size_t>(p)]; t < longest; ++t) mask_at[p][t] = 1;
    key_mask = mask.to(device);
  }
  std::vector<int64_t> from_row, from_position, to_row, to_position;
  const std::vector<std::vector<int64_t>> real = part.real_positions();
  for (size_t i = 0; i < real.size(); ++i) {
    const int64_t row = first_row + static_cast<int64_t>(i), n = static_cast<int64_t>(real[i].size());
    if (row >= B || n != lengths_[static_cast<size_t>(row)])
      throw std::logic_error("kv cache: a placed row is not the length it was made for");
    for (int64_t t = 0; t < n; ++t) {
      from_row.push_back(static_cast<int64_t>(i));
      from_position.push_back(real[i][static_cast<size_t>(t)]);
      to_row.push_back(row);
      to_position.push_back(longest - n + t);
    }
  }
  auto index = [&](const std::vector<int64_t>& v) { return TensorIndex(at::tensor(v, at::kLong).to(device)); };
  const TensorIndex fr = index(from_row), fp = index(from_position), tr = index(to_row), tp = index(to_position);
  for (size_t l = 0; l < layers_.size(); ++l) {
    const Layer& src = part.layers_[l];
    // Advanced indices around a slice: [N, H_kv, D] read, and written.
    layers_[l].k.index_put_({tr, Slice(), tp}, src.k.narrow(2, 0, src.used).index({fr, Slice(), fp}));
    layers_[l].v.index_put_({tr, Slice(), tp}, src.v.narrow(2, 0, src.used).index({fr, Slice(), fp}));
  }
}

KvCache KvCache::of_rows(const std::vector<const std::vector<std::pair<at::Tensor, at::Tensor>>*>& rows) {
  using at::indexing::Slice;
  using at::indexing::TensorIndex;
  KvCache cache;
  const std::vector<std::pair<at::Tensor, at::Tensor>>* any = nullptr;
  int64_t longest = 0;
  for (const auto* r : rows)
    if (r && !r->empty()) any = r, longest = std::max(longest, r->front().first.size(1));
  if (!any || longest == 0) return cache;
  const auto B = static_cast<int64_t>(rows.size());
  // Where each row's positions go, right-aligned: made on the host and moved
  // once, so each layer is one concatenation and one indexed write whatever
  // the number of rows (a copy per row and layer costs a GPU a launch each).
  std::vector<int64_t> row_of, position_of;
  at::Tensor mask = at::zeros({B, longest}, at::kLong);
  auto mask_at = mask.accessor<int64_t, 2>();
  for (int64_t p = 0; p < B; ++p) {
    const auto* r = rows[static_cast<size_t>(p)];
    if (!r || r->empty()) continue;
    const int64_t n = r->front().first.size(1);
    for (int64_t t = longest - n; t < longest; ++t) {
      row_of.push_back(p);
      position_of.push_back(t);
      mask_at[p][t] = 1;
    }
  }
  const at::Device device = any->front().first.device();
  const at::Tensor row_index = at::tensor(row_of, at::kLong).to(device);
  const at::Tensor position_index = at::tensor(position_of, at::kLong).to(device);
  cache.layers_.resize(any->size());
  for (size_t l = 0; l < any->size(); ++l) {
    std::vector<at::Tensor> keys, values;
    for (const auto* r : rows)
      if (r && !r->empty()) keys.push_back((*r)[l].first), values.push_back((*r)[l].second);
    const at::Tensor& k0 = keys.front();
    // Room for the suffix and some decoding before the first regrowth.
    at::Tensor k = at::zeros({B, k0.size(0), longest + 64, k0.size(2)}, k0.options()), v = at::zeros_like(k);
    // Advanced indices around a slice take values [N, H_kv, D].
    k.index_put_({TensorIndex(row_index), Slice(), TensorIndex(position_index)}, at::cat(keys, 1).permute({1, 0, 2}));
    v.index_put_({TensorIndex(row_index), Slice(), TensorIndex(position_index)}, at::cat(values, 1).permute({1, 0, 2}));
    cache.layers_[l] = Layer{k, v, longest};
  }
  cache.key_mask = mask.to(device);
  return cache;
}

}  // namespace grpo::model
