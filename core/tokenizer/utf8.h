// UTF-8 helpers shared by normalization, added-token matching and decoding.
// Every function tolerates invalid input: tokenizers receive raw bytes from
// datasets and model samples, and neither may crash the trainer.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace grpo::tok::utf8 {

// Marks a position that starts no valid sequence.
inline constexpr char32_t kInvalid = 0xFFFFFFFF;

// Decodes the sequence at text[pos]. On success returns the code point and
// sets *length to its byte count. On failure returns kInvalid and sets
// *length to the "maximal subpart" (Unicode ch. 3, U+FFFD substitution), the
// unit that a lossy decoder replaces with one U+FFFD.
char32_t decode(std::string_view text, size_t pos, size_t* length);

// Decodes the code point that ends just before `end`; kInvalid when the bytes
// there do not form a valid sequence.
char32_t decode_before(std::string_view text, size_t end, size_t* length);

void append(std::string& out, char32_t code_point);

inline bool is_ascii(std::string_view text) {
  for (unsigned char c : text) {
    if (c >= 0x80) return false;
  }
  return true;
}

// Replaces each maximal invalid subpart by U+FFFD, as Rust's
// String::from_utf8_lossy and the WHATWG decoder do (and Python's
// bytes.decode(errors="replace"), which Hugging Face decoding uses). Adds the
// number of replacements to *replaced when given.
std::string to_valid_lossy(std::string_view bytes, size_t* replaced = nullptr);

// Offset of the first byte that starts no valid sequence; npos when `bytes`
// is valid UTF-8.
size_t first_invalid(std::string_view bytes);

// Unicode White_Space property, what lstrip/rstrip of added tokens strip.
bool is_white_space(char32_t cp);

// Letters, marks, decimal digits, connector punctuation and joiners: the
// Unicode \w class that the single_word flag of added tokens is defined by.
bool is_word_char(char32_t cp);

}  // namespace grpo::tok::utf8
