#include <cerrno>
#include <cstdlib>

#include <fmt/format.h>

#include "data/file_rows.h"

namespace grpo::data {
namespace {

// RFC 4180: fields split on ',', quoted fields may hold ',', '""' and line breaks.
class CsvCursor {
 public:
  explicit CsvCursor(const std::string& text) : text_(text) {
    if (text_.compare(0, 3, "\xEF\xBB\xBF") == 0) at_ = 3;  // a UTF-8 byte order mark
  }
  bool done() const { return at_ >= text_.size(); }
  size_t line() const { return line_; }

  // One record's fields; `quoted_error` is set for a quote left open at the end of the file.
  std::vector<std::string> record(bool& open_quote) {
    std::vector<std::string> fields(1);
    bool quoted = false;
    while (at_ < text_.size()) {
      const char c = text_[at_++];
      if (quoted) {
        if (c == '"' && at_ < text_.size() && text_[at_] == '"') {
          fields.back() += '"';
          ++at_;
        } else if (c == '"') {
          quoted = false;
        } else {
          if (c == '\n') ++line_;
          fields.back() += c;
        }
      } else if (c == '"' && fields.back().empty()) {
        quoted = true;
      } else if (c == ',') {
        fields.emplace_back();
      } else if (c == '\n') {
        ++line_;
        break;
      } else if (c != '\r' || (at_ < text_.size() && text_[at_] != '\n')) {
        fields.back() += c;
      }
    }
    open_quote = quoted;
    return fields;
  }

 private:
  const std::string& text_;
  size_t at_ = 0;
  size_t line_ = 1;
};

bool parses_as_integer(const std::string& s) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  std::strtoll(s.c_str(), &end, 10);
  return errno == 0 && *end == '\0';
}

bool parses_as_real(const std::string& s) {
  if (s.empty() || std::isspace(static_cast<unsigned char>(s[0]))) return false;
  char* end = nullptr;
  std::strtod(s.c_str(), &end);
  return *end == '\0';
}

}  // namespace

std::vector<Row> read_csv_rows(const std::string& path, std::optional<size_t> limit, BadRows& bad) {
  const std::string text = read_text_file(path);
  CsvCursor cursor(text);
  bool open_quote = false;
  const std::vector<std::string> header = cursor.record(open_quote);
  if (header.size() == 1 && header[0].empty())
    throw DataError(fmt::format("{}: empty CSV file: the first line must name the columns", path));
  std::vector<std::vector<std::string>> cells;
  std::vector<std::string> sources;
  while (!cursor.done() && (!limit || cells.size() < *limit)) {
    const size_t line = cursor.line();
    std::vector<std::string> fields = cursor.record(open_quote);
    if (open_quote) throw DataError(fmt::format("{}:{}: a quoted CSV field is never closed", path, line));
    if (fields.size() == 1 && fields[0].empty()) continue;  // a blank line
    if (fields.size() != header.size()) {
      bad.handle(fmt::format("{}:{}: {} fields where the header names {} columns", path, line, fields.size(),
                             header.size()));
      continue;
    }
    cells.push_back(std::move(fields));
    sources.push_back(fmt::format("{}:{}", path, line));
  }
  enum class Kind { Integer, Real, Text };
  std::vector<Kind> kinds(header.size(), Kind::Integer);
  for (size_t c = 0; c < header.size(); ++c) {
    for (const auto& r : cells) {
      if (r[c].empty()) continue;
      if (kinds[c] == Kind::Integer && !parses_as_integer(r[c])) kinds[c] = Kind::Real;
      if (kinds[c] == Kind::Real && !parses_as_real(r[c])) kinds[c] = Kind::Text;
    }
  }
  std::vector<Row> rows;
  for (size_t i = 0; i < cells.size(); ++i) {
    nlohmann::json row = nlohmann::json::object();
    for (size_t c = 0; c < header.size(); ++c) {
      const std::string& v = cells[i][c];
      if (v.empty()) row[header[c]] = nullptr;
      else if (kinds[c] == Kind::Integer) row[header[c]] = std::strtoll(v.c_str(), nullptr, 10);
      else if (kinds[c] == Kind::Real) row[header[c]] = std::strtod(v.c_str(), nullptr);
      else row[header[c]] = v;
    }
    rows.push_back(Row{std::move(row), sources[i]});
  }
  return rows;
}

}  // namespace grpo::data
