// The readers of one dataset file, each into the same rows: JSON/JSONL here,
// Parquet (parquet_rows.cpp) and CSV (csv_rows.cpp). `limit` is the most rows
// to return; a reader stops reading once it has them.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "data/dataset.h"

namespace grpo::data {

// The file's bytes, each sequence that is not UTF-8 replaced by U+FFFD with
// one warning naming file:line:column of the first and how many there were.
std::string read_text_file(const std::string& path);
std::vector<Row> read_json_rows(const std::string& path, std::optional<size_t> limit, BadRows& bad);
std::vector<Row> read_jsonl_text(const std::string& path, const std::string& text, std::optional<size_t> limit,
                                 BadRows& bad);
// Columns typed as pandas (which the `datasets` CSV builder uses) types them:
// a column whose every non-empty cell is an integer is integers, else numbers
// are floats, else text; an empty cell is null.
std::vector<Row> read_csv_rows(const std::string& path, std::optional<size_t> limit, BadRows& bad);
// Every column, nested list<struct> ones such as `messages` included. Throws
// DataError naming the file and the column for a corrupt or unsupported file.
std::vector<Row> read_parquet_rows(const std::string& path, std::optional<size_t> limit);

}  // namespace grpo::data
