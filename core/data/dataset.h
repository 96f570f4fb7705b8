// Datasets: JSONL or a JSON array of row objects, as ms-swift reads them.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
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

// "path" or "path#N" (the first N rows).
struct DatasetSpec {
  std::string path;
  std::optional<size_t> limit;
  static DatasetSpec parse(const std::string& spec);
};

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
std::vector<Row> load_rows(const std::string& spec, BadRows* bad = nullptr);

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
