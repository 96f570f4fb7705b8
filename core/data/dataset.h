// Datasets as ms-swift reads them: JSONL, a JSON array of row objects, Parquet or
// CSV files; a directory or a hub repository (ORG/NAME) is its `train` split.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include "hub/hub_cache.h"
#include "util/user_error.h"

namespace grpo::data {

class DataError : public ::grpo::UserError {
 public:
  using UserError::UserError;
};

struct Row {
  nlohmann::json columns;  // the row object
  std::string source;      // "file:line" for error messages
};

// "path" or "path#N" (the first N rows); the path may be ms-swift's
// "ORG/NAME:subset1/subset2" for a hub dataset.
struct DatasetSpec {
  std::string path;
  std::optional<size_t> limit;
  static DatasetSpec parse(const std::string& spec);
};

// The files a dataset spec reads, in order, and the most rows to take from them together.
struct DatasetSource {
  std::string spec;  // as the user wrote it
  std::vector<std::string> files;
  std::optional<size_t> limit;
};

// A file as it is; a directory's `train` split (hub/repo_files.h); else a hub
// repository id found in the caches (hub/hub_cache.h), each of its subsets'
// `train` split. Throws UserError naming the spec and every place looked.
DatasetSource resolve_dataset(const std::string& spec, const hub::Options& hub);

// What to do with a row that cannot be used (malformed JSON, not an object, no
// prompt column): stop with an error naming file:line (the default), or skip
// it and count it when the user asks for that (`--skip_bad_rows`).
struct BadRows {
  bool skip = false;
  size_t count = 0;
  std::string first;  // the first skipped row's message, for the summary warning
  // Throws DataError(message) unless skipping.
  void handle(const std::string& message);
};

// Reads `spec`. Throws DataError naming file:line for unreadable files,
// malformed JSON and rows that are not objects (unless `bad` skips rows; a
// JSON array that does not parse as a whole is always an error).
std::vector<Row> load_rows(const DatasetSource& source, BadRows* bad = nullptr);
std::vector<Row> load_rows(const std::string& spec, BadRows* bad = nullptr, const hub::Options& hub = {});

// Reads a JSONL file of objects (e.g. completions). Same errors as load_rows.
std::vector<Row> load_jsonl(const std::string& path);

// The prompt as chat messages: the `messages` column (the last assistant turn
// dropped), or `query` / `problem` / `prompt` as one user turn; `system`
// prepended when the row has none. Throws DataError naming the row when none
// of those columns exist.
nlohmann::json prompt_messages(const Row& row, const std::string& system = "");

}  // namespace grpo::data

namespace grpo::data {

// `--system`: a string, or the path of a file holding it.
std::string load_system_prompt(const std::string& value);

}  // namespace grpo::data
