// Lock-free comparison of plain numeric answers with 128-bit rationals, so
// the common "42 vs \boxed{42}" case never touches GiNaC.
#pragma once

#include <optional>

#include "math_ast.h"

namespace grpo::math {

// The verdict when both answers are small rational arithmetic and the rules
// settle it; nullopt when the general comparison is needed.
std::optional<bool> fast_numeric_compare(const Node& gold, const Node& pred);

}  // namespace grpo::math
