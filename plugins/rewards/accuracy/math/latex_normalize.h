// LaTeX normalisation applied to an extracted answer before parsing
// (the latex2sympy2_extended NormalizationConfig steps Math-Verify uses).
#pragma once

#include <string>
#include <string_view>

namespace grpo::math {

enum class BoxedMode {
  None,  // keep \boxed{...} in place (the parser treats it as a group)
  All,   // keep only the contents of every \boxed{}, joined by ","
  Last,  // the last \boxed{} plus earlier ones that look like a list
};

struct NormalizeConfig {
  bool basic_latex = true;
  bool units = true;
  bool malformed_operators = false;
  bool nits = false;
  BoxedMode boxed = BoxedMode::None;
};

// Contents of the \boxed{} / \fbox{} groups in `text`; `text` itself when there is none.
std::string extract_boxed_content(std::string_view text, BoxedMode mode);

std::string normalize_latex(std::string_view text, const NormalizeConfig& cfg);

namespace detail {
// Trailing units such as "12 cm" or "5\text{ apples}" (latex_fixups.cpp).
std::string strip_units(std::string text);
// \frac12, \sqrt2, ^(..), sqrt(..), a/b repairs (latex_fixups.cpp).
std::string fix_malformed_operators(std::string text);
}  // namespace detail

}  // namespace grpo::math
