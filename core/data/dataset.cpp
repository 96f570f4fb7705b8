#include "data/dataset.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

namespace grpo::data {

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError(fmt::format("cannot open dataset file '{}': check the path (datasets are JSONL or JSON files)", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

size_t line_of_byte(const std::string& text, size_t byte) {
  byte = std::min(byte, text.size());
  return 1 + static_cast<size_t>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(byte), '\n'));
}

std::vector<Row> parse_jsonl(const std::string& path, const std::string& text, std::optional<size_t> limit,
                             BadRows* bad) {
  BadRows strict;
  if (!bad) bad = &strict;
  std::vector<Row> rows;
  size_t line_no = 0, start = 0;
  while (start < text.size() && (!limit || rows.size() < *limit)) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    ++line_no;
    std::string_view line(text.data() + start, end - start);
    start = end + 1;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    nlohmann::json row = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (row.is_discarded()) {
      bad->handle(fmt::format("{}:{}: malformed JSON line; each line must be one JSON object", path, line_no));
      continue;
    }
    if (!row.is_object()) {
      bad->handle(fmt::format("{}:{}: expected a JSON object per line, got {}", path, line_no, row.type_name()));
      continue;
    }
    rows.push_back(Row{std::move(row), fmt::format("{}:{}", path, line_no)});
  }
  return rows;
}

}  // namespace

void BadRows::handle(const std::string& message) {
  if (!skip) throw DataError(message);
  if (count++ == 0) first = message;
}

DatasetSpec DatasetSpec::parse(const std::string& spec) {
  DatasetSpec out{spec, std::nullopt};
  size_t hash = spec.rfind('#');
  if (hash == std::string::npos) return out;
  std::string count = spec.substr(hash + 1);
  if (count.empty() || count.find_first_not_of("0123456789") != std::string::npos)
    throw DataError(fmt::format("dataset '{}': the part after '#' must be a row count, e.g. data.jsonl#1000", spec));
  out.path = spec.substr(0, hash);
  out.limit = std::stoull(count);
  return out;
}

std::vector<Row> load_jsonl(const std::string& path) {
  return parse_jsonl(path, read_file(path), std::nullopt, nullptr);
}

std::vector<Row> load_rows(const std::string& spec_text, BadRows* bad) {
  BadRows strict;
  if (!bad) bad = &strict;
  DatasetSpec spec = DatasetSpec::parse(spec_text);
  std::string text = read_file(spec.path);
  size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos || text[first] != '[') return parse_jsonl(spec.path, text, spec.limit, bad);

  nlohmann::json array;
  try {
    array = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw DataError(fmt::format("{}:{}: malformed JSON array: {}", spec.path, line_of_byte(text, e.byte), e.what()));
  }
  std::vector<Row> rows;
  for (size_t i = 0; i < array.size() && (!spec.limit || rows.size() < *spec.limit); ++i) {
    if (!array[i].is_object()) {
      bad->handle(fmt::format("{}: element {} of the array is {}, expected an object", spec.path, i,
                              array[i].type_name()));
      continue;
    }
    rows.push_back(Row{std::move(array[i]), fmt::format("{}[{}]", spec.path, i)});
  }
  return rows;
}

nlohmann::json prompt_messages(const Row& row, const std::string& system) {
  nlohmann::json messages = nlohmann::json::array();
  const auto& c = row.columns;
  if (c.contains("messages")) {
    if (!c["messages"].is_array())
      throw DataError(fmt::format("{}: column 'messages' must be a list of {{role, content}} objects", row.source));
    for (const auto& m : c["messages"]) {
      if (!m.is_object() || !m.contains("role") || !m.contains("content"))
        throw DataError(fmt::format("{}: each message needs 'role' and 'content'", row.source));
      messages.push_back({{"role", m["role"]}, {"content", m["content"]}});
    }
    // The last assistant turn is the reference answer, not part of the prompt.
    if (!messages.empty() && messages.back()["role"] == "assistant") messages.erase(messages.size() - 1);
  } else {
    const char* text_column = nullptr;
    for (const char* name : {"query", "problem", "prompt"})
      if (c.contains(name) && c[name].is_string()) {
        text_column = name;
        break;
      }
    if (!text_column)
      throw DataError(fmt::format("{}: the row has no prompt: give a 'messages' list or a 'query', 'problem' or "
                                  "'prompt' text column",
                                  row.source));
    messages.push_back({{"role", "user"}, {"content", c[text_column]}});
  }
  if (!system.empty() && (messages.empty() || messages[0]["role"] != "system"))
    messages.insert(messages.begin(), nlohmann::json::object({{"role", "system"}, {"content", system}}));
  return messages;
}

}  // namespace grpo::data

namespace grpo::data {

std::string load_system_prompt(const std::string& value) {
  if (value.empty() || value.size() > 4096 || value.find('\n') != std::string::npos) return value;
  std::ifstream in(value, std::ios::binary);
  if (!in) return value;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace grpo::data
