// Python's str semantics on UTF-8 std::strings. Templates index, slice and
// measure strings in code points and strip "whitespace" as Python defines it,
// so these helpers work on code points wherever Python does.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/jinja/value.h"

namespace grpo::tok::jinja::py {

std::u32string decode(std::string_view utf8);
std::string encode(std::u32string_view text);
void append_utf8(std::string& out, char32_t cp);
bool is_ascii(std::string_view text);
// len(s): the number of code points.
int64_t length(std::string_view text);

// str.isspace() for one code point (also what \s matches in Python's re).
bool is_space(char32_t cp);
// The line boundaries of str.splitlines().
bool is_line_break(char32_t cp);

// str.strip / lstrip / rstrip; `chars` absent strips whitespace.
std::string strip(std::string_view text, const std::optional<std::string>& chars, bool left, bool right);
// str.split / rsplit; `sep` absent splits on runs of whitespace. maxsplit < 0: no limit.
std::vector<std::string> split(std::string_view text, const std::optional<std::string>& sep, int64_t maxsplit);
std::vector<std::string> rsplit(std::string_view text, const std::optional<std::string>& sep, int64_t maxsplit);
std::vector<std::string> splitlines(std::string_view text, bool keepends);
// str.replace; count < 0 replaces all.
std::string replace(std::string_view text, std::string_view old, std::string_view with, int64_t count);
// str.find / rfind / count over [start, end) in code points (already clamped by the caller
// through normalize_range); -1 when absent.
int64_t find(std::string_view text, std::string_view sub, int64_t start, int64_t end, bool reverse);
int64_t count(std::string_view text, std::string_view sub, int64_t start, int64_t end);
// Python's handling of negative and out-of-range start/end for find/count/startswith.
void normalize_range(int64_t len, std::optional<int64_t> start, std::optional<int64_t> end, int64_t& lo, int64_t& hi);

std::string upper(std::string_view text);
std::string lower(std::string_view text);
std::string title(std::string_view text);       // str.title()
std::string capitalize(std::string_view text);  // str.capitalize()
std::string swapcase(std::string_view text);
bool is_lower(std::string_view text);  // str.islower()
bool is_upper(std::string_view text);  // str.isupper()
// str.center / ljust / rjust with a one-code-point fill.
std::string pad(std::string_view text, int64_t width, char32_t fill, int where /* <0 left-justify, 0 center, >0 right */);

// repr() of a str: quoted and escaped as Python prints it inside a list.
std::string repr(std::string_view text);
// repr() of a float: the shortest text that reads back as the same double.
std::string float_repr(double value);
// int(text) / float(text) as Python parses them; nullopt where Python raises ValueError.
std::optional<PyInt> parse_int(std::string_view text, int base = 10);
std::optional<double> parse_float(std::string_view text);

}  // namespace grpo::tok::jinja::py
