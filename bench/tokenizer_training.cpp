// BPE training (init-model --train_tokenizer) against Hugging Face
// tokenizers' BpeTrainer (bench/peer/hf_bpe_train.py) on the same corpora,
// built here: a million distinct words, and one long word of random letters
// (which the peer holds whole and we learn from in 4 KiB parts). The peer's
// time grows with the square of a word's length (each merge shifts the rest
// of the word), so the 200 MB word is run without it.
//
//   bench_tokenizer_training [--long_mb N] [--skip_peer]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "peer_process.h"
#include "tokenizer/bpe_trainer.h"
#include "tokenizer/byte_tokenizer.h"

namespace {

std::string random_letters(std::mt19937& rng, size_t n) {
  std::string s(n, 'a');
  for (char& c : s) c = static_cast<char>('a' + rng() % 26);
  return s;
}

// 1,000 texts of 1,000 words of 5 to 9 random letters: nearly every word distinct.
std::vector<std::string> distinct_words() {
  std::mt19937 rng(2);
  std::vector<std::string> texts(1000);
  for (std::string& text : texts)
    for (int w = 0; w < 1000; ++w) text += (w ? " " : "") + random_letters(rng, 5 + rng() % 5);
  return texts;
}

void run(const char* name, const std::vector<std::string>& texts, size_t vocab_size, bool peer) {
  const auto start = std::chrono::steady_clock::now();
  const size_t merges = grpo::tok::train_bpe_merges(texts, grpo::tok::byte_level_pre_tokenizer(), vocab_size - 256).size();
  const double ours = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%-26s vocab %5zu: grpo %7.2f s (%zu merges)\n", name, vocab_size, ours, merges);
  std::fflush(stdout);
  if (!peer) return;
  const std::filesystem::path corpus = std::filesystem::temp_directory_path() / "grpo_bench_bpe_corpus.txt";
  {
    std::ofstream out(corpus);
    for (const std::string& text : texts) out << text << '\n';
  }
  const auto lines = grpo::bench::peer_lines(std::string(GRPO_TORCH_PYTHON) + " " + GRPO_SOURCE_DIR +
                                             "/bench/peer/hf_bpe_train.py " + corpus.string() + " " +
                                             std::to_string(vocab_size));
  std::filesystem::remove(corpus);
  if (lines.empty()) {
    std::printf("%-26s vocab %5zu: the peer printed nothing\n", name, vocab_size);
    return;
  }
  const double theirs = lines.back().value("seconds", 0.0);
  std::printf("%-26s vocab %5zu: HF tokenizers %7.2f s (%d merges): grpo is %.1fx as fast\n", name, vocab_size,
              theirs, lines.back().value("merges", 0), theirs / ours);
}

}  // namespace

int main(int argc, char** argv) {
  size_t long_mb = 200;
  bool peer = true;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--long_mb") && i + 1 < argc) long_mb = std::strtoull(argv[++i], nullptr, 10);
    else if (!std::strcmp(argv[i], "--skip_peer")) peer = false;
  }
  const std::vector<std::string> words = distinct_words();
  run("1M distinct words (8 MB)", words, 512, peer);
  run("1M distinct words (8 MB)", words, 8000, peer);
  std::mt19937 rng(1);
  run("one word of 256 KB", {random_letters(rng, 256 << 10)}, 512, peer);
  run(("one word of " + std::to_string(long_mb) + " MB").c_str(), {random_letters(rng, long_mb << 20)}, 512, false);
}
