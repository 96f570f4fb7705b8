#include "tokenizer/bpe_trainer.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <queue>
#include <unordered_map>

#include <spdlog/spdlog.h>

#include "tokenizer/byte_level.h"

namespace grpo::tok {

namespace {

using Symbol = uint32_t;  // an index into the vocabulary being built

struct Word {
  std::vector<Symbol> symbols;  // left to right
  int64_t count = 0;
};

uint64_t key_of(Symbol a, Symbol b) { return static_cast<uint64_t>(a) << 32 | b; }

// The vocabulary (the 256 byte-level tokens, then one per merge) and the
// distinct pieces of the texts as symbols, in a fixed order whatever the hash.
struct Corpus {
  std::vector<std::string> vocab;
  std::vector<Word> words;
};

// Pieces are counted as written: the tokenizer's NFC normalizer changes
// nothing in ASCII text and little elsewhere, so merges are learned without it.
// A piece longer than kMaxPieceBytes is learned from in parts of that length:
// a token that long is never worth a merge, and a 200 MB "word" would
// otherwise hold 200 MB of symbols in every structure below.
Corpus count_words(const std::vector<std::string>& texts, const PreTokenizer& pre) {
  std::unordered_map<std::string, int64_t> counts;
  for (const std::string& text : texts)
    pre.split(text, [&](std::string_view piece) {
      for (size_t at = 0; at < piece.size(); at += kMaxPieceBytes) ++counts[std::string(piece.substr(at, kMaxPieceBytes))];
    });
  const ByteLevel& bl = ByteLevel::instance();
  Corpus c;
  for (int byte = 0; byte < 256; ++byte) c.vocab.push_back(bl.utf8_of(static_cast<uint8_t>(byte)));
  std::map<std::string, int64_t> sorted(counts.begin(), counts.end());
  counts.clear();
  c.words.reserve(sorted.size());
  for (const auto& [piece, count] : sorted) {
    Word word;
    word.count = count;
    word.symbols.reserve(piece.size());
    for (char byte : piece) word.symbols.push_back(static_cast<uint8_t>(byte));
    c.words.push_back(std::move(word));
  }
  return c;
}

std::vector<uint64_t> pair_keys(const Word& w) {
  std::vector<uint64_t> keys;
  for (size_t i = 0; i + 1 < w.symbols.size(); ++i) keys.push_back(key_of(w.symbols[i], w.symbols[i + 1]));
  return keys;
}

// How one word's merge changed its pair counts, once per occurrence.
struct PairChange {
  uint64_t key;
  int delta;  // -1 or +1
};

// Left to right, non-overlapping: "aaa" with (a, a) becomes "Aa". Appends to
// `changes` only the pairs around each merged occurrence (as Hugging Face's
// Word::merge reports them), so a long word costs one scan, not a recount of
// every pair it holds.
void merge_in_word(Word& w, Symbol a, Symbol b, Symbol joined, std::vector<PairChange>& changes) {
  std::vector<Symbol>& s = w.symbols;
  size_t out = 0;
  for (size_t i = 0; i < s.size(); ++out) {
    if (i + 1 < s.size() && s[i] == a && s[i + 1] == b) {
      changes.push_back({key_of(a, b), -1});
      if (out > 0) {  // the left neighbour as merged so far: "aaaa" gives (A, a) then (A, A)
        changes.push_back({key_of(s[out - 1], a), -1});
        changes.push_back({key_of(s[out - 1], joined), +1});
      }
      if (i + 2 < s.size()) {
        changes.push_back({key_of(b, s[i + 2]), -1});
        changes.push_back({key_of(joined, s[i + 2]), +1});
      }
      s[out] = joined;
      i += 2;
    } else {
      s[out] = s[i];
      ++i;
    }
  }
  s.resize(out);
}

// A word's pairs are noted together, so a word already listed for a pair is
// its last entry: a long word holding a pair thousands of times is listed
// once per pass. (Repeats across passes, and words that no longer hold the
// pair, are dropped when it is merged.)
void note_holder(std::vector<uint32_t>& holders, uint32_t w) {
  if (holders.empty() || holders.back() != w) holders.push_back(w);
}

// Hugging Face's BpeTrainer breaks ties between equally frequent pairs by
// its token ids: the byte-level characters sorted by code point, then each
// merge's token in the order it was made. A merge's symbol is its place in
// that order already; a byte's symbol is the byte, whose character sorts
// elsewhere (byte 0 is U+0100, after every printable byte), so bytes are
// ranked here. Ties decided by the tokens' text instead gave other merges
// from the first tie between merged tokens on (the demos' corpora included).
std::vector<Symbol> tie_rank() {
  const ByteLevel& bl = ByteLevel::instance();
  std::vector<Symbol> bytes(256);
  for (Symbol b = 0; b < 256; ++b) bytes[b] = b;
  // UTF-8 text sorts as its code points do.
  std::sort(bytes.begin(), bytes.end(), [&bl](Symbol x, Symbol y) {
    return bl.utf8_of(static_cast<uint8_t>(x)) < bl.utf8_of(static_cast<uint8_t>(y));
  });
  std::vector<Symbol> rank(256);
  for (Symbol r = 0; r < 256; ++r) rank[bytes[r]] = r;
  return rank;
}

}  // namespace

// Pair counts are kept up to date as merges change the words that hold
// them (as Hugging Face's BpeTrainer keeps them), so a merge costs the words
// it touches, not the whole corpus; a heap finds the most frequent pair, its
// stale entries (counts that changed since they were pushed) re-pushed when popped.
std::vector<Merge> train_bpe_merges(const std::vector<std::string>& texts, const PreTokenizer& pre,
                                    size_t max_merges) {
  Corpus c = count_words(texts, pre);
  std::unordered_map<uint64_t, int64_t> pairs;
  std::unordered_map<uint64_t, std::vector<uint32_t>> where;  // the words that held a pair (some may no longer)
  for (uint32_t w = 0; w < c.words.size(); ++w)
    for (uint64_t key : pair_keys(c.words[w])) {
      pairs[key] += c.words[w].count;
      note_holder(where[key], w);
    }

  struct Entry {
    int64_t count;
    Symbol a, b;
  };
  // Most frequent first; among equal counts the pair whose tokens come first
  // in Hugging Face's BpeTrainer's vocabulary (tie_rank), so the merges are
  // the ones it learns and do not depend on hashing.
  const std::vector<Symbol> rank = tie_rank();
  const auto rank_of = [&rank](Symbol s) { return s < rank.size() ? rank[s] : s; };
  const auto later = [&rank_of](const Entry& x, const Entry& y) {
    if (x.count != y.count) return x.count < y.count;
    return std::pair(rank_of(x.a), rank_of(x.b)) > std::pair(rank_of(y.a), rank_of(y.b));
  };
  std::priority_queue<Entry, std::vector<Entry>, decltype(later)> heap(later);
  for (const auto& [key, count] : pairs)
    if (count > 1) heap.push({count, static_cast<Symbol>(key >> 32), static_cast<Symbol>(key)});

  std::vector<Merge> merges;
  auto last_report = std::chrono::steady_clock::now();
  while (merges.size() < max_merges && !heap.empty()) {
    const Entry top = heap.top();
    heap.pop();
    const uint64_t key = key_of(top.a, top.b);
    const int64_t now = pairs[key];
    if (now != top.count) {  // changed since pushed: its current count decides
      if (now > 1) heap.push({now, top.a, top.b});
      continue;
    }
    const auto joined = static_cast<Symbol>(c.vocab.size());
    c.vocab.push_back(c.vocab[top.a] + c.vocab[top.b]);
    merges.emplace_back(c.vocab[top.a], c.vocab[top.b]);

    std::vector<uint32_t> holders = std::move(where[key]);
    where.erase(key);
    std::sort(holders.begin(), holders.end());
    holders.erase(std::unique(holders.begin(), holders.end()), holders.end());
    // The count each pair the merge may raise had before it first did: those
    // that rose get a heap entry (those that fell are found stale when popped).
    std::unordered_map<uint64_t, int64_t> before;
    std::vector<PairChange> changes;
    for (uint32_t w : holders) {
      Word& word = c.words[w];
      changes.clear();
      merge_in_word(word, top.a, top.b, joined, changes);
      for (const PairChange& change : changes) {
        int64_t& count = pairs[change.key];
        if (change.delta > 0) {
          before.emplace(change.key, count);
          note_holder(where[change.key], w);
        }
        count += change.delta * word.count;
      }
    }
    for (const auto& [k, was] : before)
      if (const int64_t count = pairs[k]; count > was && count > 1)
        heap.push({count, static_cast<Symbol>(k >> 32), static_cast<Symbol>(k)});
    if (std::chrono::steady_clock::now() - last_report > std::chrono::seconds(5)) {
      spdlog::info("tokenizer: {} of {} merges learned", merges.size(), max_merges);
      last_report = std::chrono::steady_clock::now();
    }
  }
  return merges;
}

}  // namespace grpo::tok
