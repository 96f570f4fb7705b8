#include "data/dataset.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "data/file_rows.h"
#include "hub/repo_files.h"

namespace grpo::data {

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
  // 19 digits always fit in 64 bits; more are refused, not wrapped or thrown as a bare out_of_range.
  constexpr uint64_t kMaxRows = 9223372036854775807ULL;
  const size_t digits = count.size() - std::min(count.find_first_not_of('0'), count.size());
  if (digits > 19 || (digits == 19 && std::stoull(count) > kMaxRows))
    throw DataError(fmt::format("dataset '{}': the row count after '#' must be at most {} (2^63 - 1)", spec, kMaxRows));
  out.path = spec.substr(0, hash);
  out.limit = std::stoull(count);
  return out;
}

namespace {

namespace fs = std::filesystem;

std::vector<std::string> split_on(const std::string& text, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t at = text.find(sep); at != std::string::npos; at = text.find(sep, start)) {
    parts.push_back(text.substr(start, at - start));
    start = at + 1;
  }
  parts.push_back(text.substr(start));
  return parts;
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

std::vector<Row> read_file_rows(const std::string& path, std::optional<size_t> limit, BadRows& bad) {
  if (ends_with(path, ".parquet")) return read_parquet_rows(path, limit);
  if (ends_with(path, ".csv")) return read_csv_rows(path, limit, bad);
  return read_json_rows(path, limit, bad);
}

}  // namespace

DatasetSource resolve_dataset(const std::string& spec_text, const hub::Options& hub_options) {
  const DatasetSpec spec = DatasetSpec::parse(spec_text);
  DatasetSource source{spec_text, {}, spec.limit};
  const std::string label = "--dataset " + spec_text;
  if (fs::is_regular_file(spec.path)) {
    source.files = {spec.path};
  } else if (fs::is_directory(spec.path)) {
    source.files = hub::split_files(spec.path, "", "train", label);
  } else {
    // ms-swift's ORG/NAME:subset1/subset2: each subset's train split, in order.
    const size_t colon = spec.path.find(':');
    const std::string id = spec.path.substr(0, colon);
    std::vector<std::string> subsets{""};
    if (colon != std::string::npos) subsets = split_on(spec.path.substr(colon + 1), '/');
    if (id.find('/') == std::string::npos || !hub::looks_like_repo_id(id))
      throw DataError(fmt::format("cannot open dataset file '{}': no such file or directory (a hub dataset is "
                                  "ORG/NAME[:SUBSET][#N])", spec.path));
    const std::string root = hub::find_repo(id, hub::RepoKind::Dataset, hub_options, "--dataset");
    for (const std::string& subset : subsets)
      for (std::string& f : hub::split_files(root, subset, "train", label)) source.files.push_back(std::move(f));
  }
  return source;
}

std::vector<Row> load_rows(const DatasetSource& source, BadRows* bad) {
  BadRows strict;
  if (!bad) bad = &strict;
  std::vector<Row> rows;
  for (const std::string& file : source.files) {
    std::optional<size_t> left;
    if (source.limit) left = *source.limit - rows.size();
    if (left && *left == 0) break;
    for (Row& row : read_file_rows(file, left, *bad)) rows.push_back(std::move(row));
  }
  return rows;
}

std::vector<Row> load_rows(const std::string& spec, BadRows* bad, const hub::Options& hub) {
  return load_rows(resolve_dataset(spec, hub), bad);
}

std::vector<Row> load_jsonl(const std::string& path) {
  BadRows strict;
  return read_jsonl_text(path, read_text_file(path), std::nullopt, strict);
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
