#include "data/parquet/parquet_meta.h"

#include <fmt/format.h>

#include "tokenizer/utf8.h"

namespace grpo::data::parquet {
namespace {

Meaning meaning_of(const ThriftValue& e) {
  if (e.has(10)) {  // LogicalType, a union: the field set names the type
    const auto& f = e.at(10).fields;
    if (f.count(1) || f.count(4) || f.count(12)) return Meaning::String;  // STRING, ENUM, JSON
    if (f.count(3)) return Meaning::List;
    if (f.count(2)) return Meaning::Map;
    if (f.count(5)) return Meaning::Decimal;
    if (f.count(6)) return Meaning::Date;
    if (f.count(14)) return Meaning::Uuid;
    if (f.count(15)) return Meaning::Float16;
    if (!f.empty()) return Meaning::Other;
  }
  switch (e.integer(6, -1)) {  // ConvertedType
    case -1: return Meaning::None;
    case 0: case 4: case 19: return Meaning::String;  // UTF8, ENUM, JSON
    case 1: case 2: return Meaning::Map;               // MAP, MAP_KEY_VALUE
    case 3: return Meaning::List;
    case 5: return Meaning::Decimal;
    case 6: return Meaning::Date;
    case 21: return Meaning::Interval;
    default: return Meaning::Other;  // integer widths, times: read by physical type
  }
}

// The flat, depth-first schema list into a tree by num_children. Real
// schemas nest a few levels; a crafted one could nest enough to overflow the stack.
size_t build(const std::vector<ThriftValue>& elements, size_t at, std::vector<SchemaNode>& out, int depth = 0) {
  if (at >= elements.size()) throw ParquetError("the schema list ends inside a group");
  if (depth > 64) throw ParquetError("the schema nests groups more than 64 deep");
  const ThriftValue& e = elements[at];
  const size_t index = out.size();
  SchemaNode node;
  node.name = tok::utf8::to_valid_lossy(e.text(4));  // a column name becomes a JSON key: UTF-8 only
  if (e.has(1)) node.physical = static_cast<Physical>(e.at(1).i);
  node.repetition = static_cast<Repetition>(e.integer(3, 0));
  node.meaning = meaning_of(e);
  node.type_length = static_cast<int32_t>(e.integer(2, 0));
  // A value of no bytes would let a page of no bytes claim any count of them (writers refuse it too).
  if (node.physical == Physical::FixedLen && node.type_length <= 0)
    throw ParquetError(fmt::format("column '{}' is a FIXED_LEN_BYTE_ARRAY of length {}", node.name, node.type_length));
  node.scale = static_cast<int32_t>(e.integer(7, 0));
  if (e.has(10) && e.at(10).has(5)) node.scale = static_cast<int32_t>(e.at(10).at(5).integer(1, node.scale));
  out.push_back(node);
  const int64_t children = e.integer(5, 0);
  if (children < 0 || children > static_cast<int64_t>(elements.size())) throw ParquetError("bad num_children");
  size_t next = at + 1;
  for (int64_t c = 0; c < children; ++c) {
    out[index].children.push_back(out.size());
    next = build(elements, next, out, depth + 1);
  }
  return next;
}

}  // namespace

FileMeta parse_file_meta(const ThriftValue& meta) {
  FileMeta out;
  const auto& elements = meta.at(2).items;
  if (elements.empty()) throw ParquetError("the schema is empty");
  if (build(elements, 0, out.schema) != elements.size()) throw ParquetError("the schema list has elements past its root");
  out.num_rows = meta.at(3).i;
  if (meta.has(4))
    for (const ThriftValue& g : meta.at(4).items) {
      RowGroup group;
      group.num_rows = g.at(3).i;
      for (const ThriftValue& c : g.at(1).items) {
        if (!c.text(1).empty()) throw ParquetError("column chunks in other files (file_path) are not supported");
        const ThriftValue& m = c.at(3);
        ColumnChunk chunk;
        for (const ThriftValue& part : m.at(3).items) chunk.path.push_back(part.bytes);
        chunk.physical = static_cast<Physical>(m.at(1).i);
        chunk.codec = static_cast<Codec>(m.at(4).i);
        chunk.num_values = m.at(5).i;
        chunk.total_compressed_size = m.at(7).i;
        chunk.start = m.at(9).i;
        // Some writers set dictionary_page_offset to 0 when there is none.
        if (m.has(11) && m.at(11).i > 0 && m.at(11).i < chunk.start) chunk.start = m.at(11).i;
        group.columns.push_back(std::move(chunk));
      }
      out.row_groups.push_back(std::move(group));
    }
  return out;
}

PageHeader parse_page_header(const ThriftValue& h) {
  PageHeader out;
  out.type = static_cast<PageType>(h.at(1).i);
  out.uncompressed_size = static_cast<int32_t>(h.at(2).i);
  out.compressed_size = static_cast<int32_t>(h.at(3).i);
  if (out.uncompressed_size < 0 || out.compressed_size < 0) throw ParquetError("negative page size");
  if (out.type == PageType::Data) {
    const ThriftValue& d = h.at(5);
    out.num_values = static_cast<int32_t>(d.at(1).i);
    out.encoding = static_cast<Encoding>(d.at(2).i);
    out.level_encoding = static_cast<Encoding>(d.at(3).i);
  } else if (out.type == PageType::DataV2) {
    const ThriftValue& d = h.at(8);
    out.num_values = static_cast<int32_t>(d.at(1).i);
    out.encoding = static_cast<Encoding>(d.at(4).i);
    out.def_bytes = static_cast<int32_t>(d.at(5).i);
    out.rep_bytes = static_cast<int32_t>(d.at(6).i);
    out.values_compressed = !d.has(7) || d.at(7).i != 0;
    if (out.def_bytes < 0 || out.rep_bytes < 0 || out.def_bytes + out.rep_bytes > out.compressed_size)
      throw ParquetError("the v2 page's level lengths exceed the page");
  } else if (out.type == PageType::Dictionary) {
    const ThriftValue& d = h.at(7);
    out.num_values = static_cast<int32_t>(d.at(1).i);
    out.encoding = static_cast<Encoding>(d.at(2).i);
  }
  if (out.num_values < 0) throw ParquetError("negative value count");
  return out;
}

const char* codec_name(Codec codec) {
  switch (codec) {
    case Codec::Uncompressed: return "UNCOMPRESSED";
    case Codec::Snappy: return "SNAPPY";
    case Codec::Gzip: return "GZIP";
    case Codec::Lzo: return "LZO";
    case Codec::Brotli: return "BROTLI";
    case Codec::Lz4: return "LZ4";
    case Codec::Zstd: return "ZSTD";
    case Codec::Lz4Raw: return "LZ4_RAW";
  }
  return "unknown";
}

const char* encoding_name(Encoding encoding) {
  switch (encoding) {
    case Encoding::Plain: return "PLAIN";
    case Encoding::PlainDictionary: return "PLAIN_DICTIONARY";
    case Encoding::Rle: return "RLE";
    case Encoding::BitPacked: return "BIT_PACKED";
    case Encoding::DeltaBinaryPacked: return "DELTA_BINARY_PACKED";
    case Encoding::DeltaLengthByteArray: return "DELTA_LENGTH_BYTE_ARRAY";
    case Encoding::DeltaByteArray: return "DELTA_BYTE_ARRAY";
    case Encoding::RleDictionary: return "RLE_DICTIONARY";
    case Encoding::ByteStreamSplit: return "BYTE_STREAM_SPLIT";
  }
  return "unknown";
}

}  // namespace grpo::data::parquet
