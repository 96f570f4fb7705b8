#include "model/kv_cache.h"

#include <algorithm>
#include <functional>
#include <stdexcept>

#include "model/rope.h"

namespace grpo::model {

std::pair<at::Tensor, at::Tensor> LayerKv::rotate_and_append(size_t layer, const at::Tensor& k, const at::Tensor& v,
                                                             const at::Tensor& cos, const at::Tensor& sin) {
  return append(layer, apply_rope(k, cos, sin), v);
}

at::Tensor LayerKv::rotate_and_attend(size_t, const at::Tensor&, const at::Tensor&, const at::Tensor&, double) {
  return {};
}

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

// Where rows go, right-aligned: targets made on the host and moved once, so
// each layer is one indexed write whatever the number of rows (a copy per
// row and layer costs a GPU a launch each).
void KvCache::write_rows(int64_t first_row, size_t layer_count,
                         const std::function<std::pair<at::Tensor, at::Tensor>(size_t)>& values, at::Device device) {
  using at::indexing::Slice;
  using at::indexing::TensorIndex;
  const auto B = static_cast<int64_t>(lengths_.size());
  const int64_t longest = *std::max_element(lengths_.begin(), lengths_.end());
  if (layers_.empty()) {
    at::Tensor mask = at::zeros({B, longest}, at::kLong);
    auto mask_at = mask.accessor<int64_t, 2>();
    for (int64_t p = 0; p < B; ++p)
      for (int64_t t = longest - lengths_[static_cast<size_t>(p)]; t < longest; ++t) mask_at[p][t] = 1;
    key_mask = mask.to(device);
  }
  std::vector<int64_t> to_row, to_position;
  for (int64_t p = first_row; p < B; ++p)
    for (int64_t t = longest - lengths_[static_cast<size_t>(p)]; t < longest; ++t) to_row.push_back(p), to_position.push_back(t);
  const at::Tensor rows = at::tensor(to_row, at::kLong).to(device), positions = at::tensor(to_position, at::kLong).to(device);
  for (size_t l = 0; l < layer_count; ++l) {
    auto [k, v] = values(l);  // [N, H_kv, D], rows first_row.. in order, each row's positions in order
    if (k.size(0) > static_cast<int64_t>(to_row.size()))
      throw std::logic_error("kv cache: more positions placed than the rows were made for");
    if (layers_.size() <= l) {
      // Room for the suffix and some decoding before the first regrowth.
      at::Tensor zeros = at::zeros({B, k.size(1), longest + 64, k.size(2)}, k.options());
      layers_.push_back(Layer{zeros, at::zeros_like(zeros), longest});
    }
    const TensorIndex row(rows.narrow(0, 0, k.size(0))), position(positions.narrow(0, 0, k.size(0)));
    // Advanced indices around a slice take values [N, H_kv, D].
    layers_[l].k.index_put_({row, Slice(), position}, k);
    layers_[l].v.index_put_({row, Slice(), position}, v);
  }
}

void KvCache::place(const KvCache& part, int64_t first_row) {
  std::vector<int64_t> from_row, from_position;
  const std::vector<std::vector<int64_t>> real = part.real_positions();
  for (size_t i = 0; i < real.size(); ++i) {
    const auto row = static_cast<size_t>(first_row) + i;
    if (row >= lengths_.size() || static_cast<int64_t>(real[i].size()) != lengths_[row])
      throw std::logic_error("kv cache: a placed row is not the length it was made for");
    for (int64_t position : real[i]) from_row.push_back(static_cast<int64_t>(i)), from_position.push_back(position);
  }
  const at::Device device = part.layers_.at(0).k.device();
  const at::Tensor rows = at::tensor(from_row, at::kLong).to(device);
  const at::Tensor positions = at::tensor(from_position, at::kLong).to(device).view({-1, 1});
  write_rows(first_row, part.layers_.size(), [&](size_t l) {
    auto [k, v] = part.gather(l, rows, positions);  // [N, H_kv, 1, D]
    return std::make_pair(k.squeeze(2), v.squeeze(2));
  }, device);
}

KvCache KvCache::of_rows(const std::vector<const std::vector<std::pair<at::Tensor, at::Tensor>>*>& rows) {
  std::vector<int64_t> lengths;
  const std::vector<std::pair<at::Tensor, at::Tensor>>* any = nullptr;
  for (const auto* r : rows) {
    const bool some = r && !r->empty() && r->front().first.size(1) > 0;
    if (some) any = r;
    lengths.push_back(some ? r->front().first.size(1) : 0);
  }
  if (!any) return {};
  KvCache cache = with_lengths(std::move(lengths));
  cache.write_rows(0, any->size(), [&](size_t l) {
    std::vector<at::Tensor> keys, values;
    for (const auto* r : rows)
      if (r && !r->empty()) keys.push_back((*r)[l].first), values.push_back((*r)[l].second);
    return std::make_pair(at::cat(keys, 1).permute({1, 0, 2}), at::cat(values, 1).permute({1, 0, 2}));
  }, any->front().first.device());
  return cache;
}

}  // namespace grpo::model
