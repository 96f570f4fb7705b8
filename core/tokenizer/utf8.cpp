#include "tokenizer/utf8.h"

#include <utf8proc.h>

namespace grpo::tok::utf8 {
namespace {

bool in_range(unsigned char c, unsigned char lo, unsigned char hi) { return c >= lo && c <= hi; }

}  // namespace

char32_t decode(std::string_view text, size_t pos, size_t* length) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data()) + pos;
  const size_t avail = text.size() - pos;
  const unsigned char b0 = s[0];
  if (b0 < 0x80) {
    *length = 1;
    return b0;
  }
  size_t need;
  unsigned char lo = 0x80, hi = 0xBF;  // range allowed for the second byte
  char32_t cp;
  if (in_range(b0, 0xC2, 0xDF)) {
    need = 1;
    cp = b0 & 0x1F;
  } else if (in_range(b0, 0xE0, 0xEF)) {
    need = 2;
    cp = b0 & 0x0F;
    if (b0 == 0xE0) lo = 0xA0;  // overlong
    if (b0 == 0xED) hi = 0x9F;  // surrogates
  } else if (in_range(b0, 0xF0, 0xF4)) {
    need = 3;
    cp = b0 & 0x07;
    if (b0 == 0xF0) lo = 0x90;  // overlong
    if (b0 == 0xF4) hi = 0x8F;  // beyond U+10FFFF
  } else {
    *length = 1;
    return kInvalid;
  }
  for (size_t i = 1; i <= need; ++i) {
    const unsigned char lo_i = i == 1 ? lo : 0x80;
    const unsigned char hi_i = i == 1 ? hi : 0xBF;
    if (i >= avail || !in_range(s[i], lo_i, hi_i)) {
      *length = i;
      return kInvalid;
    }
    cp = (cp << 6) | (s[i] & 0x3F);
  }
  *length = need + 1;
  return cp;
}

char32_t decode_before(std::string_view text, size_t end, size_t* length) {
  // A sequence is at most 4 bytes: try each possible start from the nearest.
  for (size_t back = 1; back <= 4 && back <= end; ++back) {
    const auto c = static_cast<unsigned char>(text[end - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte, look further back
    size_t len = 0;
    const char32_t cp = decode(text, end - back, &len);
    if (cp != kInvalid && len == back) {
      *length = len;
      return cp;
    }
    break;
  }
  *length = 1;
  return kInvalid;
}

void append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string to_valid_lossy(std::string_view bytes, size_t* replaced) {
  std::string out;
  out.reserve(bytes.size());
  size_t pos = 0;
  while (pos < bytes.size()) {
    // Copy ASCII runs without decoding: almost all decoded text is ASCII.
    size_t run = pos;
    while (run < bytes.size() && static_cast<unsigned char>(bytes[run]) < 0x80) ++run;
    out.append(bytes.data() + pos, run - pos);
    pos = run;
    if (pos == bytes.size()) break;
    size_t len = 0;
    if (decode(bytes, pos, &len) == kInvalid) {
      out += "\xEF\xBF\xBD";
      if (replaced) ++*replaced;
    } else {
      out.append(bytes.data() + pos, len);
    }
    pos += len;
  }
  return out;
}

size_t first_invalid(std::string_view bytes) {
  size_t pos = 0;
  while (pos < bytes.size()) {
    if (static_cast<unsigned char>(bytes[pos]) < 0x80) {
      ++pos;
      continue;
    }
    size_t len = 0;
    if (decode(bytes, pos, &len) == kInvalid) return pos;
    pos += len;
  }
  return std::string_view::npos;
}

bool is_white_space(char32_t cp) {
  if (cp <= 0x20) return cp == 0x20 || (cp >= 0x09 && cp <= 0x0D);
  if (cp >= 0x2000 && cp <= 0x200A) return true;
  return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
         cp == 0x3000;
}

bool is_word_char(char32_t cp) {
  if (cp < 0x80) {
    return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || cp == '_';
  }
  if (cp == 0x200C || cp == 0x200D) return true;
  if (cp > 0x10FFFF) return false;  // kInvalid: a stray byte is no word
  const utf8proc_category_t category = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
  // Letters (Lu..Lo) and marks (Mn..Me) are contiguous in utf8proc's enum.
  return (category >= UTF8PROC_CATEGORY_LU && category <= UTF8PROC_CATEGORY_ME) || category == UTF8PROC_CATEGORY_ND ||
         category == UTF8PROC_CATEGORY_NL || category == UTF8PROC_CATEGORY_PC;
}

}  // namespace grpo::tok::utf8
