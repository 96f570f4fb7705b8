#include "data/parquet/column_reader.h"

#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "data/parquet/page_codecs.h"
#include "tokenizer/utf8.h"

namespace grpo::data::parquet {
namespace {

using Bytes = ByteCursor;

// `count` values of `width` bits packed least significant bit first.
void unpack_bits(const uint8_t* p, int width, size_t count, std::vector<uint64_t>& out) {
  for (size_t k = 0; k < count; ++k) {
    uint64_t v = 0;
    const size_t bit = k * static_cast<size_t>(width);
    for (int b = 0; b < width; ++b) {
      const size_t at = bit + static_cast<size_t>(b);
      v |= static_cast<uint64_t>((p[at / 8] >> (at % 8)) & 1) << b;
    }
    out.push_back(v);
  }
}

// The RLE / bit-packing hybrid of levels and dictionary indices.
std::vector<uint64_t> decode_hybrid(Bytes bytes, int width, size_t count) {
  if (width < 0 || width > 32) throw ParquetError(fmt::format("bit width {} out of range", width));
  std::vector<uint64_t> out;
  while (out.size() < count) {
    const uint64_t header = bytes.varint();
    if (header & 1) {  // bit-packed: (header >> 1) groups of 8
      const size_t groups = static_cast<size_t>(header >> 1);
      if (groups > bytes.left()) throw ParquetError("a bit-packed run is longer than the page");
      const size_t n = groups * 8;
      const uint8_t* p = bytes.take(groups * static_cast<size_t>(width));
      unpack_bits(p, width, std::min(n, count - out.size()), out);
    } else {  // a run of one value
      const size_t n = static_cast<size_t>(header >> 1);
      const uint64_t v = bytes.le(static_cast<size_t>((width + 7) / 8));
      if (n == 0) throw ParquetError("an empty RLE run");
      out.insert(out.end(), std::min(n, count - out.size()), v);
    }
  }
  return out;
}

int bit_width(int max_level) {
  int w = 0;
  while ((1 << w) <= max_level) ++w;
  return w;
}

double half_to_float(uint16_t h) {
  const int exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  const double sign = (h & 0x8000) ? -1.0 : 1.0;
  if (exp == 0) return sign * std::ldexp(mant, -24);
  if (exp == 31) return mant ? NAN : sign * INFINITY;
  return sign * std::ldexp(mant + 1024, exp - 25);
}

// Decodes values of the leaf's type into JSON as `datasets` would show them.
class ValueDecoder {
 public:
  ValueDecoder(const SchemaNode& node, size_t& replaced) : node_(node), replaced_(replaced) {}

  nlohmann::json integer(int64_t v) const {
    if (node_.meaning == Meaning::Decimal) return static_cast<double>(v) / std::pow(10.0, node_.scale);
    return v;
  }
  // Byte values as `datasets` shows them: decimals as numbers, UUIDs in their
  // canonical text, intervals as their three parts, and every other text
  // valid UTF-8 (each invalid sequence one U+FFFD, as Python's
  // errors="replace" decodes it) — bytes never reach a JSON writer as they are.
  nlohmann::json bytes(const uint8_t* p, size_t n) const {
    switch (node_.meaning) {
      case Meaning::Float16:
        if (n == 2) return half_to_float(static_cast<uint16_t>(p[0] | (p[1] << 8)));
        break;
      case Meaning::Decimal: {  // big-endian two's complement, scaled
        // A negative value's magnitude is its bytes inverted plus one: summed
        // that way, no large power of two cancels the digits out of a double.
        const bool negative = n > 0 && (p[0] & 0x80);
        double v = 0;
        for (size_t k = 0; k < n; ++k) v = v * 256.0 + (negative ? 255 - p[k] : p[k]);
        return (negative ? -(v + 1) : v) / std::pow(10.0, node_.scale);
      }
      case Meaning::Uuid:
        if (n == 16) {
          std::string text;
          for (size_t k = 0; k < 16; ++k) text += fmt::format("{}{:02x}", k == 4 || k == 6 || k == 8 || k == 10 ? "-" : "", p[k]);
          return text;
        }
        break;
      case Meaning::Interval:  // months, days, milliseconds: little-endian unsigned 32-bit each
        if (n == 12) {
          Bytes parts(p, n);
          const uint64_t months = parts.le(4), days = parts.le(4), ms = parts.le(4);
          return {{"months", months}, {"days", days}, {"milliseconds", ms}};
        }
        break;
      default:
        break;
    }
    const std::string_view text(reinterpret_cast<const char*>(p), n);
    return tok::utf8::to_valid_lossy(text, &replaced_);
  }

  // The fewest bits one value of the leaf's type takes in a PLAIN page: a
  // count past what the page's bytes can hold is refused before decoding.
  size_t plain_bits() const {
    switch (*node_.physical) {
      case Physical::Boolean: return 1;
      case Physical::Int32: case Physical::Float: case Physical::ByteArray: return 32;  // a byte array's length prefix
      case Physical::Int64: case Physical::Double: return 64;
      case Physical::Int96: return 96;
      case Physical::FixedLen: return 8 * static_cast<size_t>(node_.type_length);
    }
    return 8;
  }

  void plain(Bytes& in, size_t count, std::vector<nlohmann::json>& out) const {
    if (count > in.left() * 8 / plain_bits())
      throw ParquetError(fmt::format("a page claims {} values in {} bytes", count, in.left()));
    switch (*node_.physical) {
      case Physical::Boolean: {
        const uint8_t* p = in.take((count + 7) / 8);
        for (size_t k = 0; k < count; ++k) out.emplace_back(((p[k / 8] >> (k % 8)) & 1) != 0);
        return;
      }
      case Physical::Int32:
        for (size_t k = 0; k < count; ++k) out.push_back(integer(static_cast<int32_t>(in.le(4))));
        return;
      case Physical::Int64:
        for (size_t k = 0; k < count; ++k) out.push_back(integer(static_cast<int64_t>(in.le(8))));
        return;
      case Physical::Float:
        for (size_t k = 0; k < count; ++k) out.emplace_back(real32(static_cast<uint32_t>(in.le(4))));
        return;
      case Physical::Double:
        for (size_t k = 0; k < count; ++k) out.emplace_back(real64(in.le(8)));
        return;
      case Physical::ByteArray:
        for (size_t k = 0; k < count; ++k) {
          const size_t n = static_cast<size_t>(in.le(4));
          out.push_back(bytes(in.take(n), n));
        }
        return;
      case Physical::FixedLen: {
        const auto n = static_cast<size_t>(node_.type_length);
        for (size_t k = 0; k < count; ++k) out.push_back(bytes(in.take(n), n));
        return;
      }
      case Physical::Int96:
        throw ParquetError("INT96 timestamps are not supported; rewrite the column as a timestamp (INT64)");
    }
  }

  // DELTA_BINARY_PACKED: blocks of miniblocks of bit-packed deltas from a first value.
  void delta_integers(Bytes& in, size_t count, std::vector<int64_t>& out) const {
    const uint64_t block = in.varint(), miniblocks = in.varint(), total = in.varint();
    int64_t value = in.zigzag();
    // Writers use blocks of 128 values; a block far larger is a claim, not data.
    if (block == 0 || block > (1 << 16) || miniblocks == 0 || block % miniblocks || (block / miniblocks) % 8)
      throw ParquetError("a DELTA_BINARY_PACKED header is malformed");
    const size_t per_mini = static_cast<size_t>(block / miniblocks);
    const size_t wanted = static_cast<size_t>(std::min<uint64_t>(total, count));
    if (wanted > 0) out.push_back(value);
    std::vector<uint64_t> deltas;
    while (out.size() < wanted) {
      const int64_t min_delta = in.zigzag();
      const uint8_t* widths = in.take(static_cast<size_t>(miniblocks));
      for (uint64_t m = 0; m < miniblocks && out.size() < wanted; ++m) {
        if (widths[m] > 64) throw ParquetError("a DELTA_BINARY_PACKED bit width exceeds 64");
        deltas.clear();
        // The miniblock's bytes are all consumed (what follows is read after them), its values only as needed.
        unpack_bits(in.take(per_mini * widths[m] / 8), widths[m], std::min(per_mini, wanted - out.size()), deltas);
        for (uint64_t d : deltas) {
          if (out.size() == wanted) break;
          value = static_cast<int64_t>(static_cast<uint64_t>(value) + static_cast<uint64_t>(min_delta) + d);
          out.push_back(value);
        }
      }
    }
  }

  void decode(Encoding encoding, Bytes& in, size_t count, std::vector<nlohmann::json>& out) const {
    switch (encoding) {
      case Encoding::Plain:
        return plain(in, count, out);
      case Encoding::DeltaBinaryPacked: {
        std::vector<int64_t> v;
        delta_integers(in, count, v);
        // An INT32 column's deltas wrap at 32 bits as the writer computed them (2^31 - 1 follows -2^31 by -1),
        // so only the low 32 bits of the sum are the value.
        const bool int32 = *node_.physical == Physical::Int32;
        for (int64_t x : v) out.push_back(integer(int32 ? static_cast<int32_t>(static_cast<uint32_t>(x)) : x));
        return;
      }
      case Encoding::DeltaLengthByteArray: {
        std::vector<int64_t> lengths;
        delta_integers(in, count, lengths);
        for (int64_t n : lengths) out.push_back(bytes(in.take(static_cast<size_t>(n)), static_cast<size_t>(n)));
        return;
      }
      case Encoding::DeltaByteArray: {  // each value: a prefix of the previous one, then a suffix
        std::vector<int64_t> prefixes, suffixes;
        delta_integers(in, count, prefixes);
        delta_integers(in, count, suffixes);
        std::string last;
        for (size_t k = 0; k < prefixes.size() && k < suffixes.size(); ++k) {
          if (prefixes[k] < 0 || static_cast<size_t>(prefixes[k]) > last.size())
            throw ParquetError("a DELTA_BYTE_ARRAY prefix is longer than the previous value");
          const auto n = static_cast<size_t>(suffixes[k]);
          last = last.substr(0, static_cast<size_t>(prefixes[k])) + std::string(reinterpret_cast<const char*>(in.take(n)), n);
          out.push_back(bytes(reinterpret_cast<const uint8_t*>(last.data()), last.size()));
        }
        return;
      }
      case Encoding::Rle: {  // booleans in v2 files: a 4-byte length, then the hybrid at bit width 1
        if (*node_.physical != Physical::Boolean) break;
        const auto n = static_cast<size_t>(in.le(4));
        for (uint64_t bit : decode_hybrid(Bytes(in.take(n), n), 1, count)) out.emplace_back(bit != 0);
        return;
      }
      case Encoding::ByteStreamSplit: {  // byte b of value k at p[b * count + k]
        const Physical physical = *node_.physical;
        if (physical == Physical::FixedLen) {  // half floats, decimals, UUIDs: each value's bytes gathered
          const auto width = static_cast<size_t>(node_.type_length);
          const uint8_t* p = in.take(count * width);
          std::vector<uint8_t> value(width);
          for (size_t k = 0; k < count; ++k) {
            for (size_t b = 0; b < width; ++b) value[b] = p[b * count + k];
            out.push_back(bytes(value.data(), width));
          }
          return;
        }
        const size_t width = physical == Physical::Float || physical == Physical::Int32 ? 4 : 8;
        const uint8_t* p = in.take(count * width);
        for (size_t k = 0; k < count; ++k) {
          uint64_t bits = 0;
          for (size_t b = 0; b < width; ++b) bits |= static_cast<uint64_t>(p[b * count + k]) << (8 * b);
          if (*node_.physical == Physical::Float) out.emplace_back(real32(static_cast<uint32_t>(bits)));
          else if (*node_.physical == Physical::Double) out.emplace_back(real64(bits));
          else out.push_back(integer(width == 4 ? static_cast<int32_t>(bits) : static_cast<int64_t>(bits)));
        }
        return;
      }
      default:
        break;
    }
    throw ParquetError(fmt::format("encoding {} is not supported for values of this column", encoding_name(encoding)));
  }

 private:
  static double real32(uint32_t bits) {
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  static double real64(uint64_t bits) {
    double d;
    std::memcpy(&d, &bits, 8);
    return d;
  }
  const SchemaNode& node_;
  size_t& replaced_;  // counted for the warning that names the column
};

std::vector<uint16_t> levels(Bytes bytes, int max_level, size_t count) {
  std::vector<uint16_t> out;
  for (uint64_t v : decode_hybrid(bytes, bit_width(max_level), count)) {
    if (v > static_cast<uint64_t>(max_level)) throw ParquetError("a level exceeds the schema's maximum");
    out.push_back(static_cast<uint16_t>(v));
  }
  return out;
}

// v1 pages prefix each level run with its 4-byte length.
Bytes take_v1_levels(Bytes& page, Encoding encoding) {
  if (encoding != Encoding::Rle)
    throw ParquetError(fmt::format("levels encoded {} are not supported (RLE is)", encoding_name(encoding)));
  const auto n = static_cast<size_t>(page.le(4));
  return Bytes(page.take(n), n);
}

}  // namespace

std::string read_range(std::istream& in, int64_t offset, int64_t size) {
  if (offset < 0 || size < 0) throw ParquetError("a negative offset or size in the metadata");
  std::string out(static_cast<size_t>(size), '\0');
  in.clear();
  in.seekg(offset);
  in.read(out.data(), size);
  if (in.gcount() != size) throw ParquetError(fmt::format("the file ends before byte {}", offset + size));
  return out;
}

ColumnData read_column(std::istream& in, const ColumnChunk& chunk, const Leaf& leaf, std::optional<size_t> records) {
  if (chunk.physical != *leaf.node->physical) throw ParquetError("the column chunk's type disagrees with the schema");
  ColumnData out;
  const ValueDecoder decoder(*leaf.node, out.replaced);
  std::vector<nlohmann::json> dictionary;
  bool has_dictionary = false;
  size_t begun = 0;  // records begun so far
  int64_t pos = chunk.start;
  const int64_t end = chunk.start + chunk.total_compressed_size;
  while (pos < end && (!records || begun <= *records)) {
    // The header's length is known only once decoded: read a window, widen it if the header is longer.
    ThriftValue raw;
    size_t used = 0;
    for (int64_t window = std::min<int64_t>(end - pos, 1024);; window = std::min<int64_t>(end - pos, window * 8)) {
      const std::string head = read_range(in, pos, window);
      try {
        raw = read_struct(reinterpret_cast<const uint8_t*>(head.data()), head.size(), used);
        break;
      } catch (const ParquetError& e) {
        if (window == end - pos) throw ParquetError(std::string("a page header is corrupt: ") + e.what());
      }
    }
    PageHeader h;
    try {
      h = parse_page_header(raw);
    } catch (const ParquetError& e) {
      throw ParquetError(std::string("a page header is corrupt: ") + e.what());
    }
    pos += static_cast<int64_t>(used);
    if (h.compressed_size > end - pos) throw ParquetError("a page runs past its column chunk");
    const std::string body = read_range(in, pos, h.compressed_size);
    pos += h.compressed_size;
    const auto* b = reinterpret_cast<const uint8_t*>(body.data());

    if (h.type == PageType::Dictionary) {
      const std::string page = decompress(chunk.codec, b, body.size(), static_cast<size_t>(h.uncompressed_size));
      Bytes values(reinterpret_cast<const uint8_t*>(page.data()), page.size());
      dictionary.clear();
      decoder.plain(values, static_cast<size_t>(h.num_values), dictionary);
      has_dictionary = true;
      continue;
    }
    if (h.type != PageType::Data && h.type != PageType::DataV2) continue;  // index pages

    const auto n = static_cast<size_t>(h.num_values);
    // Real writers put at most some 20,000 values in a page; a count far past what
    // the page's bytes could describe is corruption, refused before allocating for it.
    if (h.num_values > chunk.num_values || n > 64 * (static_cast<size_t>(h.uncompressed_size) + 1024))
      throw ParquetError(fmt::format("a page claims {} values", h.num_values));
    std::string page;  // what the values are read from
    std::vector<uint16_t> rep, def;
    Bytes values(nullptr, 0);
    if (h.type == PageType::Data) {
      page = decompress(chunk.codec, b, body.size(), static_cast<size_t>(h.uncompressed_size));
      Bytes all(reinterpret_cast<const uint8_t*>(page.data()), page.size());
      if (leaf.max_rep > 0) rep = levels(take_v1_levels(all, h.level_encoding), leaf.max_rep, n);
      if (leaf.max_def > 0) def = levels(take_v1_levels(all, h.level_encoding), leaf.max_def, n);
      values = all;
    } else {
      const auto level_bytes = static_cast<size_t>(h.rep_bytes + h.def_bytes);
      if (leaf.max_rep > 0) rep = levels(Bytes(b, static_cast<size_t>(h.rep_bytes)), leaf.max_rep, n);
      if (leaf.max_def > 0) def = levels(Bytes(b + h.rep_bytes, static_cast<size_t>(h.def_bytes)), leaf.max_def, n);
      const size_t expected = static_cast<size_t>(h.uncompressed_size) - level_bytes;
      page = h.values_compressed ? decompress(chunk.codec, b + level_bytes, body.size() - level_bytes, expected)
                                 : body.substr(level_bytes);
      values = Bytes(reinterpret_cast<const uint8_t*>(page.data()), page.size());
    }
    if (rep.empty()) rep.assign(n, 0);
    if (def.empty()) def.assign(n, 0);
    size_t present = 0;
    for (uint16_t d : def) present += d == leaf.max_def;
    if (h.encoding == Encoding::PlainDictionary || h.encoding == Encoding::RleDictionary) {
      if (!has_dictionary) throw ParquetError("a dictionary-encoded page comes without a dictionary page");
      const uint8_t width = present ? *values.take(1) : 0;
      for (uint64_t index : decode_hybrid(values, width, present)) {
        if (index >= dictionary.size()) throw ParquetError("a dictionary index is out of range");
        out.values.push_back(dictionary[index]);
      }
    } else {
      const size_t before = out.values.size();
      decoder.decode(h.encoding, values, present, out.values);
      if (out.values.size() - before != present) throw ParquetError("a page holds fewer values than its levels say");
    }
    for (uint16_t r : rep) begun += r == 0;
    out.rep.insert(out.rep.end(), rep.begin(), rep.end());
    out.def.insert(out.def.end(), def.begin(), def.end());
  }
  return out;
}

}  // namespace grpo::data::parquet
