#include "tokenizer/word_cache.h"

#include <algorithm>
#include <cstring>

#include "tokenizer/tokenizer.h"

namespace grpo::tok {
namespace {

// Arena layout of an entry: key length, id count, key bytes padded to 4,
// then the ids.
constexpr size_t kHeader = 4;
// Bytes reserved per entry: typical pieces are short words of 1-3 tokens.
constexpr size_t kBytesPerEntry = 32;

size_t padded(size_t n) { return (n + 3) & ~size_t{3}; }
size_t entry_size(size_t key_bytes, size_t ids) { return kHeader + padded(key_bytes) + ids * sizeof(int32_t); }

}  // namespace

WordCache::WordCache(size_t capacity) : shards_(new Shard[kShards]) {
  size_t slots = 64;
  while (slots < 2 * std::max<size_t>(capacity / kShards, 1)) slots *= 2;
  shard_entries_ = slots / 2;
  for (size_t i = 0; i < kShards; ++i) {
    shards_[i].slots.assign(slots, Slot{0, 0, 0});
    shards_[i].arena.resize(shard_entries_ * kBytesPerEntry);
  }
}

void WordCache::reset(Shard& shard) {
  shard.arena_used = 0;
  shard.entries = 0;
  if (++shard.generation == 0) {
    // After 2^32 resets old generations could look current again.
    std::fill(shard.slots.begin(), shard.slots.end(), Slot{0, 0, 0});
    shard.generation = 1;
  }
}

bool WordCache::find(std::string_view key, uint64_t hash, std::vector<int32_t>* out) {
  Shard& shard = shard_of(hash);
  std::lock_guard<std::mutex> lock(shard.mutex);
  const size_t mask = shard.slots.size() - 1;
  for (size_t i = hash & mask;; i = (i + 1) & mask) {
    const Slot& slot = shard.slots[i];
    if (slot.generation != shard.generation) break;
    if (slot.hash != hash) continue;
    const char* entry = shard.arena.data() + slot.offset;
    const auto key_bytes = static_cast<uint8_t>(entry[0]);
    const auto ids = static_cast<uint8_t>(entry[1]);
    if (key_bytes != key.size() || std::memcmp(entry + kHeader, key.data(), key_bytes) != 0) continue;
    const size_t old_size = out->size();
    out->resize(old_size + ids);
    std::memcpy(out->data() + old_size, entry + kHeader + padded(key_bytes), ids * sizeof(int32_t));
    ++shard.hits;
    return true;
  }
  ++shard.misses;
  return false;
}

void WordCache::insert(std::string_view key, uint64_t hash, const int32_t* ids, size_t count) {
  if (key.size() > kMaxKeyBytes || count > kMaxIds) return;
  Shard& shard = shard_of(hash);
  std::lock_guard<std::mutex> lock(shard.mutex);
  const size_t size = entry_size(key.size(), count);
  if (shard.entries >= shard_entries_ || shard.arena_used + size > shard.arena.size()) reset(shard);
  if (size > shard.arena.size()) return;
  const size_t mask = shard.slots.size() - 1;
  size_t i = hash & mask;
  // Another thread may have inserted the same piece since our miss.
  for (; shard.slots[i].generation == shard.generation; i = (i + 1) & mask) {
    if (shard.slots[i].hash == hash) {
      const char* entry = shard.arena.data() + shard.slots[i].offset;
      if (static_cast<uint8_t>(entry[0]) == key.size() && std::memcmp(entry + kHeader, key.data(), key.size()) == 0) {
        return;
      }
    }
  }
  char* entry = shard.arena.data() + shard.arena_used;
  entry[0] = static_cast<char>(key.size());
  entry[1] = static_cast<char>(count);
  std::memcpy(entry + kHeader, key.data(), key.size());
  std::memcpy(entry + kHeader + padded(key.size()), ids, count * sizeof(int32_t));
  shard.slots[i] = Slot{hash, static_cast<uint32_t>(shard.arena_used), shard.generation};
  shard.arena_used += size;
  ++shard.entries;
}

void WordCache::add_stats(CacheStats* stats) const {
  for (size_t i = 0; i < kShards; ++i) {
    const Shard& shard = shards_[i];
    std::lock_guard<std::mutex> lock(shard.mutex);
    stats->hits += shard.hits;
    stats->misses += shard.misses;
    stats->entries += shard.entries;
  }
}

}  // namespace grpo::tok
