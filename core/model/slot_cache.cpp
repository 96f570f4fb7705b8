#include "model/slot_cache.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "model/cpu_kernels.h"
#include "model/cuda_kernels.h"
#include "model/rope.h"

namespace grpo::model {

SlotCache::SlotCache(const ModelConfig& config, int64_t slots, int64_t capacity, at::TensorOptions options)
    : slots_(slots), capacity_(capacity) {
  for (int64_t l = 0; l < config.num_hidden_layers; ++l)
    layers_.emplace_back(at::zeros({slots, config.num_key_value_heads, capacity, config.head_dim}, options),
                         at::zeros({slots, config.num_key_value_heads, capacity, config.head_dim}, options));
  if (options.device().is_cuda())
    attention_counters_ = at::zeros({slots * config.num_key_value_heads}, options.dtype(at::kInt));
}

int64_t SlotCache::bytes_per_position(const ModelConfig& config, at::ScalarType dtype) {
  return 2 * config.num_hidden_layers * config.num_key_value_heads * config.head_dim *
         static_cast<int64_t>(c10::elementSize(dtype));
}

void SlotCache::set_step(const at::Tensor& positions, int64_t span) {
  if (positions.size(0) > slots_ || span > capacity_ || span < 1)
    throw std::logic_error("slot cache: a step of " + std::to_string(positions.size(0)) + " slots over " +
                           std::to_string(span) + " positions does not fit " + std::to_string(slots_) + " x " +
                           std::to_string(capacity_));
  positions_ = positions;
  span_ = span;
}

std::pair<at::Tensor, at::Tensor> SlotCache::append(size_t layer, const at::Tensor& k, const at::Tensor& v) {
  const int64_t b = k.size(0);
  at::Tensor keys = layers_.at(layer).first.narrow(0, 0, b), values = layers_[layer].second.narrow(0, 0, b);
  // One index per written element: scatter along the position axis.
  at::Tensor where = positions_.view({b, 1, 1, 1}).expand({b, k.size(1), 1, k.size(3)});
  keys.scatter_(2, where, k.to(keys.scalar_type()));
  values.scatter_(2, where, v.to(values.scalar_type()));
  return {keys.narrow(2, 0, span_), values.narrow(2, 0, span_)};
}

std::pair<at::Tensor, at::Tensor> SlotCache::rotate_and_append(size_t layer, const at::Tensor& k, const at::Tensor& v,
                                                               const at::Tensor& cos, const at::Tensor& sin) {
  const int64_t b = k.size(0);
  at::Tensor keys = layers_.at(layer).first.narrow(0, 0, b), values = layers_[layer].second.narrow(0, 0, b);
  if (k.size(2) != 1 || !gpu::applies({k, v, cos, sin, keys})) return append(layer, apply_rope(k, cos, sin), v);
  gpu::rope_into_slots(k, v, cos, sin, positions_, keys, values);
  return {keys.narrow(2, 0, span_), values.narrow(2, 0, span_)};
}

at::Tensor SlotCache::rotate_and_attend(size_t layer, const at::Tensor& q, const at::Tensor& cos, const at::Tensor& sin,
                                        double scale) {
  if (q.dim() != 4 || q.size(2) != 1) return {};
  const int64_t b = q.size(0);
  const at::Tensor keys = layers_.at(layer).first.narrow(0, 0, b), values = layers_[layer].second.narrow(0, 0, b);
  if (cpu::applies({q, keys, values}))
    return cpu::slot_attention(apply_rope(q, cos, sin), keys, values, positions_, span_, scale);
  if (attention_counters_.defined() && gpu::slot_attention_applies(q, cos, sin, keys, values))
    return gpu::slot_attention(q, cos, sin, keys, values, positions_, span_, scale, attention_counters_);
  return {};
}

void SlotCache::load_rows(const at::Tensor& slots, const KvCache& prompts, const at::Tensor& rows,
                          const at::Tensor& positions, int64_t max_gather_bytes) {
  if (prompts.layer_count() != layers_.size()) throw std::logic_error("slot cache: a sequence of another layer count");
  const int64_t n = positions.size(1), m = slots.size(0);
  if (n > capacity_) throw std::logic_error("slot cache: a sequence longer than its capacity");
  // Rows in groups whose gathered keys and values take at most max_gather_bytes
  // (a group of many long copies would hold them all at once, outside the
  // memory budget of the slots).
  const at::Tensor& k0 = layers_.front().first;
  const int64_t row_bytes = 2 * n * k0.size(1) * k0.size(3) * static_cast<int64_t>(k0.element_size());
  const int64_t group = std::clamp<int64_t>(max_gather_bytes / std::max<int64_t>(row_bytes, 1), 1, m);
  for (int64_t from = 0; from < m; from += group) {
    const int64_t count = std::min(group, m - from);
    const at::Tensor to = slots.narrow(0, from, count), of = rows.narrow(0, from, count),
                     where = positions.narrow(0, from, count);
    for (size_t l = 0; l < layers_.size(); ++l) {
      auto [k, v] = prompts.gather(l, of, where);
      layers_[l].first.narrow(2, 0, n).index_copy_(0, to, k);
      layers_[l].second.narrow(2, 0, n).index_copy_(0, to, v);
    }
  }
}

void SlotCache::move(const at::Tensor& from, const at::Tensor& to) {
  for (auto& [k, v] : layers_) {
    k.index_copy_(0, to, k.index_select(0, from));
    v.index_copy_(0, to, v.index_select(0, from));
  }
}

std::vector<std::pair<at::Tensor, at::Tensor>> SlotCache::read(int64_t slot, int64_t n) const {
  std::vector<std::pair<at::Tensor, at::Tensor>> out;
  for (const auto& [k, v] : layers_) out.emplace_back(k[slot].narrow(1, 0, n).clone(), v[slot].narrow(1, 0, n).clone());
  return out;
}

}  // namespace grpo::model
