// A README's data_files glob against a file name ("pattern\nname"): the
// matcher agrees with the recursive definition it replaced (below, memoized
// so that it finishes), and a slow input (past -timeout) is a finding.
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "fuzz_support.h"
#include "hub/repo_files.h"

namespace {

// As repo_files.cpp reads a class: the pattern just after '[', through ']'.
bool class_match(std::string_view& pattern, char c) {
  const bool negate = !pattern.empty() && (pattern[0] == '!' || pattern[0] == '^');
  if (negate) pattern.remove_prefix(1);
  bool matched = false, first = true;
  while (!pattern.empty() && (first || pattern[0] != ']')) {
    first = false;
    if (pattern.size() >= 3 && pattern[1] == '-' && pattern[2] != ']') {
      matched |= pattern[0] <= c && c <= pattern[2];
      pattern.remove_prefix(3);
    } else {
      matched |= pattern[0] == c;
      pattern.remove_prefix(1);
    }
  }
  if (!pattern.empty()) pattern.remove_prefix(1);
  return matched != negate;
}

// The backtracking matcher glob_match was until it ran in one pass. Both
// arguments are suffixes of the originals, so their lengths key the memo.
struct Reference {
  std::string_view pattern, path;
  std::vector<signed char> memo = std::vector<signed char>((pattern.size() + 1) * (path.size() + 1), -1);

  bool match(std::string_view p, std::string_view s) {
    signed char& known = memo[p.size() * (path.size() + 1) + s.size()];
    if (known < 0) known = uncached(p, s);
    return known;
  }
  bool uncached(std::string_view p, std::string_view s) {
    while (!p.empty()) {
      if (p.substr(0, 2) == "**") {
        const std::string_view rest = p.substr(2);
        if (rest.substr(0, 1) == "/" && match(rest.substr(1), s)) return true;
        for (size_t i = 0; i <= s.size(); ++i)
          if (match(rest, s.substr(i))) return true;
        return false;
      }
      if (p[0] == '*') {
        for (size_t i = 0; i <= s.size(); ++i) {
          if (match(p.substr(1), s.substr(i))) return true;
          if (i < s.size() && s[i] == '/') return false;
        }
        return false;
      }
      if (s.empty()) return false;
      if (p[0] == '?') {
        if (s[0] == '/') return false;
        p.remove_prefix(1);
      } else if (p[0] == '[') {
        p.remove_prefix(1);
        if (!class_match(p, s[0])) return false;
      } else {
        if (p[0] != s[0]) return false;
        p.remove_prefix(1);
      }
      s.remove_prefix(1);
    }
    return s.empty();
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = grpo::fuzz::text_of(data, size);
  const size_t split = text.find('\n');
  if (split == std::string_view::npos) return 0;
  const std::string_view pattern = text.substr(0, split), path = text.substr(split + 1);
  // The matcher's time is O(pattern * path) by design: past these sizes a
  // timeout would be that product, not a finding.
  if (pattern.size() > 4096 || path.size() > 4096) return 0;
  const bool got = grpo::hub::glob_match(pattern, path);
  // The reference costs O(pattern * path^2).
  if (pattern.size() > 64 || path.size() > 256) return 0;
  Reference reference{pattern, path};
  if (got != reference.match(pattern, path)) {
    std::fprintf(stderr, "glob_match(\"%.*s\", \"%.*s\") = %d, the reference says %d\n", int(pattern.size()),
                 pattern.data(), int(path.size()), path.data(), got, !got);
    std::abort();
  }
  return 0;
}
