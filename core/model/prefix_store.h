// The keys and values of the previous generate call's completions, kept for
// the next call when it continues them (the next turn of multi-turn
// conversations): a prompt that extends a kept sequence is prefilled from
// where that sequence ends instead of from its first id.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include <ATen/ATen.h>

namespace grpo::model {

class PrefixStore {
 public:
  struct Entry {
    std::vector<int32_t> ids;                      // the ids whose keys and values these are
    std::vector<std::pair<at::Tensor, at::Tensor>> kv;  // per layer: [H_kv, ids, D]
  };

  explicit PrefixStore(int64_t max_bytes) : max_bytes_(max_bytes) {}
  // Keeps `e` unless the store would pass its budget (the entry is then not kept).
  void add(Entry e);
  void clear();
  // The longest kept sequence that is a proper prefix of `prompt` (at least
  // one id of the prompt is left to prefill, for its logits), or null.
  const Entry* longest_prefix_of(const std::vector<int32_t>& prompt) const;
  size_t size() const { return entries_.size(); }
  int64_t bytes() const { return bytes_; }

 private:
  int64_t max_bytes_, bytes_ = 0;
  std::vector<Entry> entries_;
  std::unordered_multimap<uint64_t, size_t> by_hash_;  // the hash of an entry's ids -> entry
  std::vector<bool> is_length_;                        // is_length_[n]: some entry holds n ids
};

}  // namespace grpo::model
