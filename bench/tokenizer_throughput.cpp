// Tokenizer encode throughput (MB/s) on one thread over a few MB of mixed
// English prose, source code, LaTeX and chat markup built here, plus decode
// throughput and the BPE word-cache hit rate.
//
//   bench_tokenizer [path/to/tokenizer.json | model_dir] [--mb N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace {

const char* const kProse[] = {
    "The committee met on Tuesday to review the quarterly figures, which showed a modest rise in revenue. ",
    "However, several members argued that the increase was driven largely by one-off sales in the spring. ",
    "She walked along the river, watching the light fade behind the old stone bridge as the city grew quiet. ",
    "In 1997, researchers published a study suggesting that sleep plays a key role in memory consolidation. ",
    "Don't forget: we'll need at least three volunteers, and they've got to arrive before 8 o'clock. ",
    "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. ",
};
const char* const kCode[] = {
    "def compute_loss(logits, labels, mask):\n    logp = torch.log_softmax(logits, dim=-1)\n"
    "    return -(logp.gather(-1, labels[..., None]).squeeze(-1) * mask).sum() / mask.sum()\n\n",
    "for (size_t i = 0; i < tokens.size(); ++i) {\n    if (tokens[i] == eos_id) break;\n"
    "    sum += weights[i] * static_cast<float>(scores[i]);\n}\n",
    "#include <vector>\n#include <string>\n\nint main(int argc, char** argv) {\n"
    "    std::vector<std::string> args(argv + 1, argv + argc);\n    return args.empty() ? 1 : 0;\n}\n",
    "const result = await fetch(`${baseUrl}/api/v1/items?page=${page}`);\nif (!result.ok) throw new "
    "Error(result.statusText);\n",
};
const char* const kLatex[] = {
    "By the Pythagorean theorem, $a^2 + b^2 = c^2$, so $c = \\sqrt{9 + 16} = 5$. ",
    "\\begin{align} \\int_0^1 x^2\\,dx &= \\frac{1}{3} \\\\ \\sum_{k=1}^{n} k &= \\frac{n(n+1)}{2} \\end{align}\n",
    "Since $\\sin^2\\theta + \\cos^2\\theta = 1$, we get $\\cos\\theta = \\pm\\frac{\\sqrt{3}}{2}$. ",
    "Therefore, the final answer is $\\boxed{\\frac{4}{15}}$.\n\n",
};
const char* const kOther[] = {
    "Привет, мир! Это пример текста на русском языке. ",
    "我爱自然语言处理。今天的天气很好，我们去公园散步吧。",
    "café naïve résumé — “quoted” text… 😀👍🏽 ",
};
const char* const kChat[] = {
    "<|im_start|>system\nSolve the problem and put the final answer in \\boxed{}.<|im_end|>\n<|im_start|>user\n",
    "<|im_end|>\n<|im_start|>assistant\n<think>\nLet me work through this carefully.\n</think>\n\n",
};

template <size_t N>
const char* pick(std::mt19937& rng, const char* const (&list)[N]) {
  return list[rng() % N];
}

std::string build_corpus(size_t bytes) {
  std::mt19937 rng(7);
  std::string out;
  out.reserve(bytes + 1024);
  while (out.size() < bytes) {
    const unsigned kind = rng() % 20;
    if (kind < 8) {
      out += pick(rng, kProse);
    } else if (kind < 14) {
      out += pick(rng, kCode);
    } else if (kind < 18) {
      out += pick(rng, kLatex);
    } else if (kind < 19) {
      out += pick(rng, kOther);
    } else {
      out += pick(rng, kChat);
      // Fresh numbers and identifiers keep some pieces out of the cache.
      out += "Item " + std::to_string(rng() % 100000) + " costs $" + std::to_string(rng() % 1000) + "." +
             std::to_string(rng() % 100) + " and var_" + std::to_string(rng()) + " is set.\n";
    }
  }
  return out;
}

// Words of random letters: nearly every piece misses the word cache, so this
// measures BPE itself.
std::string build_unique_words(size_t bytes) {
  std::mt19937 rng(11);
  std::string out;
  out.reserve(bytes + 64);
  while (out.size() < bytes) {
    const size_t length = 2 + rng() % 10;
    for (size_t i = 0; i < length; ++i) out.push_back(static_cast<char>('a' + rng() % 26));
    out += rng() % 8 == 0 ? ".\n" : " ";
  }
  return out;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  std::string path = GRPO_TEST_DATA_DIR "/qwen3-tokenizer.json";
  double megabytes = 4;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--mb") == 0 && i + 1 < argc) {
      megabytes = std::atof(argv[++i]);
    } else {
      path = argv[i];
    }
  }
  const auto load_start = std::chrono::steady_clock::now();
  const bool is_file = path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0;
  std::optional<grpo::tok::Tokenizer> loaded;
  try {
    loaded = is_file ? grpo::tok::Tokenizer::from_file(path) : grpo::tok::Tokenizer::from_dir(path);
  } catch (const grpo::tok::TokenizerError& e) {
    std::fprintf(stderr, "%s\nusage: bench_tokenizer [tokenizer.json | model_dir] [--mb N]\n", e.what());
    return 2;
  }
  const grpo::tok::Tokenizer& tok = *loaded;
  std::printf("load: %.2f s (%s)\n", seconds_since(load_start), path.c_str());

  const std::string corpus = build_corpus(static_cast<size_t>(megabytes * 1e6));
  // Encode in document-sized chunks, the way a trainer calls it.
  const auto split_docs = [](const std::string& text) {
    std::vector<std::string> docs;
    for (size_t pos = 0; pos < text.size();) {
      size_t end = std::min(pos + 2000, text.size());
      while (end < text.size() && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) ++end;  // whole characters
      docs.push_back(text.substr(pos, end - pos));
      pos = end;
    }
    return docs;
  };
  const std::vector<std::string> docs = split_docs(corpus);

  const auto encode_start = std::chrono::steady_clock::now();
  size_t tokens = 0;
  std::vector<std::vector<int32_t>> encoded;
  encoded.reserve(docs.size());
  for (const auto& doc : docs) {
    encoded.push_back(tok.encode(doc));
    tokens += encoded.back().size();
  }
  const double encode_s = seconds_since(encode_start);

  const auto decode_start = std::chrono::steady_clock::now();
  size_t decoded_bytes = 0;
  for (const auto& ids : encoded) decoded_bytes += tok.decode(ids).size();
  const double decode_s = seconds_since(decode_start);
  const grpo::tok::CacheStats mixed_stats = tok.cache_stats();

  const std::string unique = build_unique_words(static_cast<size_t>(megabytes * 1e6 / 4));
  const std::vector<std::string> unique_docs = split_docs(unique);
  const auto unique_start = std::chrono::steady_clock::now();
  size_t unique_tokens = 0;
  for (const auto& doc : unique_docs) unique_tokens += tok.encode(doc).size();
  const double unique_s = seconds_since(unique_start);

  const grpo::tok::CacheStats& stats = mixed_stats;
  const double mb = static_cast<double>(corpus.size()) / 1e6;
  std::printf("corpus: %.2f MB in %zu documents, %zu tokens (%.2f bytes/token)\n", mb, docs.size(), tokens,
              static_cast<double>(corpus.size()) / static_cast<double>(tokens));
  std::printf("encode (1 thread): %.1f MB/s\n", mb / encode_s);
  std::printf("decode (1 thread): %.1f MB/s\n", static_cast<double>(decoded_bytes) / 1e6 / decode_s);
  std::printf("encode of random-letter words (1 thread, cache mostly missing): %.1f MB/s\n",
              static_cast<double>(unique.size()) / 1e6 / unique_s);
  const uint64_t lookups = stats.hits + stats.misses;
  std::printf("word cache on the mixed corpus: %.1f%% hits of %llu lookups, %zu entries\n",
              lookups ? 100.0 * static_cast<double>(stats.hits) / static_cast<double>(lookups) : 0.0,
              static_cast<unsigned long long>(lookups), stats.entries);
  if (unique_tokens == 0 || decoded_bytes != corpus.size()) {
    std::printf("round trip mismatch: %zu of %zu bytes decoded\n", decoded_bytes, corpus.size());
    return 1;
  }
  return 0;
}
