// The GPT-2 byte-level alphabet: every byte is shown as one printable code
// point so that BPE vocabularies can be stored as JSON strings. Vocabulary
// entries of tokenizer.json are written in this alphabet.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace grpo::tok {

class ByteLevel {
 public:
  static const ByteLevel& instance();

  char32_t char_of(uint8_t byte) const { return byte_to_char_[byte]; }
  const std::string& utf8_of(uint8_t byte) const { return byte_to_utf8_[byte]; }

  // The byte a code point stands for, or -1 when it is not in the alphabet.
  int byte_of(char32_t cp) const { return cp < char_to_byte_.size() ? char_to_byte_[cp] : -1; }

  // Raw bytes -> byte-level text.
  std::string encode(std::string_view bytes) const;

  // Byte-level text -> raw bytes, appended to *out. Returns false (and leaves
  // *out untouched) when a character is outside the alphabet or the text is
  // not valid UTF-8, which is how added tokens such as "a b" are recognised.
  bool decode(std::string_view text, std::string* out) const;

 private:
  ByteLevel();
  std::array<char32_t, 256> byte_to_char_{};
  std::array<std::string, 256> byte_to_utf8_{};
  std::array<int16_t, 324> char_to_byte_{};  // the alphabet ends at U+0143
};

}  // namespace grpo::tok
