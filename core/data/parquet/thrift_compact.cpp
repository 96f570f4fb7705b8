#include "data/parquet/thrift_compact.h"

#include <cstring>

namespace grpo::data::parquet {
namespace {

enum Type : uint8_t {
  kStop = 0, kTrue = 1, kFalse = 2, kByte = 3, kI16 = 4, kI32 = 5, kI64 = 6, kDouble = 7,
  kBinary = 8, kList = 9, kSet = 10, kMap = 11, kStruct = 12
};

class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : in_(data, size) {}
  size_t used() const { return in_.used(); }

  ThriftValue read_struct(int depth) {
    if (depth > 64) throw ParquetError("structures nested too deeply");
    ThriftValue v;
    v.kind = ThriftValue::Kind::Struct;
    int16_t last = 0;
    for (;;) {
      const uint8_t header = byte();
      const uint8_t type = header & 0x0f;
      if (type == kStop) return v;
      const uint8_t delta = header >> 4;
      const int16_t id = delta ? static_cast<int16_t>(last + delta) : static_cast<int16_t>(zigzag());
      last = id;
      if (type == kTrue || type == kFalse) {
        ThriftValue b;
        b.kind = ThriftValue::Kind::Bool;
        b.i = type == kTrue;
        v.fields[id] = std::move(b);
      } else {
        v.fields[id] = value(type, depth);
      }
    }
  }

 private:
  uint8_t byte() { return in_.byte(); }
  uint64_t varint() { return in_.varint(); }
  int64_t zigzag() { return in_.zigzag(); }
  size_t length() {
    const uint64_t n = varint();
    if (n > in_.left()) throw ParquetError("a length runs past the end");
    return static_cast<size_t>(n);
  }

  ThriftValue value(uint8_t type, int depth) {
    ThriftValue v;
    switch (type) {
      case kTrue: case kFalse:  // in a list, a bool is a byte of its own
        v.kind = ThriftValue::Kind::Bool;
        v.i = byte() == 1;
        return v;
      case kByte:
        v.i = static_cast<int8_t>(byte());
        return v;
      case kI16: case kI32: case kI64:
        v.i = zigzag();
        return v;
      case kDouble: {
        const uint64_t bits = in_.le(8);
        v.kind = ThriftValue::Kind::Double;
        std::memcpy(&v.d, &bits, 8);
        return v;
      }
      case kBinary: {
        const size_t n = length();
        v.kind = ThriftValue::Kind::Binary;
        v.bytes.assign(reinterpret_cast<const char*>(in_.take(n)), n);
        return v;
      }
      case kList: case kSet: {
        const uint8_t header = byte();
        uint64_t n = header >> 4;
        if (n == 15) n = varint();
        if (n > in_.left()) throw ParquetError("a list is longer than the data");
        v.kind = ThriftValue::Kind::List;
        for (uint64_t k = 0; k < n; ++k) v.items.push_back(element(header & 0x0f, depth));
        return v;
      }
      case kMap: {
        const uint64_t n = varint();
        v.kind = ThriftValue::Kind::Map;
        if (n == 0) return v;
        if (n > in_.left()) throw ParquetError("a map is longer than the data");
        const uint8_t types = byte();
        for (uint64_t k = 0; k < n; ++k) {
          v.items.push_back(element(types >> 4, depth));
          v.items.push_back(element(types & 0x0f, depth));
        }
        return v;
      }
      case kStruct:
        return read_struct(depth + 1);
      default:
        throw ParquetError("unknown field type " + std::to_string(type));
    }
  }
  ThriftValue element(uint8_t type, int depth) { return type == kStruct ? read_struct(depth + 1) : value(type, depth); }

  ByteCursor in_;
};

}  // namespace

const ThriftValue& ThriftValue::at(int16_t id) const {
  auto it = fields.find(id);
  if (it == fields.end()) throw ParquetError("required field " + std::to_string(id) + " is missing");
  return it->second;
}

int64_t ThriftValue::integer(int16_t id, int64_t fallback) const {
  auto it = fields.find(id);
  return it == fields.end() ? fallback : it->second.i;
}

std::string ThriftValue::text(int16_t id) const {
  auto it = fields.find(id);
  return it == fields.end() ? "" : it->second.bytes;
}

ThriftValue read_struct(const uint8_t* data, size_t size, size_t& used) {
  Reader reader(data, size);
  ThriftValue v = reader.read_struct(0);
  used = reader.used();
  return v;
}

}  // namespace grpo::data::parquet
