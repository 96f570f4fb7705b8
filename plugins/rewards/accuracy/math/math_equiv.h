// Equivalence of two parsed answers with the rules of Math-Verify's verify().
#pragma once

#include "math_ast.h"

namespace grpo::math {

// Gold first: the rules are not symmetric (a gold relation may become a set, a
// gold assignment "x = 5" unwraps to 5). *internal_error is set when the
// algebra backend failed; the answers then count as different. Thread-safe.
bool answers_equivalent(const Node& gold, const Node& pred, bool* internal_error);

}  // namespace grpo::math
