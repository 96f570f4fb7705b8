// Parquet files into dataset rows: the footer, each leaf column decoded
// (column_reader.cpp), and records assembled from the repetition and
// definition levels (Dremel's algorithm) into the same JSON rows a JSONL line gives.
#include <fstream>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "data/file_rows.h"
#include "data/parquet/column_reader.h"

namespace grpo::data {
namespace {

using namespace parquet;
using nlohmann::json;

FileMeta read_footer(std::istream& in, const std::string& path) {
  in.seekg(0, std::ios::end);
  const auto size = static_cast<int64_t>(in.tellg());
  if (size < 12 || read_range(in, 0, 4) != "PAR1" || read_range(in, size - 4, 4) != "PAR1")
    throw DataError(fmt::format("{}: not a Parquet file (no PAR1 magic at its start and end)", path));
  const std::string length = read_range(in, size - 8, 4);
  const int64_t meta_size = static_cast<uint8_t>(length[0]) | static_cast<uint8_t>(length[1]) << 8 |
                            static_cast<uint8_t>(length[2]) << 16 | static_cast<int64_t>(static_cast<uint8_t>(length[3])) << 24;
  if (meta_size <= 0 || meta_size > size - 12)
    throw DataError(fmt::format("{}: corrupt Parquet footer (metadata length {} in a {}-byte file)", path, meta_size, size));
  const std::string meta = read_range(in, size - 8 - meta_size, meta_size);
  try {
    size_t used = 0;
    return parse_file_meta(read_struct(reinterpret_cast<const uint8_t*>(meta.data()), meta.size(), used));
  } catch (const ParquetError& e) {
    throw DataError(fmt::format("{}: corrupt Parquet footer: {}", path, e.what()));
  }
}

void collect_leaves(const FileMeta& meta, size_t index, Leaf at, std::vector<Leaf>& out) {
  const SchemaNode& node = meta.schema[index];
  at.chain.push_back(index);
  at.max_def += node.repetition != Repetition::Required;
  at.max_rep += node.repetition == Repetition::Repeated;
  at.name += (at.name.empty() ? "" : ".") + node.name;
  if (node.children.empty()) {
    if (!node.physical) throw DataError("leaf without a type");
    at.node = &node;
    out.push_back(at);
    return;
  }
  for (size_t child : node.children) collect_leaves(meta, child, at, out);
}

// Places one leaf's entries into `rows` as nested objects and arrays named as
// the schema's nodes (the physical shape; to_logical then unwraps LIST groups).
void assemble(const FileMeta& meta, const Leaf& leaf, ColumnData& column, std::vector<json>& rows) {
  const size_t depth = leaf.chain.size();
  std::vector<int> def_at(depth), rep_at(depth);
  for (size_t i = 0, d = 0, r = 0; i < depth; ++i) {
    const SchemaNode& node = meta.schema[leaf.chain[i]];
    d += node.repetition != Repetition::Required;
    r += node.repetition == Repetition::Repeated;
    def_at[i] = static_cast<int>(d);
    rep_at[i] = static_cast<int>(r);
  }
  std::vector<size_t> index(depth, 0);  // the current element of each repeated node
  size_t next_value = 0;
  long row = -1;
  for (size_t e = 0; e < column.def.size(); ++e) {
    const int r = column.rep[e], d = column.def[e];
    if (r == 0 && ++row >= static_cast<long>(rows.size())) return;  // records past those wanted
    if (row < 0) throw ParquetError("the first entry of a column does not begin a record");
    json* parent = &rows[static_cast<size_t>(row)];
    for (size_t i = 0; i < depth; ++i) {
      const SchemaNode& node = meta.schema[leaf.chain[i]];
      const bool last = i + 1 == depth;
      json& member = (*parent)[node.name];
      if (node.repetition == Repetition::Repeated) {
        if (!member.is_array()) member = json::array();
        if (d < def_at[i]) break;  // an empty list
        if (r < rep_at[i]) index[i] = 0;
        else if (r == rep_at[i]) ++index[i];
        while (member.size() <= index[i]) member.push_back(nullptr);
        json& element = member[index[i]];
        if (last) {
          element = std::move(column.values.at(next_value++));
          break;
        }
        if (!element.is_object()) element = json::object();
        parent = &element;
      } else {
        if (d < def_at[i]) break;  // null (operator[] made it so)
        if (last) {
          member = std::move(column.values.at(next_value++));
          break;
        }
        if (!member.is_object()) member = json::object();
        parent = &member;
      }
    }
  }
}

json to_logical(const FileMeta& meta, const SchemaNode& node, json&& v, bool as_element = false);

json group_value(const FileMeta& meta, const SchemaNode& node, json&& v) {
  if (v.is_null() || node.children.empty()) return v;
  if (node.meaning == Meaning::List || node.meaning == Meaning::Map) {
    const SchemaNode& repeated = meta.schema[node.children[0]];
    json items = json::array();
    json physical = v.contains(repeated.name) ? std::move(v[repeated.name]) : json::array();
    // Three-level lists wrap each element in a group of one child; the two-level
    // form (parquet-format's backward-compatibility rules) makes the repeated node the element.
    const bool wrapped = node.meaning == Meaning::List && repeated.children.size() == 1 && repeated.name != "array" &&
                         repeated.name != node.name + "_tuple";
    for (json& item : physical) {
      if (wrapped) {
        const SchemaNode& element = meta.schema[repeated.children[0]];
        items.push_back(
            to_logical(meta, element, item.is_object() && item.contains(element.name) ? std::move(item[element.name]) : json()));
      } else {
        items.push_back(to_logical(meta, repeated, std::move(item), /*as_element=*/true));
      }
    }
    if (node.meaning == Meaning::List) return items;
    // A map of text keys is a JSON object; any other map stays a list of {key, value}.
    json object = json::object();
    for (const json& kv : items)
      if (!kv.is_object() || !kv.contains("key") || !kv["key"].is_string()) return items;
    for (json& kv : items) object[kv["key"].get<std::string>()] = kv.contains("value") ? std::move(kv["value"]) : json();
    return object;
  }
  json object = json::object();
  for (size_t c : node.children) {
    const SchemaNode& child = meta.schema[c];
    object[child.name] = to_logical(meta, child, v.contains(child.name) ? std::move(v[child.name]) : json());
  }
  return object;
}

json to_logical(const FileMeta& meta, const SchemaNode& node, json&& v, bool as_element) {
  if (node.repetition == Repetition::Repeated && !as_element) {  // a bare repeated field: a list
    json items = json::array();
    if (v.is_array())
      for (json& item : v) items.push_back(to_logical(meta, node, std::move(item), true));
    return items;
  }
  return node.children.empty() ? std::move(v) : group_value(meta, node, std::move(v));
}

}  // namespace

std::vector<Row> read_parquet_rows(const std::string& path, std::optional<size_t> limit) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError(fmt::format("cannot open dataset file '{}': check the path", path));
  FileMeta meta;
  try {
    meta = read_footer(in, path);
  } catch (const ParquetError& e) {
    throw DataError(fmt::format("{}: corrupt Parquet file: {}", path, e.what()));
  }
  const SchemaNode& root = meta.schema[0];
  std::vector<Leaf> leaves;
  for (size_t child : root.children) collect_leaves(meta, child, Leaf{}, leaves);

  in.clear();
  in.seekg(0, std::ios::end);
  const auto file_size = static_cast<int64_t>(in.tellg());
  std::vector<Row> rows;
  std::vector<size_t> replaced(leaves.size());  // per column, for one warning each
  for (size_t g = 0; g < meta.row_groups.size() && (!limit || rows.size() < *limit); ++g) {
    const RowGroup& group = meta.row_groups[g];
    if (group.columns.size() != leaves.size())
      throw DataError(fmt::format("{}: row group {} has {} columns where the schema has {}", path, g,
                                  group.columns.size(), leaves.size()));
    for (size_t c = 0; c < group.columns.size(); ++c) {
      const ColumnChunk& chunk = group.columns[c];
      // Every record has at least one entry in every column.
      if (chunk.start < 4 || chunk.total_compressed_size < 0 || chunk.start + chunk.total_compressed_size > file_size ||
          group.num_rows > chunk.num_values)
        throw DataError(fmt::format("{}: column '{}': corrupt metadata (its bytes or counts do not fit the file)",
                                    path, leaves[c].name));
    }
    size_t wanted = static_cast<size_t>(std::max<int64_t>(0, group.num_rows));
    if (limit) wanted = std::min(wanted, *limit - rows.size());
    // Every column is decoded (its memory follows the bytes it holds) and must
    // hold the records the group claims before a row is allocated for them.
    std::vector<ColumnData> columns;
    for (size_t c = 0; c < leaves.size(); ++c) {
      const Leaf& leaf = leaves[c];
      try {
        if (group.columns[c].path.size() != leaf.chain.size())
          throw ParquetError("the column chunk's path disagrees with the schema");
        columns.push_back(read_column(in, group.columns[c], leaf, wanted));
        replaced[c] += columns.back().replaced;
        size_t records = 0;
        for (uint16_t r : columns.back().rep) records += r == 0;
        if (records < wanted)
          throw ParquetError(fmt::format("it holds {} records where the row group promises {}", records, wanted));
      } catch (const ParquetError& e) {
        throw DataError(fmt::format("{}: row group {}, column '{}': {}", path, g, leaf.name, e.what()));
      }
    }
    std::vector<json> physical(wanted, json::object());
    for (size_t c = 0; c < leaves.size(); ++c) {
      try {
        assemble(meta, leaves[c], columns[c], physical);
      } catch (const ParquetError& e) {
        throw DataError(fmt::format("{}: row group {}, column '{}': {}", path, g, leaves[c].name, e.what()));
      } catch (const std::out_of_range&) {
        throw DataError(fmt::format("{}: row group {}, column '{}': its levels promise more values than its pages hold",
                                    path, g, leaves[c].name));
      }
      columns[c] = ColumnData{};  // its values now live in the rows
    }
    for (size_t i = 0; i < wanted; ++i)
      rows.push_back(Row{to_logical(meta, root, std::move(physical[i]), true), fmt::format("{}:row {}", path, rows.size())});
  }
  for (size_t c = 0; c < leaves.size(); ++c)
    if (replaced[c])
      spdlog::warn("{}: column '{}': its text is not UTF-8 in {} place(s); each invalid sequence is read as U+FFFD "
                   "(the Unicode replacement character)",
                   path, leaves[c].name, replaced[c]);
  return rows;
}

}  // namespace grpo::data
