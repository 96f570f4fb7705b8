// Reading a Parquet file's bytes: the error every part of the reader throws,
// and a cursor that never reads past its buffer (page headers, levels, values).
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace grpo::data::parquet {

// A problem in the file's bytes or a feature this reader lacks; the caller adds the file and column.
struct ParquetError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class ByteCursor {
 public:
  ByteCursor(const uint8_t* p, size_t n) : begin_(p), p_(p), end_(p + n) {}
  size_t left() const { return static_cast<size_t>(end_ - p_); }
  size_t used() const { return static_cast<size_t>(p_ - begin_); }
  const uint8_t* take(size_t n) {
    if (n > left()) throw ParquetError("the data ends early");
    const uint8_t* at = p_;
    p_ += n;
    return at;
  }
  uint8_t byte() { return *take(1); }
  // `n` bytes, little-endian.
  uint64_t le(size_t n) {
    const uint8_t* b = take(n);
    uint64_t v = 0;
    for (size_t k = 0; k < n; ++k) v |= static_cast<uint64_t>(b[k]) << (8 * k);
    return v;
  }
  // ULEB128, as Thrift's compact protocol and the RLE and DELTA encodings write integers.
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      const uint8_t b = byte();
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    throw ParquetError("malformed varint");
  }
  int64_t zigzag() {
    const uint64_t u = varint();
    return static_cast<int64_t>(u >> 1) ^ -static_cast<int64_t>(u & 1);
  }

 private:
  const uint8_t* begin_;
  const uint8_t* p_;
  const uint8_t* end_;
};

}  // namespace grpo::data::parquet
