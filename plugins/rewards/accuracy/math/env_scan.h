// Matching of LaTeX math environments ($..$, $$..$$, \(..\), \[..\], " [..] ",
// bare \frac{a}{b}) the way Math-Verify's extraction regexes find them.
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

namespace grpo::math {

enum class EnvContext {
  Plain,  // any content; a bare \frac{1}{2} also counts
  Boxed,  // the content must hold a \boxed{...}
};

struct Env {
  size_t start = 0;   // first character of the match
  size_t end = 0;     // one past the match (trailing spaces and percent sign included)
  size_t cs = 0;      // content start
  size_t ce = 0;      // content end
  bool percent = false;
};

// One environment starting exactly at `pos`.
bool env_at(std::string_view t, size_t pos, EnvContext ctx, Env* out);

// An environment followed by up to five more joined by ",", "and" or "or".
// `end` receives the end of the whole chain.
bool env_chain_at(std::string_view t, size_t pos, EnvContext ctx, std::vector<Env>* envs, size_t* end);

// Same, after skipping the spaces at `pos` (as a regex "\s*" before it would).
bool env_chain_after_spaces(std::string_view t, size_t pos, EnvContext ctx, std::vector<Env>* envs,
                            size_t* end);

}  // namespace grpo::math
