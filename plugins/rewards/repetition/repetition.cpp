// repetition (arXiv 2502.03373): (1 - unique n-grams / n-grams) * max_penalty.
// unit=word follows ms-swift (lower-cased whitespace words); unit=token uses
// the generated token ids, which also works for text without spaces (CJK).
#include <cctype>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <grpo/sdk.hpp>

namespace {

// ASCII whitespace as Python's str.split() sees it (it also splits on
// non-ASCII spaces such as U+00A0; those stay inside words here).
bool is_space(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f); }

// Whitespace words of the lower-cased text, each interned as a small integer
// so that n-grams compare as integer tuples, not strings.
std::vector<int32_t> word_ids(std::string_view text) {
  std::string lower(text);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::unordered_map<std::string_view, int32_t> ids;
  std::vector<int32_t> words;
  size_t i = 0;
  while (i < lower.size()) {
    while (i < lower.size() && is_space(static_cast<unsigned char>(lower[i]))) ++i;
    size_t start = i;
    while (i < lower.size() && !is_space(static_cast<unsigned char>(lower[i]))) ++i;
    if (i > start) {
      auto [it, fresh] = ids.emplace(std::string_view(lower).substr(start, i - start), static_cast<int32_t>(ids.size()));
      words.push_back(it->second);
    }
  }
  return words;
}

// 1 - unique n-grams / n-grams, over a sequence of integer units.
double repeated_fraction(const int32_t* units, size_t count, size_t n) {
  const size_t total = count - n + 1;
  std::unordered_set<std::string_view> unique;
  unique.reserve(total);
  const char* bytes = reinterpret_cast<const char*>(units);
  for (size_t i = 0; i < total; ++i) unique.insert(std::string_view(bytes + i * sizeof(int32_t), n * sizeof(int32_t)));
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
      if (s.n_completion_ids() < k) return 0.0;
      return max_penalty * repeated_fraction(ids, s.n_completion_ids(), k);
    }
    if (s.completion().empty()) return 0.0;
    std::vector<int32_t> words = word_ids(s.completion());
    if (words.size() < k) return 0.0;
    return max_penalty * repeated_fraction(words.data(), words.size(), k);
  }

  void score(const grpo::RewardBatch& batch, double* rewards) const {
    for (size_t i = 0; i < batch.size(); ++i) rewards[i] = score_one(batch[i]);
  }

  long long n;
  double max_penalty;
  bool by_token;
};

GRPO_EXPORT_REWARD(Repetition)
