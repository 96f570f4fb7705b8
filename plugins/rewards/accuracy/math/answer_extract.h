// Finding the answer in a gold solution or a completion, following the
// priority rules of Math-Verify's parse() in "first_match" mode.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace grpo::math {

enum class ExtractTarget {
  Gold,        // LaTeX and plain expressions, anchors optional (\boxed first)
  Completion,  // LaTeX only, \boxed{} or an anchor such as "final answer is" required
};

struct LatexPart {
  std::string latex;          // environment content, or the region from the first \boxed{
  bool boxed_region = false;  // from the bare \boxed{...} pattern
  bool percent = false;       // a percent sign followed the environment
};

struct Extraction {
  enum class Kind { None, Latex, Number, Expr };
  Kind kind = Kind::None;
  std::vector<LatexPart> parts;  // Latex: one per joined environment
  std::string text;              // Number: its digits ("1000", "-0.5"); Expr: the raw expression
  bool percent = false;          // Number followed by "%"
};

// The answer candidate Math-Verify would try; Kind::None when no pattern matches.
Extraction extract_answer(std::string_view text, ExtractTarget target);

}  // namespace grpo::math
