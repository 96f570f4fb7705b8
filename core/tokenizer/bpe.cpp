#include "tokenizer/bpe.h"

#include <climits>
#include <functional>
#include <queue>

#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer.h"

namespace grpo::tok {
namespace {

// Longer pieces rarely repeat and would crowd the cache.
constexpr size_t kMaxCachedBytes = 64;
// Up to this many symbols a linear scan for the best pair beats a heap.
constexpr size_t kScanLimit = 48;

}  // namespace

void BpeModel::MergeTable::insert(int32_t left, int32_t right, int32_t rank, int32_t merged) {
  if ((size_ + 1) * 2 > slots_.size()) grow();
  const uint64_t key = key_of(left, right);
  const size_t mask = slots_.size() - 1;
  for (size_t i = index_of(key);; i = (i + 1) & mask) {
    Slot& slot = slots_[i];
    if (slot.key == kEmpty) {
      slot = {key, rank, merged};
      ++size_;
      return;
    }
    if (slot.key == key) {
      // Hugging Face builds its merge map by collecting in file order, so a
      // repeated pair ends up with its last rank.
      slot.rank = rank;
      slot.merged = merged;
      return;
    }
  }
}

const BpeModel::MergeTable::Slot* BpeModel::MergeTable::find(int32_t left, int32_t right) const {
  if (slots_.empty()) return nullptr;
  const uint64_t key = key_of(left, right);
  const size_t mask = slots_.size() - 1;
  for (size_t i = index_of(key);; i = (i + 1) & mask) {
    const Slot& slot = slots_[i];
    if (slot.key == key) return &slot;
    if (slot.key == kEmpty) return nullptr;
  }
}

void BpeModel::MergeTable::grow() {
  std::vector<Slot> old;
  old.swap(slots_);
  const size_t capacity = old.empty() ? 1024 : old.size() * 2;
  slots_.assign(capacity, Slot{kEmpty, 0, 0});
  shift_ = 64;
  for (size_t c = capacity; c > 1; c >>= 1) --shift_;
  size_ = 0;
  for (const Slot& slot : old) {
    if (slot.key != kEmpty) insert(int32_t(slot.key >> 32), int32_t(slot.key & 0xFFFFFFFFu), slot.rank, slot.merged);
  }
}

BpeModel::BpeModel(std::unordered_map<std::string, int32_t> vocab, BpeOptions options, std::string source)
    : vocab_(std::move(vocab)),
      options_(options),
      source_(std::move(source)),
      cache_(std::make_unique<WordCache>(options.cache_capacity)) {
  const ByteLevel& bytes = ByteLevel::instance();
  for (int b = 0; b < 256; ++b) byte_ids_[b] = token_to_id(bytes.utf8_of(static_cast<uint8_t>(b)));
}

void BpeModel::add_merge(const std::string& left, const std::string& right, size_t rank) {
  const auto fail = [&](const std::string& token) {
    throw TokenizerError(source_ + ": merge #" + std::to_string(rank) + " '" + left + " " + right +
                         "' refers to unknown token '" + token + "'");
  };
  const int32_t l = token_to_id(left);
  if (l < 0) fail(left);
  const int32_t r = token_to_id(right);
  if (r < 0) fail(right);
  const int32_t merged = token_to_id(left + right);
  if (merged < 0) fail(left + right);
  if (rank > static_cast<size_t>(INT32_MAX - 1)) throw TokenizerError(source_ + ": too many merges");
  merges_.insert(l, r, static_cast<int32_t>(rank), merged);
}

int32_t BpeModel::token_to_id(std::string_view token) const {
  const auto it = vocab_.find(std::string(token));
  return it == vocab_.end() ? -1 : it->second;
}

void BpeModel::encode(std::string_view piece, std::vector<int32_t>* out) const {
  if (piece.size() == 1 && byte_ids_[static_cast<uint8_t>(piece[0])] >= 0) {
    out->push_back(byte_ids_[static_cast<uint8_t>(piece[0])]);
    return;
  }
  if (piece.size() > kMaxCachedBytes) {
    merge_piece(piece, out);
    return;
  }
  const size_t hash = std::hash<std::string_view>{}(piece);
  if (cache_->find(piece, hash, out)) return;
  const size_t before = out->size();
  merge_piece(piece, out);
  cache_->insert(piece, hash, out->data() + before, out->size() - before);
}

void BpeModel::merge_piece(std::string_view piece, std::vector<int32_t>* out) const {
  if (options_.ignore_merges) {
    const int32_t whole = token_to_id(ByteLevel::instance().encode(piece));
    if (whole >= 0) {
      out->push_back(whole);
      return;
    }
  }
  thread_local std::vector<int32_t> symbols;
  symbols.clear();
  bool previous_unknown = false;
  for (unsigned char b : piece) {
    const int32_t id = byte_ids_[b];
    if (id >= 0) {
      symbols.push_back(id);
      previous_unknown = false;
    } else if (options_.unk_id) {
      if (!(options_.fuse_unk && previous_unknown)) symbols.push_back(*options_.unk_id);
      previous_unknown = true;
    }
    // Without an unk token a byte missing from the vocabulary is dropped,
    // as Hugging Face does; byte-level vocabularies contain all 256.
  }
  if (symbols.size() <= kScanLimit) {
    merge_by_scan(&symbols);
  } else {
    merge_by_heap(&symbols);
  }
  out->insert(out->end(), symbols.begin(), symbols.end());
}

void BpeModel::merge_by_scan(std::vector<int32_t>* symbols) const {
  std::vector<int32_t>& s = *symbols;
  if (s.size() < 2) return;
  // ranks[i] / merged[i] describe the pair (s[i], s[i + 1]); only the pairs
  // next to a merge change, so each round costs one lookup per neighbour.
  thread_local std::vector<int32_t> ranks, merged;
  ranks.assign(s.size() - 1, INT32_MAX);
  merged.assign(s.size() - 1, -1);
  const auto refresh = [&](size_t i) {
    const MergeTable::Slot* slot = merges_.find(s[i], s[i + 1]);
    ranks[i] = slot ? slot->rank : INT32_MAX;
    merged[i] = slot ? slot->merged : -1;
  };
  for (size_t i = 0; i + 1 < s.size(); ++i) refresh(i);
  while (!ranks.empty()) {
    size_t best = 0;
    for (size_t i = 1; i < ranks.size(); ++i) {
      if (ranks[i] < ranks[best]) best = i;
    }
    if (ranks[best] == INT32_MAX) break;
    s[best] = merged[best];
    s.erase(s.begin() + static_cast<std::ptrdiff_t>(best) + 1);
    ranks.erase(ranks.begin() + static_cast<std::ptrdiff_t>(best));
    merged.erase(merged.begin() + static_cast<std::ptrdiff_t>(best));
    if (best > 0) refresh(best - 1);
    if (best < ranks.size()) refresh(best);
  }
}

void BpeModel::merge_by_heap(std::vector<int32_t>* symbols) const {
  std::vector<int32_t>& s = *symbols;
  const int32_t n = static_cast<int32_t>(s.size());
  // Symbols form a linked list over their original positions; a merge keeps
  // the left position and unlinks the right one.
  std::vector<int32_t> prev(s.size()), next(s.size());
  std::vector<char> alive(s.size(), 1);
  for (int32_t i = 0; i < n; ++i) {
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  struct Candidate {
    int32_t rank, pos, merged;
    // std::priority_queue pops the largest: invert so the lowest rank, then
    // the leftmost position, comes first.
    bool operator<(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Candidate> queue;
  const auto offer = [&](int32_t pos) {
    if (pos < 0 || next[pos] < 0) return;
    if (const MergeTable::Slot* slot = merges_.find(s[pos], s[next[pos]])) queue.push({slot->rank, pos, slot->merged});
  };
  for (int32_t i = 0; i + 1 < n; ++i) offer(i);
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    // Entries go stale when a neighbour merged first; re-check the pair.
    if (!alive[top.pos] || next[top.pos] < 0) continue;
    const int32_t right = next[top.pos];
    const MergeTable::Slot* slot = merges_.find(s[top.pos], s[right]);
    if (slot == nullptr || slot->merged != top.merged) continue;
    s[top.pos] = top.merged;
    alive[right] = 0;
    next[top.pos] = next[right];
    if (next[right] >= 0) prev[next[right]] = top.pos;
    offer(prev[top.pos]);
    offer(top.pos);
  }
  size_t kept = 0;
  for (int32_t i = 0; i < n; ++i) {
    if (alive[i]) s[kept++] = s[i];
  }
  s.resize(kept);
}

}  // namespace grpo::tok
