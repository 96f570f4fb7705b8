// Our BPE trainer against Hugging Face tokenizers' BpeTrainer, run at test
// time (tests/oracles/tokenizers_bpe.py) on the corpora the demos train on:
// the same texts, the same pre-tokenizer (the tokenizer.json init-model
// writes), the same number of merges. The merges must be the same, in the
// same order, so a tokenizer from init-model --train_tokenizer is the one
// tokenizers would have trained.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "data/dataset.h"
#include "oracles/python_oracle.h"
#include "tokenizer/bpe_trainer.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/byte_tokenizer.h"

namespace fs = std::filesystem;
using nlohmann::json;
using grpo::tok::Merge;

namespace {

// Every string of a row, as init-model collects the texts it learns from.
void collect_strings(const json& value, std::vector<std::string>& out) {
  if (value.is_string()) out.push_back(value.get<std::string>());
  else if (value.is_structured())
    for (const json& item : value) collect_strings(item, out);
}

// Per process: ctest -j runs each test as a process of its own, at once.
const fs::path kDir = fs::temp_directory_path() / ("grpo_bpe_trainer_hf_" + std::to_string(getpid()));

// `path` (a JSONL dataset) trained both ways with `merges` merges; compares
// the merge lists in order and the vocabularies as sets.
void expect_same_as_tokenizers(const std::string& path, size_t merges) {
  const fs::path dir = kDir;
  const std::string dataset = fs::path(path).filename().string();
  fs::create_directories(dir);
  grpo::tok::write_byte_level_tokenizer((dir / "init").string());  // its normalizer and pre-tokenizer
  const fs::path out = dir / "hf.json";
  fs::remove(out);
  const std::string error = grpo::test::run_python(
      grpo::test::oracle_script("tokenizers_bpe.py") + " '" + (dir / "init" / "tokenizer.json").string() + "' '" +
          path + "' " + std::to_string(merges) + " '" + out.string() + "'",
      dir / "hf.log");
  ASSERT_TRUE(error.empty()) << error;
  const json hf = json::parse(std::ifstream(out));

  std::vector<std::string> texts;
  for (const grpo::data::Row& row : grpo::data::load_rows(path)) collect_strings(row.columns, texts);
  const std::vector<Merge> ours = grpo::tok::train_bpe_merges(texts, grpo::tok::byte_level_pre_tokenizer(), merges);

  std::vector<Merge> theirs;
  for (const json& m : hf["merges"]) theirs.emplace_back(m[0], m[1]);
  ASSERT_GT(theirs.size(), 20u) << dataset << ": too few merges for the comparison to mean much";
  for (size_t i = 0; i < std::min(ours.size(), theirs.size()); ++i)
    ASSERT_EQ(ours[i], theirs[i]) << dataset << ": merge " << i << " differs (ours " << ours[i].first << " + "
                                  << ours[i].second << ", tokenizers " << theirs[i].first << " + " << theirs[i].second
                                  << ")";
  EXPECT_EQ(ours.size(), theirs.size()) << dataset;

  std::set<std::string> vocab;
  for (int b = 0; b < 256; ++b) vocab.insert(grpo::tok::ByteLevel::instance().utf8_of(static_cast<uint8_t>(b)));
  for (const Merge& m : ours) vocab.insert(m.first + m.second);
  EXPECT_EQ(vocab, hf["vocab"].get<std::set<std::string>>()) << dataset;
  fs::remove_all(dir);  // kept where an assertion above returned early, to be looked at
}

// The tool demo's tokenizer, exactly as scripts/quickstart_tools.sh asks for
// it: init-model --train_tokenizer configs/tools/sft.jsonl --vocab_size 512
// (512 less the bytes and the three chat tokens: 253 merges; the corpus
// runs out of pairs seen twice before that).
TEST(BpeTrainerHf, ToolDemoCorpusLearnsTheMergesTokenizersLearns) {
  expect_same_as_tokenizers(GRPO_SOURCE_DIR "/configs/tools/sft.jsonl", 512 - grpo::tok::kByteTokenizerVocabSize);
}

// The quickstart's sft corpus (the quickstart itself keeps the byte
// tokenizer, but its text is what a user's first --train_tokenizer meets).
TEST(BpeTrainerHf, QuickstartCorpusLearnsTheMergesTokenizersLearns) {
  expect_same_as_tokenizers(GRPO_SOURCE_DIR "/configs/quickstart/sft.jsonl", 512 - grpo::tok::kByteTokenizerVocabSize);
}

// Fewer merges than the corpora allow: the cut falls where tokenizers cuts.
TEST(BpeTrainerHf, ACutShortVocabularyStopsWhereTokenizersStops) {
  expect_same_as_tokenizers(GRPO_SOURCE_DIR "/configs/tools/sft.jsonl", 30);
}

// Prose with many more merges than the demos allow (thousands, most of them
// between tokens that are merges themselves, where ties are decided by the
// order tokens were made): the repository's own documentation, a paragraph
// per row, written as a dataset.
TEST(BpeTrainerHf, DocumentationProseLearnsTheMergesTokenizersLearns) {
  fs::create_directories(kDir);
  const fs::path rows = kDir / "docs.jsonl";
  std::ofstream out(rows);
  std::vector<fs::path> files = {fs::path(GRPO_SOURCE_DIR) / "README.md"};
  for (const auto& entry : fs::directory_iterator(fs::path(GRPO_SOURCE_DIR) / "docs"))
    if (entry.path().extension() == ".md") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  size_t bytes = 0;
  for (const fs::path& file : files) {
    std::ifstream in(file);
    std::string paragraph;
    for (std::string line; std::getline(in, line);) {
      paragraph += line + "\n";
      if (!line.empty()) continue;
      out << json({{"text", paragraph}}).dump() << "\n";
      bytes += paragraph.size();
      paragraph.clear();
    }
    if (!paragraph.empty()) out << json({{"text", paragraph}}).dump() << "\n";
  }
  out.close();
  ASSERT_GT(bytes, 100000u) << "the documentation is the corpus";
  expect_same_as_tokenizers(rows.string(), 3000);
}

}  // namespace
