#include "tokenizer/byte_level.h"

#include "tokenizer/utf8.h"

namespace grpo::tok {

const ByteLevel& ByteLevel::instance() {
  static const ByteLevel table;
  return table;
}

ByteLevel::ByteLevel() {
  char_to_byte_.fill(-1);
  // Printable Latin-1 bytes keep their own code point; the rest (controls,
  // space, DEL, NBSP, soft hyphen) are moved to U+0100 onwards in byte order.
  auto keeps_itself = [](int b) {
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
  };
  char32_t next = 0x100;
  for (int b = 0; b < 256; ++b) {
    const char32_t cp = keeps_itself(b) ? static_cast<char32_t>(b) : next++;
    byte_to_char_[b] = cp;
    char_to_byte_[cp] = static_cast<int16_t>(b);
    utf8::append(byte_to_utf8_[b], cp);
  }
}

std::string ByteLevel::encode(std::string_view bytes) const {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) out += byte_to_utf8_[b];
  return out;
}

bool ByteLevel::decode(std::string_view text, std::string* out) const {
  const size_t mark = out->size();
  size_t pos = 0;
  while (pos < text.size()) {
    size_t len = 0;
    const char32_t cp = utf8::decode(text, pos, &len);
    const int b = cp == utf8::kInvalid ? -1 : byte_of(cp);
    if (b < 0) {
      out->resize(mark);
      return false;
    }
    out->push_back(static_cast<char>(b));
    pos += len;
  }
  return true;
}

}  // namespace grpo::tok
