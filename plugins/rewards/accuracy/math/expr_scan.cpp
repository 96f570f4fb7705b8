#include "expr_scan.h"

#include "text_scan.h"

namespace grpo::math {
namespace {

using scan::is_digit;
using scan::is_space;
using scan::starts_with;

constexpr size_t npos = std::string_view::npos;

// Bytes of a currency sign at i (0 when none).
size_t currency_at(std::string_view t, size_t i) {
  if (i >= t.size()) return 0;
  const auto b = [&](size_t k) { return static_cast<unsigned char>(t[i + k]); };
  if (t[i] == '$') return 1;
  if (i + 1 < t.size() && b(0) == 0xC2 && (b(1) == 0xA3 || b(1) == 0xA5)) return 2;       // £ ¥
  if (i + 2 < t.size() && b(0) == 0xE2 && b(1) == 0x82 && b(2) >= 0xA0 && b(2) <= 0xBF) return 3;  // ₠-₿
  if (i + 2 < t.size() && b(0) == 0xE0 && b(1) == 0xB8 && b(2) == 0xBF) return 3;  // ฿
  return 0;
}

// 2-byte operator characters × and ÷.
size_t utf8_op_at(std::string_view t, size_t i) {
  if (i + 1 < t.size() && static_cast<unsigned char>(t[i]) == 0xC3 &&
      (static_cast<unsigned char>(t[i + 1]) == 0x97 || static_cast<unsigned char>(t[i + 1]) == 0xB7)) {
    return 2;
  }
  return 0;
}

bool is_ascii_op(char c) {
  return c == '+' || c == '-' || c == '*' || c == '/' || c == '^' || c == '(' || c == ')';
}

size_t digits_end(std::string_view t, size_t i) {
  while (i < t.size() && is_digit(t[i])) ++i;
  return i;
}

// (?P<percent>\s*(?:%|[Pp]ercent|\s*[Pp]ercentage|\s*[Pp]ct))? ; returns the new end.
size_t percent_suffix(std::string_view t, size_t e, bool* pct) {
  const size_t r = scan::skip_spaces(t, e);
  size_t len = 0;
  if (starts_with(t, r, "%")) len = 1;
  else if (starts_with(t, r, "percent") || starts_with(t, r, "Percent")) len = 7;
  else if (starts_with(t, r, "pct") || starts_with(t, r, "Pct")) len = 3;
  *pct = len != 0;
  return len ? r + len : e;
}

// number_re at p; fills the digits the way Math-Verify rebuilds them.
bool number_at(std::string_view t, size_t p, ExprHit* out) {
  const size_t n = t.size();
  if (p >= n || (p > 0 && is_digit(t[p - 1]))) return false;
  std::string integer, decimal;
  size_t end = npos;
  const size_t k = (t[p] == '-') ? p + 1 : p;
  // 1: thousands groups, "1,234,567.89" or "1 234"
  if (k < n && t[k] >= '1' && t[k] <= '9') {
    size_t m = k + 1;
    for (int c = 0; c < 2 && m < n && is_digit(t[m]); ++c) ++m;
    size_t r = m;
    int groups = 0;
    while (r + 3 < n && (t[r] == ',' || t[r] == ' ') && is_digit(t[r + 1]) && is_digit(t[r + 2]) &&
           is_digit(t[r + 3])) {
      r += 4;
      ++groups;
    }
    if (groups) {
      integer.assign(t.substr(p, r - p));
      end = r;
      if (r + 1 < n && t[r] == '.' && is_digit(t[r + 1])) {
        end = digits_end(t, r + 1);
        decimal.assign(t.substr(r, end - r));
      }
    }
  }
  if (end == npos) {
    const size_t d = digits_end(t, k);
    if (d > k) {
      integer.assign(t.substr(p, d - p));
      end = d;
      // 2: "12.5" or "12,5"
      if (d + 1 < n && (t[d] == '.' || t[d] == ',') && is_digit(t[d + 1])) {
        end = digits_end(t, d + 1);
        decimal.assign(t.substr(d, end - d));
      }
    } else if (t[p] == '.' && p + 1 < n && is_digit(t[p + 1])) {
      // 3: ".5"
      end = digits_end(t, p + 1);
      decimal.assign(t.substr(p, end - p));
    }
  }
  if (end == npos) return false;
  std::string digits;
  for (char c : integer) {
    if (c != ',' && c != ' ') digits.push_back(c);
  }
  size_t z = 0;
  while (z < digits.size() && digits[z] == '0') ++z;
  digits.erase(0, z);
  if (digits.empty()) digits = "0";
  for (char& c : decimal) {
    if (c == ',') c = '.';
  }
  out->end = percent_suffix(t, end, &out->percent);
  out->is_number = true;
  out->text = digits + decimal;
  return true;
}

// Where a (?:^|\s|=)(?:\*\*)? prefix at s can leave the body; up to two choices.
int prefix_ends(std::string_view t, size_t s, size_t ends[4]) {
  int k = 0;
  auto add = [&](size_t q) {
    if (starts_with(t, q, "**")) ends[k++] = q + 2;
    ends[k++] = q;
  };
  if (s == 0) add(0);
  if (s < t.size() && (is_space(t[s]) || t[s] == '=')) add(s + 1);
  return k;
}

bool suffix_at(std::string_view t, size_t e, size_t* end) {
  size_t q = e;
  if (starts_with(t, q, "**")) q += 2;
  if (q == t.size()) {
    *end = q;
    return true;
  }
  const char c = t[q];
  if (c == '.' || c == ',' || c == ':' || is_space(c) || c == ')' || c == '$') {
    *end = q + 1;
    return true;
  }
  return false;
}

// expr_re at q followed by the suffix.
bool expr_body_at(std::string_view t, size_t q, ExprHit* out) {
  const size_t n = t.size();
  size_t k = q;
  if (k < n && t[k] == '-') ++k;
  if (k < n && t[k] == '(') ++k;
  if (k < n && t[k] == '-') ++k;
  if (k >= n || !is_digit(t[k])) return false;
  // Maximal run of expression characters after the first digit.
  size_t first_op_end = npos;
  size_t r = k + 1;
  while (r < n) {
    const char c = t[r];
    const size_t u = utf8_op_at(t, r);
    if (u || is_ascii_op(c)) {
      if (first_op_end == npos) first_op_end = r + (u ? u : 1);
      r += u ? u : 1;
    } else if (is_digit(c) || c == '.' || is_space(c)) {
      ++r;
    } else {
      break;
    }
  }
  if (first_op_end == npos) return false;
  for (size_t e = r; e > first_op_end; --e) {
    size_t end;
    if (suffix_at(t, e, &end)) {
      out->end = end;
      out->is_number = false;
      out->text.assign(t.substr(q, e - q));
      out->percent = false;
      return true;
    }
  }
  return false;
}

}  // namespace

bool number_with_anchor_at(std::string_view t, size_t s, ExprHit* out) {
  size_t ends[4];
  const int k = prefix_ends(t, s, ends);
  for (int j = 0; j < k; ++j) {
    const size_t c = currency_at(t, ends[j]);
    if (c && number_at(t, ends[j] + c, out)) return true;
    if (number_at(t, ends[j], out)) return true;
  }
  return false;
}

bool expr_with_anchor_at(std::string_view t, size_t s, ExprHit* out) {
  size_t ends[4];
  const int k = prefix_ends(t, s, ends);
  for (int j = 0; j < k; ++j) {
    if (expr_body_at(t, ends[j], out)) return true;
  }
  return false;
}

bool expr_or_number_at(std::string_view t, size_t s, ExprHit* out) {
  return expr_with_anchor_at(t, s, out) || number_with_anchor_at(t, s, out);
}

}  // namespace grpo::math
