// Thrift's compact protocol, which Parquet's footer and page headers use,
// decoded into a generic tree: a struct is its fields by id. The Parquet
// structs are then read from that tree by field id (parquet_meta.cpp), so
// fields this reader does not know are skipped for free.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "data/parquet/byte_cursor.h"

namespace grpo::data::parquet {

struct ThriftValue {
  enum class Kind { Bool, Int, Double, Binary, List, Struct, Map } kind = Kind::Int;
  int64_t i = 0;  // bool, byte, i16, i32, i64
  double d = 0;
  std::string bytes;
  std::vector<ThriftValue> items;          // list, set; a map's keys and values alternate
  std::map<int16_t, ThriftValue> fields;   // struct

  bool has(int16_t id) const { return fields.count(id) != 0; }
  const ThriftValue& at(int16_t id) const;  // throws ParquetError when absent
  int64_t integer(int16_t id, int64_t fallback) const;
  std::string text(int16_t id) const;  // "" when absent
};

// Decodes one struct from [data, data + size). `used` is set to its length in
// bytes. Throws ParquetError for bytes that are not one.
ThriftValue read_struct(const uint8_t* data, size_t size, size_t& used);

}  // namespace grpo::data::parquet
