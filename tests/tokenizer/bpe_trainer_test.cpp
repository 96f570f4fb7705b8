// Byte-level BPE merges learned from sample text (init-model --train_tokenizer),
// checked against merges worked out by hand, and the tokenizer written with
// them loaded back and used.
#include <algorithm>
#include <filesystem>
#include <map>
#include <random>

#include <gtest/gtest.h>

#include "tokenizer/bpe_trainer.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/byte_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace {

using namespace grpo::tok;

std::vector<Merge> train(const std::vector<std::string>& texts, size_t max_merges = 100) {
  return train_bpe_merges(texts, byte_level_pre_tokenizer(), max_merges);
}

// Pieces "aaab", " aaab", " ab" (space is Ġ in the byte-level alphabet).
// Pair counts: (a,a) 4, (a,b) 3, (Ġ,a) 2 -> merge a+a; then (a,b) 3 beats
// (aa,a) 2 -> a+b; then (aa,ab) 2 -> aaab; then every pair occurs once: stop.
TEST(BpeTrainer, MergesTheMostFrequentPairUntilNoneRepeats) {
  const std::vector<Merge> expected = {{"a", "a"}, {"a", "b"}, {"aa", "ab"}};
  EXPECT_EQ(train({"aaab aaab ab"}), expected);
  // The same pieces split across texts count the same.
  EXPECT_EQ(train({"aaab", " aaab", " ab"}), expected);
}

// Ties go as Hugging Face's BpeTrainer breaks them: to the pair whose tokens
// it numbers first, the byte-level characters by code point, then merges in
// the order they were made. After z+z (3) and a+a (2, tied with a+x and zz+x
// and first of them), zz+x and aa+x tie at 2: zz was made first, so zz+x
// comes before aa+x, though "aa" sorts before "zz".
TEST(BpeTrainer, TiesGoToTheTokensMadeFirstAndTheCountIsCapped) {
  const std::vector<Merge> both = {{"a", "b"}, {"c", "d"}};
  EXPECT_EQ(train({"cd", "ab", "cd", "ab"}), both);
  EXPECT_EQ(train({"zzx", "zzx", "aax", "aax", "zz"}),
            std::vector<Merge>({{"z", "z"}, {"a", "a"}, {"zz", "x"}, {"aa", "x"}}));
  // A space is Ġ (U+0120), which comes after every letter.
  EXPECT_EQ(train({" a", " a", "ab", "ab"}), std::vector<Merge>({{"a", "b"}, {"Ġ", "a"}}));
  EXPECT_EQ(train({"cd", "ab", "cd", "ab"}, 1), std::vector<Merge>({{"a", "b"}}));
  EXPECT_TRUE(train({"ab cd"}).empty());
  EXPECT_TRUE(train({}).empty());
}

// The definition of BPE training, recounting every pair after each merge:
// the oracle for the trainer, which keeps its counts up to date instead.
// Ties go to the pair of lower ids as Hugging Face's BpeTrainer numbers
// tokens: byte-level characters by code point, then merges as made.
std::vector<Merge> train_by_recounting(const std::vector<std::string>& texts, size_t max_merges) {
  std::map<std::string, size_t> id;
  std::vector<std::string> alphabet;
  for (int b = 0; b < 256; ++b) alphabet.push_back(ByteLevel::instance().utf8_of(static_cast<uint8_t>(b)));
  std::sort(alphabet.begin(), alphabet.end());
  for (const std::string& c : alphabet) id.emplace(c, id.size());
  std::map<std::string, int64_t> pieces;
  for (const std::string& text : texts)
    byte_level_pre_tokenizer().split(text, [&](std::string_view piece) { ++pieces[std::string(piece)]; });
  std::vector<std::pair<std::vector<std::string>, int64_t>> words;
  for (const auto& [piece, count] : pieces) {
    std::vector<std::string> symbols;
    for (char byte : piece) symbols.push_back(ByteLevel::instance().utf8_of(static_cast<uint8_t>(byte)));
    words.emplace_back(symbols, count);
  }
  std::vector<Merge> merges;
  while (merges.size() < max_merges) {
    std::map<Merge, int64_t> pairs;
    for (const auto& [symbols, count] : words)
      for (size_t i = 0; i + 1 < symbols.size(); ++i) pairs[{symbols[i], symbols[i + 1]}] += count;
    const Merge* best = nullptr;
    int64_t best_count = 1;
    const auto ids = [&id](const Merge& m) { return std::pair(id.at(m.first), id.at(m.second)); };
    for (const auto& [pair, count] : pairs)
      if (count > best_count || (best && count == best_count && ids(pair) < ids(*best)))
        best = &pair, best_count = count;
    if (!best) break;
    merges.push_back(*best);
    id.emplace(best->first + best->second, id.size());
    for (auto& [symbols, count] : words) {
      std::vector<std::string> out;
      for (size_t i = 0; i < symbols.size(); ++i) {
        if (i + 1 < symbols.size() && symbols[i] == merges.back().first && symbols[i + 1] == merges.back().second) {
          out.push_back(symbols[i] + symbols[i + 1]);
          ++i;
        } else {
          out.push_back(symbols[i]);
        }
      }
      symbols = std::move(out);
    }
  }
  return merges;
}

// Words of a few letters drawn with skewed odds (frequent and rare pairs,
// ties, runs such as "aaaa" whose merges overlap), over many texts.
TEST(BpeTrainer, IncrementalCountsEqualRecountingEveryPair) {
  std::mt19937 rng(5);
  std::vector<std::string> texts;
  for (int t = 0; t < 400; ++t) {
    std::string text;
    for (int w = 0; w < 12; ++w) {
      const int length = 1 + static_cast<int>(rng() % 7);
      text += rng() % 3 ? " " : "";
      for (int k = 0; k < length; ++k) text += "aaabbcdeé"[std::min<unsigned>(rng() % 12, 8)];
    }
    texts.push_back(text);
  }
  const std::vector<Merge> want = train_by_recounting(texts, 400);
  ASSERT_GT(want.size(), 100u) << "the corpus must allow many merges for the comparison to mean much";
  EXPECT_EQ(train(texts, 400), want);
  EXPECT_EQ(train(texts, 37), std::vector<Merge>(want.begin(), want.begin() + 37));
}

// Long pieces (one letter run each) merge many times within a word, where a
// merge's left neighbour is itself a merge made in the same pass.
TEST(BpeTrainer, IncrementalCountsEqualRecountingInLongWords) {
  std::mt19937 rng(11);
  std::vector<std::string> texts;
  for (int t = 0; t < 24; ++t) {
    std::string word;
    const int length = 200 + static_cast<int>(rng() % 300);
    for (int k = 0; k < length; ++k) word += "aaaabbcdefg"[rng() % 11];
    texts.push_back(word);
  }
  const std::vector<Merge> want = train_by_recounting(texts, 150);
  ASSERT_EQ(want.size(), 150u);
  EXPECT_EQ(train(texts, 150), want);
}

// Pieces never merge across the pre-tokenizer's cuts: Qwen's split keeps
// each digit alone, so numbers stay one token per digit.
TEST(BpeTrainer, DigitsAndPiecesAreNeverJoined) {
  for (const Merge& m : train({"12 12 12 1212", "x: 12, x: 12"})) {
    EXPECT_FALSE(m.first.find_first_of("0123456789") != std::string::npos &&
                 m.second.find_first_of("0123456789") != std::string::npos)
        << m.first << " + " << m.second;
    EXPECT_NE(m.first + m.second, ":Ġ");  // ":" and " x" are separate pieces
  }
}

TEST(BpeTrainer, TheWrittenTokenizerEncodesWithItsMerges) {
  const std::string call = "<tool_call>\n{\"name\": \"calculator\", \"arguments\": {\"expression\": \"307 * 43\"}}\n</tool_call>";
  std::vector<std::string> texts;
  for (int i = 0; i < 20; ++i) texts.push_back(call);
  const std::vector<Merge> merges = train(texts, 1000);
  ASSERT_FALSE(merges.empty());
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "grpo_bpe_trainer_tokenizer";
  std::filesystem::remove_all(dir);
  write_byte_level_tokenizer(dir.string(), merges);
  const Tokenizer tok = Tokenizer::from_dir(dir.string());

  EXPECT_GT(tok.vocab_size(), static_cast<size_t>(kByteTokenizerVocabSize));
  EXPECT_LE(tok.vocab_size(), kByteTokenizerVocabSize + merges.size());
  EXPECT_EQ(tok.token_to_id("<|im_start|>"), 257);  // the chat tokens keep their ids
  EXPECT_EQ(tok.token_to_id("<|im_end|>"), 258);
  for (const char* word : {"calculator", "expression", "arguments"}) EXPECT_GE(tok.token_to_id(word), 259) << word;

  // Every piece of the sample became one token: as many ids as pieces.
  size_t pieces = 0;
  byte_level_pre_tokenizer().split(call, [&](std::string_view) { ++pieces; });
  EXPECT_EQ(tok.encode(call).size(), pieces);
  EXPECT_LT(pieces, call.size() / 3);
  const std::string text = "<|im_start|>assistant\n" + call + "<|im_end|>";
  EXPECT_EQ(tok.decode(tok.encode(text)), text);
  const std::vector<int32_t> digits = {tok.token_to_id("3"), tok.token_to_id("0"), tok.token_to_id("7")};
  EXPECT_EQ(tok.encode("307"), digits);
  // Text the merges never saw still encodes, byte by byte where nothing applies.
  const std::string unseen = "Grüße, 12.5% ∑";
  EXPECT_EQ(tok.decode(tok.encode(unseen)), unseen);
}

}  // namespace
