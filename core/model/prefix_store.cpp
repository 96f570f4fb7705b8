#include "model/prefix_store.h"

#include <algorithm>

namespace grpo::model {

namespace {

// FNV-1a over the ids, one step at a time: the hash of every prefix of a
// prompt in one pass.
constexpr uint64_t kFnvBasis = 1469598103934665603ull, kFnvPrime = 1099511628211ull;
uint64_t hash_step(uint64_t h, int32_t id) { return (h ^ static_cast<uint32_t>(id)) * kFnvPrime; }

}  // namespace

void PrefixStore::add(Entry e) {
  int64_t bytes = 0;
  for (const auto& [k, v] : e.kv) bytes += k.nbytes() + v.nbytes();
  if (e.ids.empty() || bytes_ + bytes > max_bytes_) return;
  uint64_t h = kFnvBasis;
  for (int32_t id : e.ids) h = hash_step(h, id);
  if (is_length_.size() <= e.ids.size()) is_length_.resize(e.ids.size() + 1, false);
  is_length_[e.ids.size()] = true;
  by_hash_.emplace(h, entries_.size());
  bytes_ += bytes;
  entries_.push_back(std::move(e));
}

void PrefixStore::clear() {
  entries_.clear();
  by_hash_.clear();
  is_length_.clear();
  bytes_ = 0;
}

const PrefixStore::Entry* PrefixStore::longest_prefix_of(const std::vector<int32_t>& prompt) const {
  if (prompt.size() < 2 || is_length_.empty()) return nullptr;
  const Entry* best = nullptr;
  uint64_t h = kFnvBasis;
  const size_t longest = std::min(prompt.size() - 1, is_length_.size() - 1);
  for (size_t n = 1; n <= longest; ++n) {
    h = hash_step(h, prompt[n - 1]);
    if (!is_length_[n]) continue;
    auto [first, last] = by_hash_.equal_range(h);
    for (auto it = first; it != last; ++it) {
      const Entry& e = entries_[it->second];
      if (e.ids.size() == n && std::equal(e.ids.begin(), e.ids.end(), prompt.begin())) {
        best = &e;
        break;
      }
    }
  }
  return best;
}

}  // namespace grpo::model
