// The parts of Parquet's metadata (parquet.thrift) a reader of datasets needs:
// the schema tree, row groups and their column chunks, and page headers.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "data/parquet/thrift_compact.h"

namespace grpo::data::parquet {

enum class Physical { Boolean = 0, Int32 = 1, Int64 = 2, Int96 = 3, Float = 4, Double = 5, ByteArray = 6, FixedLen = 7 };
enum class Repetition { Required = 0, Optional = 1, Repeated = 2 };
// What a value means beyond its physical type (ConvertedType and LogicalType, merged).
enum class Meaning { None, String, List, Map, Decimal, Date, Float16, Uuid, Interval, Other };

enum class Codec { Uncompressed = 0, Snappy = 1, Gzip = 2, Lzo = 3, Brotli = 4, Lz4 = 5, Zstd = 6, Lz4Raw = 7 };
enum class Encoding { Plain = 0, PlainDictionary = 2, Rle = 3, BitPacked = 4, DeltaBinaryPacked = 5,
                      DeltaLengthByteArray = 6, DeltaByteArray = 7, RleDictionary = 8, ByteStreamSplit = 9 };
enum class PageType { Data = 0, Index = 1, Dictionary = 2, DataV2 = 3 };

// One node of the schema tree; the root is nodes[0] of FileMeta::schema.
struct SchemaNode {
  std::string name;
  std::optional<Physical> physical;  // set for leaves only
  Repetition repetition = Repetition::Required;
  Meaning meaning = Meaning::None;
  int32_t type_length = 0;  // FIXED_LEN_BYTE_ARRAY
  int32_t scale = 0;        // DECIMAL
  std::vector<size_t> children;  // indices into FileMeta::schema
};

struct ColumnChunk {
  std::vector<std::string> path;  // path_in_schema
  Physical physical = Physical::Int32;
  Codec codec = Codec::Uncompressed;
  int64_t num_values = 0;
  int64_t start = 0;  // first page: the dictionary page if any, else the first data page
  int64_t total_compressed_size = 0;
};

struct RowGroup {
  int64_t num_rows = 0;
  std::vector<ColumnChunk> columns;
};

struct FileMeta {
  std::vector<SchemaNode> schema;
  int64_t num_rows = 0;
  std::vector<RowGroup> row_groups;
};

struct PageHeader {
  PageType type = PageType::Data;
  int32_t uncompressed_size = 0, compressed_size = 0;
  int32_t num_values = 0;
  Encoding encoding = Encoding::Plain;
  Encoding level_encoding = Encoding::Rle;  // v1 pages: definition (and repetition) levels
  // Data page v2: the levels' byte lengths (stored uncompressed), and whether the values are compressed.
  int32_t def_bytes = 0, rep_bytes = 0;
  bool values_compressed = true;
};

// Throw ParquetError for a metadata structure they cannot read.
FileMeta parse_file_meta(const ThriftValue& meta);
PageHeader parse_page_header(const ThriftValue& header);

const char* codec_name(Codec codec);
const char* encoding_name(Encoding encoding);

}  // namespace grpo::data::parquet
