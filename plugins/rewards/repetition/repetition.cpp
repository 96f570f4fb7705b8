// repetition (arXiv 2502.03373): (1 - unique n-grams / n-grams) * max_penalty.
// unit=word follows ms-swift (lower-cased whitespace words); unit=token uses
// the generated token ids, which also works for text without spaces (CJK).
#include <cctype>
#include <string>
#include <unordered_set>
#include <vector>

#include <grpo/sdk.hpp>

namespace {

std::vector<std::string> lower_words(std::string_view text) {
  std::vector<std::string> words;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    size_t start = i;
    while (i < text.size() && !std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    if (i > start) {
      std::string w(text.substr(start, i - start));
      for (char& c : w) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      words.push_back(std::move(w));
    }
  }
  return words;
}

// Fraction of repeated n-grams among `total` n-grams built by `key(i)`.
template <class KeyFn>
double repeated_fraction(size_t count, size_t n, KeyFn key) {
  const size_t total = count - n + 1;
  std::unordered_set<std::string> unique;
  unique.reserve(total);
  for (size_t i = 0; i < total; ++i) unique.insert(key(i));
  return 1.0 - static_cast<double>(unique.size()) / static_cast<double>(total);
}

}  // namespace

struct Repetition : grpo::RewardBase {
  static constexpr const char* name = "repetition";
  static constexpr const char* version = "1.0.0";
  static constexpr const char* description = "penalty in [max_penalty, 0] for repeated n-grams";
  static constexpr bool thread_safe = true;

  static std::vector<grpo::OptionSpec> options() {
    return {{"repetition_n_grams", "int", "3", "n-gram size"},
            {"repetition_max_penalty", "float", "-1.0", "reward when every n-gram repeats (<= 0)"},
            {"unit", "string", "\"word\"", "word: whitespace words as ms-swift; token: generated token ids"}};
  }

  Repetition(const grpo::Options& o, const grpo::Host&)
      : n(o.get_int("repetition_n_grams", 3)),
        max_penalty(o.get_double("repetition_max_penalty", -1.0)),
        by_token(o.get_string("unit", "word") == "token") {
    if (n < 1) throw grpo::Error("repetition_n_grams must be >= 1, got " + std::to_string(n));
    if (max_penalty > 0) throw grpo::Error("repetition_max_penalty must be <= 0 (it is a penalty)");
    std::string unit = o.get_string("unit", "word");
    if (unit != "word" && unit != "token") throw grpo::Error("unit must be 'word' or 'token', got '" + unit + "'");
  }

  double score_one(const grpo::RewardSample& s) const {
    const size_t k = static_cast<size_t>(n);
    if (by_token) {
      const int32_t* ids = s.completion_ids();
      if (!ids && s.completion_tokens() != 0)
        throw grpo::Error("repetition with unit=token needs the generated token ids; use unit=word for text");
      size_t count = s.n_completion_ids();
      if (count < k) return 0.0;
      return max_penalty * repeated_fraction(count, k, [&](size_t i) {
               return std::string(reinterpret_cast<const char*>(ids + i), k * sizeof(int32_t));
             });
    }
    if (s.completion().empty()) return 0.0;
    std::vector<std::string> words = lower_words(s.completion());
    if (words.size() < k) return 0.0;
    return max_penalty * repeated_fraction(words.size(), k, [&](size_t i) {
             std::string key;
             for (size_t j = 0; j < k; ++j) (key += words[i + j]) += '\x1f';
             return key;
           });
  }

  void score(const grpo::RewardBatch& batch, double* rewards) const {
    for (size_t i = 0; i < batch.size(); ++i) rewards[i] = score_one(batch[i]);
  }

  long long n;
  double max_penalty;
  bool by_token;
};

GRPO_EXPORT_REWARD(Repetition)
