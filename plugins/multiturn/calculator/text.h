// What the calculator's messages may quote of a policy's text. A tool message
// goes back into the conversation, which the host writes as JSON: it must be
// valid UTF-8 whatever bytes the policy wrote, and short however long the
// expression.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace grpo::calculator {

// The length (1 to 4) of the well-formed UTF-8 sequence at text[at] (Unicode
// table 3-7: no overlongs, surrogates or code points past U+10FFFF), setting
// *code_point; 0 when none starts there.
size_t utf8_length(std::string_view text, size_t at, char32_t* code_point = nullptr);

// Characters before text[at], as a reader counts positions (a byte that is not
// UTF-8 counts as one).
size_t character_position(std::string_view text, size_t at);

// `text` as a message may quote it: bytes that are not UTF-8 written as \xNN,
// and past 120 bytes only the part around text[at], marked "...".
std::string excerpt(std::string_view text, size_t at = 0);

}  // namespace grpo::calculator
