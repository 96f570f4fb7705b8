// Byte-level BPE: a piece of raw bytes starts as one base token per byte and
// adjacent tokens are merged, lowest merge rank first (leftmost on ties),
// until no listed merge applies — the result Hugging Face's BPE model gives.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/word_cache.h"

namespace grpo::tok {

struct BpeOptions {
  std::optional<int32_t> unk_id;  // stands for bytes whose base token is missing
  bool fuse_unk = false;          // consecutive unknown bytes give one unk
  bool ignore_merges = false;     // a piece that is itself a token is not merged (Llama 3)
  size_t cache_capacity = 1 << 17;
};

class BpeModel {
 public:
  // `vocab` maps byte-level token text to id. `source` names the file in errors.
  BpeModel(std::unordered_map<std::string, int32_t> vocab, BpeOptions options, std::string source);

  // Registers the merge of rank `rank` (its index in the file). Throws
  // TokenizerError when a side or the merged token is not in the vocabulary.
  void add_merge(const std::string& left, const std::string& right, size_t rank);

  int32_t token_to_id(std::string_view token) const;  // -1 when absent
  const std::unordered_map<std::string, int32_t>& vocab() const { return vocab_; }

  // Appends the ids of one pre-tokenized piece (raw bytes). Thread-safe.
  void encode(std::string_view piece, std::vector<int32_t>* out) const;

  void add_cache_stats(CacheStats* stats) const { cache_->add_stats(stats); }

 private:
  // Open-addressing hash from an ordered id pair to (rank, merged id): the
  // lookup in BPE's inner loop, kept flat for cache locality.
  class MergeTable {
   public:
    struct Slot {
      uint64_t key;
      int32_t rank;
      int32_t merged;
    };
    void insert(int32_t left, int32_t right, int32_t rank, int32_t merged);
    const Slot* find(int32_t left, int32_t right) const;

   private:
    static constexpr uint64_t kEmpty = ~uint64_t{0};
    static uint64_t key_of(int32_t l, int32_t r) { return (uint64_t(uint32_t(l)) << 32) | uint32_t(r); }
    size_t index_of(uint64_t key) const { return size_t((key * 0x9E3779B97F4A7C15ull) >> shift_); }
    void grow();

    std::vector<Slot> slots_;
    size_t size_ = 0;
    unsigned shift_ = 64;
  };

  void merge_piece(std::string_view piece, std::vector<int32_t>* out) const;
  void merge_by_scan(std::vector<int32_t>* symbols) const;
  void merge_by_heap(std::vector<int32_t>* symbols) const;

  std::unordered_map<std::string, int32_t> vocab_;
  BpeOptions options_;
  std::string source_;
  std::array<int32_t, 256> byte_ids_{};
  MergeTable merges_;
  std::unique_ptr<WordCache> cache_;
};

}  // namespace grpo::tok
