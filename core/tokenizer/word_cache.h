// A bounded, thread-safe map from pre-tokenized piece to BPE ids. Natural
// text repeats the same words constantly, so most pieces skip BPE entirely.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string_view>
#include <vector>

namespace grpo::tok {

struct CacheStats;

class WordCache {
 public:
  // Roughly `capacity` entries of a few words' size in total.
  explicit WordCache(size_t capacity);

  // Appends the cached ids of `key` to *out and returns true on a hit.
  bool find(std::string_view key, uint64_t hash, std::vector<int32_t>* out);
  void insert(std::string_view key, uint64_t hash, const int32_t* ids, size_t count);
  void add_stats(CacheStats* stats) const;

  // Entries with longer keys or more ids are not cached.
  static constexpr size_t kMaxKeyBytes = 255;
  static constexpr size_t kMaxIds = 255;

 private:
  // Each shard is an open-addressing table of offsets into a byte arena that
  // holds the keys and ids. A full shard is emptied at once by bumping its
  // generation, so steady-state use allocates nothing and old entries need
  // no bookkeeping.
  struct Slot {
    uint64_t hash;
    uint32_t offset;      // of the entry in the arena
    uint32_t generation;  // the slot is empty unless this matches the shard's
  };
  struct alignas(64) Shard {
    mutable std::mutex mutex;
    std::vector<Slot> slots;
    std::vector<char> arena;
    size_t arena_used = 0;
    size_t entries = 0;
    uint32_t generation = 1;
    uint64_t hits = 0;
    uint64_t misses = 0;
  };
  static constexpr size_t kShards = 64;

  Shard& shard_of(uint64_t hash) { return shards_[(hash >> 40) % kShards]; }
  void reset(Shard& shard);

  std::unique_ptr<Shard[]> shards_;
  size_t shard_entries_;  // entries allowed per shard (half its slots)
};

}  // namespace grpo::tok
