// One column chunk's pages — dictionary, data v1 and v2 — decompressed and
// decoded into repetition levels, definition levels and values.
#pragma once

#include <cstdint>
#include <istream>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/parquet/parquet_meta.h"

namespace grpo::data::parquet {

// Reads [offset, offset + size) of the file; throws ParquetError when the file is shorter.
std::string read_range(std::istream& in, int64_t offset, int64_t size);

struct Leaf {
  const SchemaNode* node = nullptr;
  std::vector<size_t> chain;  // schema indices from the root's child down to this leaf
  int max_def = 0, max_rep = 0;
  std::string name;  // dotted path, for messages
};

struct ColumnData {
  std::vector<uint16_t> rep, def;  // one each per entry (all zero when the max level is 0)
  std::vector<nlohmann::json> values;  // one per entry whose def is max_def, in order
  size_t replaced = 0;  // text sequences that were not UTF-8, each read as U+FFFD
};

// Decodes pages until more than `records` records have begun (all of them when
// nullopt), so that the first `records` are complete.
ColumnData read_column(std::istream& in, const ColumnChunk& chunk, const Leaf& leaf, std::optional<size_t> records);

}  // namespace grpo::data::parquet
