#include "datasets/parquet_forge.h"

namespace grpo::testing {

void ThriftWriter::varint(uint64_t v) {
  while (v >= 0x80) out_ += static_cast<char>((v & 0x7f) | 0x80), v >>= 7;
  out_ += static_cast<char>(v);
}

void ThriftWriter::field(int id, int type) {
  const int delta = id - last_.back();
  if (delta > 0 && delta <= 15) {
    out_ += static_cast<char>(delta << 4 | type);
  } else {
    out_ += static_cast<char>(type);
    zigzag(id);
  }
  last_.back() = id;
}

void ThriftWriter::list(int id, Type element, size_t n) {
  field(id, kList);
  if (n < 15) {
    out_ += static_cast<char>(n << 4 | element);
  } else {
    out_ += static_cast<char>(0xf0 | element);
    varint(n);
  }
}

void ThriftWriter::list_binary(int id, const std::vector<std::string>& items) {
  list(id, kBinary, items.size());
  for (const std::string& s : items) varint(s.size()), out_ += s;
}

std::string forge_parquet(const ForgedColumn& column, const std::vector<ForgedPage>& pages) {
  std::string file = "PAR1";
  const int64_t start = 4;
  for (const ForgedPage& p : pages) {
    ThriftWriter h;
    h.i32(1, p.type);
    h.i32(2, p.uncompressed_size >= 0 ? p.uncompressed_size : static_cast<int32_t>(p.body.size()));
    h.i32(3, static_cast<int32_t>(p.body.size()));
    h.begin(p.type == 2 ? 7 : 5);  // DictionaryPageHeader or DataPageHeader
    h.i32(1, p.num_values);
    h.i32(2, p.encoding);
    if (p.type != 2) h.i32(3, 3), h.i32(4, 3);  // levels: RLE
    h.end();
    h.end();
    file += h.bytes() + p.body;
  }
  const int64_t chunk_size = static_cast<int64_t>(file.size()) - start;

  ThriftWriter m;  // FileMetaData
  m.i32(1, 1);
  m.list(2, ThriftWriter::kStruct, 2);
  m.begin_element();  // the root
  m.binary(4, "schema");
  m.i32(5, 1);
  m.end();
  m.begin_element();
  m.i32(1, column.physical);
  if (column.physical == 7) m.i32(2, column.type_length);
  m.i32(3, 0);  // REQUIRED
  m.binary(4, column.name);
  m.end();
  m.i64(3, column.num_rows);
  m.list(4, ThriftWriter::kStruct, 1);
  m.begin_element();  // RowGroup
  m.list(1, ThriftWriter::kStruct, 1);
  m.begin_element();  // ColumnChunk
  m.i64(2, start);
  m.begin(3);  // ColumnMetaData
  m.i32(1, column.physical);
  m.list(2, ThriftWriter::kI32, 1);
  m.zigzag(0);
  m.list_binary(3, {column.name});
  m.i32(4, column.codec);
  m.i64(5, column.num_values);
  m.i64(6, chunk_size);
  m.i64(7, chunk_size);
  m.i64(9, start);
  m.end();
  m.end();
  m.i64(2, chunk_size);
  m.i64(3, column.num_rows);
  m.end();
  m.end();
  const auto length = static_cast<uint32_t>(m.bytes().size());
  file += m.bytes();
  for (int b = 0; b < 4; ++b) file += static_cast<char>(length >> (8 * b) & 0xff);
  return file + "PAR1";
}

}  // namespace grpo::testing
