// A compiled PCRE2 pattern for pre-tokenizer splits. Hugging Face compiles
// these patterns with Oniguruma; PCRE2 with UTF+UCP accepts the same syntax
// (\p{L}, \p{N}, (?i:...), lookahead), which std::regex does not.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace grpo::tok {

class Regex {
 public:
  // `literal` treats the pattern as plain text (the "String" split patterns).
  // Throws TokenizerError naming `source` when the pattern does not compile.
  Regex(const std::string& pattern, bool literal, const std::string& source);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Calls on_match(begin, end) for every non-overlapping, non-empty match,
  // left to right. Bytes that are not valid UTF-8 never match. Safe to call
  // from several threads at once, and from within on_match.
  void for_each_match(std::string_view text, const std::function<void(size_t, size_t)>& on_match) const;

 private:
  void* code_ = nullptr;  // pcre2_code_8*, kept opaque so users need no PCRE2 headers
  std::string pattern_;
};

}  // namespace grpo::tok
