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
  Reader(const uint8_t* data, size_t size) : p_(data), begin_(data), end_(data + size) {}
  size_t used() const { return static_cast<size_t>(p_ - begin_); }

  ThriftValue read_struct(int depth) {
    if (depth > 64) throw ThriftError("structures nested too deeply");
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
  uint8_t byte() {
    if (p_ >= end_) throw ThriftError("truncated");
    return *p_++;
  }
  uint64_t varint() {
    uint64_t out = 0;
    for (int shift = 0; shift < 70; shift += 7) {
      const uint8_t b = byte();
      out |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return out;
    }
    throw ThriftError("malformed varint");
  }
  int64_t zigzag() {
    const uint64_t u = varint();
    return static_cast<int64_t>(u >> 1) ^ -static_cast<int64_t>(u & 1);
  }
  size_t length() {
    const uint64_t n = varint();
    if (n > static_cast<uint64_t>(end_ - p_)) throw ThriftError("a length runs past the end");
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
        if (end_ - p_ < 8) throw ThriftError("truncated");
        uint64_t bits = 0;
        for (int k = 0; k < 8; ++k) bits |= static_cast<uint64_t>(p_[k]) << (8 * k);
        p_ += 8;
        v.kind = ThriftValue::Kind::Double;
        std::memcpy(&v.d, &bits, 8);
        return v;
      }
      case kBinary: {
        const size_t n = length();
        v.kind = ThriftValue::Kind::Binary;
        v.bytes.assign(reinterpret_cast<const char*>(p_), n);
        p_ += n;
        return v;
      }
      case kList: case kSet: {
        const uint8_t header = byte();
        uint64_t n = header >> 4;
        if (n == 15) n = varint();
        if (n > static_cast<uint64_t>(end_ - p_)) throw ThriftError("a list is longer than the data");
        v.kind = ThriftValue::Kind::List;
        for (uint64_t k = 0; k < n; ++k) v.items.push_back(element(header & 0x0f, depth));
        return v;
      }
      case kMap: {
        const uint64_t n = varint();
        v.kind = ThriftValue::Kind::Map;
        if (n == 0) return v;
        if (n > static_cast<uint64_t>(end_ - p_)) throw ThriftError("a map is longer than the data");
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
        throw ThriftError("unknown field type " + std::to_string(type));
    }
  }
  ThriftValue element(uint8_t type, int depth) { return type == kStruct ? read_struct(depth + 1) : value(type, depth); }

  const uint8_t* p_;
  const uint8_t* begin_;
  const uint8_t* end_;
};

}  // namespace

const ThriftValue& ThriftValue::at(int16_t id) const {
  auto it = fields.find(id);
  if (it == fields.end()) throw ThriftError("required field " + std::to_string(id) + " is missing");
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
