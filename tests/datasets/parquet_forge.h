// Parquet files written byte by byte for tests of what a file may claim:
// Thrift's compact protocol (the footer and page headers) and a file of one
// column, one row group and the pages given.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace grpo::testing {

// Thrift compact protocol: fields by id, structs nested with begin()/end().
class ThriftWriter {
 public:
  enum Type { kI32 = 5, kI64 = 6, kBinary = 8, kList = 9, kStruct = 12 };
  void i32(int id, int64_t v) { field(id, kI32), zigzag(v); }
  void i64(int id, int64_t v) { field(id, kI64), zigzag(v); }
  void binary(int id, const std::string& s) { field(id, kBinary), varint(s.size()), out_ += s; }
  void begin(int id) { field(id, kStruct), last_.push_back(0); }  // a struct field
  void begin_element() { last_.push_back(0); }                     // a struct inside a list
  void end() { out_ += '\0', last_.pop_back(); }
  void list(int id, Type element, size_t n);  // then the n elements
  void list_binary(int id, const std::vector<std::string>& items);
  void varint(uint64_t v);
  void zigzag(int64_t v) { varint((static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63)); }
  const std::string& bytes() const { return out_; }

 private:
  void field(int id, int type);
  std::string out_;
  std::vector<int> last_{0};
};

struct ForgedColumn {
  int physical = 1;     // parquet Type: 1 INT32, 7 FIXED_LEN_BYTE_ARRAY
  int type_length = 0;  // FIXED_LEN_BYTE_ARRAY
  int codec = 0;        // 0 none, 2 gzip, 6 zstd
  int64_t num_rows = 1, num_values = 1;  // the row group's and the column chunk's claims
  std::string name = "x";
};

struct ForgedPage {
  int type = 0;  // 0 data (v1), 2 dictionary
  int32_t num_values = 1;
  int encoding = 0;                // 0 PLAIN, 5 DELTA_BINARY_PACKED
  int32_t uncompressed_size = -1;  // -1: the body's size
  std::string body;
};

// "PAR1", each page's header and body, the footer: one required column.
std::string forge_parquet(const ForgedColumn& column, const std::vector<ForgedPage>& pages);

}  // namespace grpo::testing
