#include <algorithm>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "data/file_rows.h"
#include "tokenizer/utf8.h"
#include "util/json_input.h"

namespace grpo::data {

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError(fmt::format("cannot open dataset file '{}': check the path", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  std::string text = std::move(ss).str();
  // Text that is not UTF-8 is repaired where it enters, as every other text
  // of a run is (Parquet strings, tool messages, decoded completions): a
  // downloaded dataset with one stray byte is read, not refused and not
  // passed on to fail a JSON writer steps later. The warning says where.
  const size_t bad = tok::utf8::first_invalid(text);
  if (bad == std::string::npos) return text;
  const size_t newline = bad == 0 ? std::string::npos : text.rfind('\n', bad - 1);
  const size_t column = bad - (newline == std::string::npos ? 0 : newline + 1) + 1;
  const auto line = 1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(bad), '\n');
  const auto byte = static_cast<unsigned char>(text[bad]);
  size_t replaced = 0;
  text = tok::utf8::to_valid_lossy(text, &replaced);
  spdlog::warn("{}:{}:{}: the file is not UTF-8 there (byte 0x{:02X}){}: each invalid sequence is read as U+FFFD "
               "(the Unicode replacement character); re-encode the file as UTF-8 to keep its text",
               path, line, column, byte, replaced > 1 ? fmt::format(" and in {} more places", replaced - 1) : "");
  return text;
}

std::vector<Row> read_jsonl_text(const std::string& path, const std::string& text, std::optional<size_t> limit,
                                 BadRows& bad) {
  std::vector<Row> rows;
  size_t line_no = 0, start = 0;
  while (start < text.size() && (!limit || rows.size() < *limit)) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    ++line_no;
    std::string_view line(text.data() + start, end - start);
    start = end + 1;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    nlohmann::json row;
    try {
      row = util::parse_json(line, fmt::format("{}:{}", path, line_no));
    } catch (const util::JsonInputError& e) {
      bad.handle(fmt::format("{}; each line must be one JSON object", e.what()));
      continue;
    }
    if (!row.is_object()) {
      bad.handle(fmt::format("{}:{}: expected a JSON object per line, got {}", path, line_no, row.type_name()));
      continue;
    }
    rows.push_back(Row{std::move(row), fmt::format("{}:{}", path, line_no)});
  }
  return rows;
}

// JSONL, or one JSON array of objects (as datasets' json builder reads both).
std::vector<Row> read_json_rows(const std::string& path, std::optional<size_t> limit, BadRows& bad) {
  std::string text = read_text_file(path);
  size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos || text[first] != '[') return read_jsonl_text(path, text, limit, bad);

  nlohmann::json array;
  try {
    array = util::parse_json(text, path, /*is_file=*/true);
  } catch (const util::JsonInputError& e) {
    throw DataError(e.what());
  }
  std::vector<Row> rows;
  for (size_t i = 0; i < array.size() && (!limit || rows.size() < *limit); ++i) {
    if (!array[i].is_object()) {
      bad.handle(fmt::format("{}: element {} of the array is {}, expected an object", path, i, array[i].type_name()));
      continue;
    }
    rows.push_back(Row{std::move(array[i]), fmt::format("{}[{}]", path, i)});
  }
  return rows;
}

}  // namespace grpo::data
