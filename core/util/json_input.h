// JSON from outside the program (request bodies, dataset rows, model and
// checkpoint files) is parsed here, bounded in depth. nlohmann's parser is
// iterative, but copying, comparing and dump() recurse once per level: a value
// nested 100,000 deep parses fine and then overflows a thread's stack wherever
// it is next copied or printed. Nothing real nests more than a few dozen levels.
#pragma once

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "util/user_error.h"

namespace grpo::util {

inline constexpr int kMaxJsonDepth = 512;

// A JSON text that cannot be used: malformed, nested too deep, or holding a
// number out of range (1e999). `byte` is where (0-based), for a line number.
class JsonInputError : public UserError {
 public:
  JsonInputError(const std::string& message, size_t byte) : UserError(message), byte_(byte) {}
  size_t byte() const { return byte_; }

 private:
  size_t byte_;
};

// Offset of the '[' or '{' that opens nesting level max_depth + 1, or npos.
// Brackets inside strings do not count; the text need not be valid JSON.
inline size_t json_too_deep_at(std::string_view text, int max_depth = kMaxJsonDepth) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return i;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return std::string_view::npos;
}

// Parses `text`; `what` names it in the error ("the request body", or a
// file's path, followed then by the line). Json is nlohmann::json or ordered_json.
template <class Json = nlohmann::json>
Json parse_json(std::string_view text, std::string_view what, bool is_file = false) {
  auto where = [&](size_t byte) {
    if (!is_file) return std::string(what);
    const std::string_view before = text.substr(0, std::min(byte, text.size()));
    return fmt::format("{}:{}", what, 1 + std::count(before.begin(), before.end(), '\n'));
  };
  if (size_t at = json_too_deep_at(text); at != std::string_view::npos)
    throw JsonInputError(fmt::format("{}: JSON nested deeper than {} levels (at byte {}); nothing this program reads "
                                     "nests that deep: check what wrote it",
                                     where(at), kMaxJsonDepth, at),
                         at);
  try {
    return Json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    const size_t at = e.byte > 0 ? e.byte - 1 : 0;
    throw JsonInputError(fmt::format("{}: not valid JSON: {}", where(at), e.what()), at);
  } catch (const nlohmann::json::exception& e) {  // out_of_range 406: a number past double's range (1e999)
    throw JsonInputError(fmt::format("{}: unusable JSON: {}", what, e.what()), 0);
  }
}

// The whole file at `path`, parsed as parse_json does; errors name path:line.
template <class Json = nlohmann::json>
Json parse_json_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw JsonInputError(fmt::format("{}: cannot open: {}", path, std::strerror(errno)), 0);
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw JsonInputError(fmt::format("{}: cannot read: {}", path, std::strerror(errno)), 0);
  return parse_json<Json>(text.str(), path, /*is_file=*/true);
}

// As parse_json, but a discarded value (is_discarded()) instead of an error,
// for callers that report bad lines themselves.
template <class Json = nlohmann::json>
Json try_parse_json(std::string_view text) {
  if (json_too_deep_at(text) != std::string_view::npos) return Json(nlohmann::json::value_t::discarded);
  return Json::parse(text, nullptr, /*allow_exceptions=*/false);
}

// A value as an error message may quote it: scalars as JSON (long strings
// cut), containers by kind and size; never a recursive dump of what a client sent.
// Flat containers of a few scalars ([2, -1]) are shown whole.
template <class Json>
std::string json_excerpt(const Json& value, size_t max_chars = 60) {
  if (value.is_structured()) {
    const bool flat = value.size() <= 16 && std::none_of(value.begin(), value.end(), [](const Json& v) {
                        return v.is_structured();
                      });
    if (!flat) return fmt::format("{} with {} item(s)", value.is_array() ? "a list" : "an object", value.size());
  }
  std::string text = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (text.size() > max_chars) text = text.substr(0, max_chars) + "...";
  return text;
}

}  // namespace grpo::util
