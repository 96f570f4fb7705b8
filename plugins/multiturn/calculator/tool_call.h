// The calculator's answer to one tool call, apart from the plugin's entry so
// that its tests and the fuzz target call it directly.
#pragma once

#include <string>
#include <string_view>

namespace grpo::calculator {

// The answer to one tool call's body (the JSON between <tool_call> and
// </tool_call>): the exact value, or "error: ..." saying what to write
// instead, with *failed set. Whatever the body holds, the answer is valid
// UTF-8 and a few hundred bytes at most beyond the value.
std::string answer(std::string_view body, bool* failed);

}  // namespace grpo::calculator
