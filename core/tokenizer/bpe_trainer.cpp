#include "tokenizer/bpe_trainer.h"

#include <cstdint>
#include <map>
#include <unordered_map>

#include "tokenizer/byte_level.h"

namespace grpo::tok {

namespace {

struct Word {
  std::vector<std::string> symbols;  // byte-level tokens, left to right
  int64_t count = 0;
};

// Pieces are counted as written: the tokenizer's NFC normalizer changes
// nothing in ASCII text and little elsewhere, so merges are learned without it.
std::vector<Word> count_words(const std::vector<std::string>& texts, const PreTokenizer& pre) {
  std::unordered_map<std::string, int64_t> counts;
  for (const std::string& text : texts) pre.split(text, [&](std::string_view piece) { ++counts[std::string(piece)]; });
  const ByteLevel& bl = ByteLevel::instance();
  std::map<std::string, int64_t> sorted(counts.begin(), counts.end());  // a fixed order, whatever the hash
  std::vector<Word> words;
  words.reserve(sorted.size());
  for (const auto& [piece, count] : sorted) {
    Word word;
    word.count = count;
    for (char byte : piece) word.symbols.push_back(bl.utf8_of(static_cast<uint8_t>(byte)));
    words.push_back(std::move(word));
  }
  return words;
}

void merge_in_words(const Merge& merge, std::vector<Word>* words) {
  const std::string joined = merge.first + merge.second;
  for (Word& word : *words) {
    std::vector<std::string>& s = word.symbols;
    size_t out = 0;
    for (size_t i = 0; i < s.size(); ++out) {
      if (i + 1 < s.size() && s[i] == merge.first && s[i + 1] == merge.second) {
        s[out] = joined;
        i += 2;
      } else {
        if (out != i) s[out] = std::move(s[i]);
        ++i;
      }
    }
    s.resize(out);
  }
}

}  // namespace

std::vector<Merge> train_bpe_merges(const std::vector<std::string>& texts, const PreTokenizer& pre,
                                    size_t max_merges) {
  std::vector<Word> words = count_words(texts, pre);
  std::vector<Merge> merges;
  // Pair counts are recounted after each merge: simple, and fast enough for
  // the task-sized samples this is meant for (thousands of distinct pieces).
  while (merges.size() < max_merges) {
    std::map<Merge, int64_t> pairs;
    for (const Word& word : words)
      for (size_t i = 0; i + 1 < word.symbols.size(); ++i) pairs[{word.symbols[i], word.symbols[i + 1]}] += word.count;
    const Merge* best = nullptr;
    int64_t best_count = 1;
    for (const auto& [pair, count] : pairs)
      if (count > best_count) best = &pair, best_count = count;
    if (!best) break;
    merges.push_back(*best);
    merge_in_words(merges.back(), &words);
  }
  return merges;
}

}  // namespace grpo::tok
