#include "tokenizer/jinja/lexer.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "tokenizer/jinja/error.h"
#include "tokenizer/jinja/pystr.h"

namespace grpo::tok::jinja {

namespace {

bool ascii_digit(char c) { return c >= '0' && c <= '9'; }
bool name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || static_cast<unsigned char>(c) >= 0x80;
}
bool name_char(char c) { return name_start(c) || ascii_digit(c); }

int count_newlines(std::string_view s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

// Python's \s at position `pos` of UTF-8 text: its length in bytes, 0 if none.
size_t space_at(const std::string& s, size_t pos) {
  if (pos >= s.size()) return 0;
  auto c = static_cast<unsigned char>(s[pos]);
  if (c < 0x80) return py::is_space(c) ? 1 : 0;
  size_t n = (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : 4;
  if (pos + n > s.size()) return 0;
  std::u32string cp = py::decode(std::string_view(s).substr(pos, n));
  return (cp.size() == 1 && py::is_space(cp[0])) ? n : 0;
}

size_t skip_spaces(const std::string& s, size_t pos) {
  while (size_t n = space_at(s, pos)) pos += n;
  return pos;
}

bool all_spaces(const std::string& s, size_t from) {
  return skip_spaces(s, from) == s.size();
}

// Python's unicode-escape decoding, which jinja applies to string literals.
std::string unescape(const std::string& body, int line) {
  std::string out;
  for (size_t i = 0; i < body.size(); ++i) {
    char c = body[i];
    if (c != '\\' || i + 1 == body.size()) {
      out.push_back(c);
      continue;
    }
    char e = body[++i];
    auto hex = [&](size_t digits) {
      std::string h = body.substr(i + 1, digits);
      if (h.size() != digits || !std::all_of(h.begin(), h.end(), [](char x) { return std::isxdigit(static_cast<unsigned char>(x)); }))
        throw JinjaError("a string literal has a truncated \\" + std::string(1, e) + " escape", line);
      i += digits;
      py::append_utf8(out, static_cast<char32_t>(std::strtoul(h.c_str(), nullptr, 16)));
    };
    switch (e) {
      case '\n': break;
      case '\\': out.push_back('\\'); break;
      case '\'': out.push_back('\''); break;
      case '"': out.push_back('"'); break;
      case 'a': out.push_back('\a'); break;
      case 'b': out.push_back('\b'); break;
      case 'f': out.push_back('\f'); break;
      case 'n': out.push_back('\n'); break;
      case 'r': out.push_back('\r'); break;
      case 't': out.push_back('\t'); break;
      case 'v': out.push_back('\v'); break;
      case 'x': hex(2); break;
      case 'u': hex(4); break;
      case 'U': hex(8); break;
      case 'N': throw JinjaError("named unicode escapes (\\N{...}) in string literals are not supported", line);
      default:
        if (e >= '0' && e <= '7') {
          unsigned v = static_cast<unsigned>(e - '0');
          for (int k = 0; k < 2 && i + 1 < body.size() && body[i + 1] >= '0' && body[i + 1] <= '7'; ++k)
            v = v * 8 + static_cast<unsigned>(body[++i] - '0');
          py::append_utf8(out, v);
        } else {
          out.push_back('\\');
          out.push_back(e);
        }
    }
  }
  return out;
}

class Lexer {
 public:
  explicit Lexer(const std::string& source) : src_(normalize(source)) {}

  std::vector<Token> run() {
    while (pos_ < src_.size()) {
      size_t tag = next_tag(pos_);
      if (tag == std::string::npos) {
        emit_data(src_.substr(pos_));
        break;
      }
      std::string text = src_.substr(pos_, tag - pos_);
      char kind = src_[tag + 1];  // '{', '%' or '#'
      size_t after = tag + 2;
      char sign = 0;
      if (after < src_.size() && (src_[after] == '-' || src_[after] == '+')) sign = src_[after++];
      size_t raw_end = 0;
      bool raw = kind == '%' && raw_begin(after, raw_end);
      int text_lines = count_newlines(text);
      strip_before_tag(text, sign, kind != '{');
      emit_data(text);
      line_ += text_lines;
      line_starting_ = false;
      if (raw) {
        line_ += count_newlines(std::string_view(src_).substr(tag, raw_end - tag));
        line_starting_ = src_[raw_end - 1] == '\n';
        pos_ = raw_end;
        raw_body();
      } else if (kind == '#') {
        pos_ = after;
        comment();
      } else {
        push(kind == '{' ? TokenType::VariableBegin : TokenType::BlockBegin, "");
        pos_ = after;
        tag_tokens(kind);
      }
    }
    push(TokenType::End, "");
    return std::move(out_);
  }

 private:
  static std::string normalize(const std::string& source) {
    std::string s;
    s.reserve(source.size());
    for (size_t i = 0; i < source.size(); ++i) {
      if (source[i] == '\r') {
        s.push_back('\n');
        if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
      } else {
        s.push_back(source[i]);
      }
    }
    if (!s.empty() && s.back() == '\n') s.pop_back();  // keep_trailing_newline=False
    return s;
  }

  size_t next_tag(size_t from) const {
    for (size_t i = src_.find('{', from); i != std::string::npos; i = src_.find('{', i + 1)) {
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    }
    return std::string::npos;
  }

  // jinja's "-" strips all whitespace before the tag; lstrip_blocks strips the
  // spaces between the line's start and a block or comment tag.
  void strip_before_tag(std::string& text, char sign, bool block_or_comment) const {
    if (sign == '-') {
      text = py::strip(text, std::nullopt, false, true);
    } else if (sign != '+' && block_or_comment) {
      size_t nl = text.rfind('\n');
      size_t line_start = nl == std::string::npos ? 0 : nl + 1;
      if ((line_start > 0 || line_starting_) && line_start < text.size() && all_spaces(text, line_start))
        text.erase(line_start);
    }
  }

  void emit_data(const std::string& text) {
    if (!text.empty()) push(TokenType::Data, text);
  }

  void push(TokenType type, std::string text) { out_.push_back(Token{type, std::move(text), line_, 0, 0}); }

  bool starts(size_t pos, const char* s) const { return src_.compare(pos, std::char_traits<char>::length(s), s) == 0; }

  // {% raw %} (optionally {%- raw -%}); sets `end` past the tag.
  bool raw_begin(size_t after_sign, size_t& end) const {
    size_t p = skip_spaces(src_, after_sign);
    if (!starts(p, "raw")) return false;
    p = skip_spaces(src_, p + 3);
    if (starts(p, "-%}")) {
      end = skip_spaces(src_, p + 3);
      return true;
    }
    if (starts(p, "%}")) {
      end = p + 2;
      return true;
    }
    return false;
  }

  // Everything up to {% endraw %} is text.
  void raw_body() {
    for (size_t p = src_.find("{%", pos_); p != std::string::npos; p = src_.find("{%", p + 1)) {
      size_t q = p + 2;
      char sign = 0;
      if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) sign = src_[q++];
      q = skip_spaces(src_, q);
      if (!starts(q, "endraw")) continue;
      q = skip_spaces(src_, q + 6);
      size_t end;
      if (!end_of_block(q, end)) continue;
      std::string text = src_.substr(pos_, p - pos_);
      int text_lines = count_newlines(text);
      strip_before_tag(text, sign, true);
      emit_data(text);
      line_ += text_lines + count_newlines(std::string_view(src_).substr(p, end - p));
      line_starting_ = src_[end - 1] == '\n';
      pos_ = end;
      return;
    }
    throw JinjaError("missing end of raw directive ({% endraw %})", line_);
  }

  // `+%}`, `-%}` and following whitespace, or `%}` and, with trim_blocks, one newline.
  bool end_of_block(size_t p, size_t& end) const {
    if (starts(p, "+%}")) end = p + 3;
    else if (starts(p, "-%}")) end = skip_spaces(src_, p + 3);
    else if (starts(p, "%}")) end = p + 2 + (p + 2 < src_.size() && src_[p + 2] == '\n');
    else return false;
    return true;
  }

  // Up to the first `#}` (`-#}` also strips the whitespace after it; `+#}` keeps the newline).
  void comment() {
    size_t p = src_.find("#}", pos_);
    if (p == std::string::npos) throw JinjaError("missing end of comment tag", line_);
    size_t end;
    if (p > pos_ && src_[p - 1] == '-') end = skip_spaces(src_, p + 2);
    else if (p > pos_ && src_[p - 1] == '+') end = p + 2;
    else end = p + 2 + (p + 2 < src_.size() && src_[p + 2] == '\n');
    line_ += count_newlines(std::string_view(src_).substr(pos_, end - pos_));
    line_starting_ = end > pos_ && src_[end - 1] == '\n';
    pos_ = end;
  }

  void tag_tokens(char kind) {
    std::string balance;
    const int start_line = line_;
    while (true) {
      if (pos_ >= src_.size())
        throw JinjaError(std::string("unexpected end of template inside a ") + (kind == '{' ? "{{ }}" : "{% %}") +
                             " tag opened on line " + std::to_string(start_line),
                         line_);
      if (balance.empty()) {
        size_t end = 0;
        bool closed = false;
        if (kind == '{') {
          if (starts(pos_, "-}}")) end = skip_spaces(src_, pos_ + 3), closed = true;
          else if (starts(pos_, "}}")) end = pos_ + 2, closed = true;
        } else {
          closed = end_of_block(pos_, end);
        }
        if (closed) {
          push(kind == '{' ? TokenType::VariableEnd : TokenType::BlockEnd, "");
          line_ += count_newlines(std::string_view(src_).substr(pos_, end - pos_));
          line_starting_ = src_[end - 1] == '\n';
          pos_ = end;
          return;
        }
      }
      if (size_t n = space_at(src_, pos_)) {
        line_ += src_[pos_] == '\n';
        pos_ += n;
        continue;
      }
      char c = src_[pos_];
      if (ascii_digit(c)) {
        number();
      } else if (name_start(c)) {
        size_t e = pos_;
        while (e < src_.size() && name_char(src_[e])) ++e;
        push(TokenType::Name, src_.substr(pos_, e - pos_));
        pos_ = e;
      } else if (c == '\'' || c == '"') {
        string_literal(c);
      } else {
        op(balance);
      }
    }
  }

  void number() {
    // jinja's float_re first (digits with a fraction and/or an exponent), then integers.
    auto digits = [&](size_t p) {
      size_t q = p;
      while (q < src_.size() && (ascii_digit(src_[q]) || (src_[q] == '_' && q + 1 < src_.size() && ascii_digit(src_[q + 1]) && q > p)))
        ++q;
      return q;
    };
    bool after_dot = pos_ > 0 && src_[pos_ - 1] == '.';
    size_t p = digits(pos_);
    size_t f = p;
    bool is_float = false;
    if (!after_dot) {
      if (f + 1 < src_.size() && src_[f] == '.' && ascii_digit(src_[f + 1])) {
        f = digits(f + 1);
        is_float = true;
      }
      if (f < src_.size() && (src_[f] == 'e' || src_[f] == 'E')) {
        size_t g = f + 1;
        if (g < src_.size() && (src_[g] == '+' || src_[g] == '-')) ++g;
        if (g < src_.size() && ascii_digit(src_[g])) {
          f = digits(g);
          is_float = true;
        }
      }
    }
    if (is_float) {
      std::string text = src_.substr(pos_, f - pos_);
      text.erase(std::remove(text.begin(), text.end(), '_'), text.end());
      Token t{TokenType::Float, text, line_, 0, std::strtod(text.c_str(), nullptr)};
      out_.push_back(t);
      pos_ = f;
      return;
    }
    int base = 10;
    size_t start = pos_;
    if (src_[pos_] == '0' && pos_ + 1 < src_.size()) {
      char b = static_cast<char>(std::tolower(static_cast<unsigned char>(src_[pos_ + 1])));
      base = b == 'x' ? 16 : b == 'o' ? 8 : b == 'b' ? 2 : 10;
    }
    if (base != 10) {
      size_t q = pos_ + 2;
      while (q < src_.size() && (std::isxdigit(static_cast<unsigned char>(src_[q])) || src_[q] == '_')) ++q;
      p = q;
      start = pos_ + 2;
    } else if (src_[pos_] == '0') {
      p = pos_ + 1;  // jinja reads "0" (or "0_0") as a whole literal
      while (p + 1 < src_.size() && (src_[p] == '0' || (src_[p] == '_' && src_[p + 1] == '0'))) ++p;
    }
    std::string text = src_.substr(start, p - start);
    text.erase(std::remove(text.begin(), text.end(), '_'), text.end());
    auto v = py::parse_int(text, base);
    if (!v) throw JinjaError("invalid or too large integer literal '" + src_.substr(pos_, p - pos_) + "'", line_);
    out_.push_back(Token{TokenType::Integer, src_.substr(pos_, p - pos_), line_, *v, 0});
    pos_ = p;
  }

  void string_literal(char quote) {
    size_t p = pos_ + 1;
    while (p < src_.size() && src_[p] != quote) p += src_[p] == '\\' ? 2 : 1;
    if (p >= src_.size()) throw JinjaError("unterminated string literal", line_);
    std::string body = src_.substr(pos_ + 1, p - pos_ - 1);
    push(TokenType::String, unescape(body, line_));
    line_ += count_newlines(body);
    pos_ = p + 1;
  }

  void op(std::string& balance) {
    static const char* two[] = {"//", "**", "==", "!=", ">=", "<="};
    for (const char* t : two) {
      if (starts(pos_, t)) {
        push(TokenType::Operator, t);
        pos_ += 2;
        return;
      }
    }
    char c = src_[pos_];
    if (std::string("+-/*%~[](){}><=.:|,;").find(c) == std::string::npos)
      throw JinjaError(std::string("unexpected character '") + c + "' in a tag", line_);
    if (c == '(' || c == '[' || c == '{') {
      balance.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
    } else if (c == ')' || c == ']' || c == '}') {
      if (balance.empty()) throw JinjaError(std::string("unexpected '") + c + "'", line_);
      if (balance.back() != c)
        throw JinjaError(std::string("unexpected '") + c + "', expected '" + balance.back() + "'", line_);
      balance.pop_back();
    }
    push(TokenType::Operator, std::string(1, c));
    ++pos_;
  }

  std::string src_;
  size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;
  std::vector<Token> out_;
};

}  // namespace

std::vector<Token> tokenize(const std::string& source) { return Lexer(source).run(); }

std::string describe(const Token& token) {
  switch (token.type) {
    case TokenType::Data: return "template data";
    case TokenType::VariableBegin: return "begin of print statement";
    case TokenType::VariableEnd: return "end of print statement";
    case TokenType::BlockBegin: return "begin of statement block";
    case TokenType::BlockEnd: return "end of statement block";
    case TokenType::End: return "end of template";
    case TokenType::String: return "string";
    case TokenType::Integer: return "integer";
    case TokenType::Float: return "float";
    default: return "'" + token.text + "'";
  }
}

}  // namespace grpo::tok::jinja
