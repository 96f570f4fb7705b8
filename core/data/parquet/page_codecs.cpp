#include "data/parquet/page_codecs.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include <fmt/format.h>
#include <snappy-c.h>
#include <zlib.h>
#define ZSTD_STATIC_LINKING_ONLY  // ZSTD_decompressBound (exported by every libzstd since 1.4)
#include <zstd.h>

namespace grpo::data::parquet {

// A page's claimed uncompressed size is checked against what its compressed
// bytes can expand to before a buffer of that size is allocated: a file of a
// few hundred bytes must not make the reader allocate a gigabyte.
std::string decompress(Codec codec, const uint8_t* data, size_t size, size_t expected) {
  if (expected > (size_t{1} << 30)) throw ParquetError("a page claims more than 1 GiB uncompressed");
  auto refuse_if_past = [&](size_t most, const char* codec_text) {
    if (expected > most)
      throw ParquetError(fmt::format("a {}-byte {} page claims {} bytes uncompressed, more than it can hold", size,
                                     codec_text, expected));
  };
  switch (codec) {
    case Codec::Uncompressed: refuse_if_past(size, "uncompressed"); break;
    case Codec::Snappy: refuse_if_past(size * 24 + 64, "snappy"); break;   // a 3-byte copy yields at most 64 bytes
    case Codec::Gzip: refuse_if_past(size * 1032 + 1024, "gzip"); break;  // deflate expands at most 1032:1
    case Codec::Zstd: {
      const unsigned long long most = ZSTD_decompressBound(data, size);  // exact when the frame states its size
      if (most == ZSTD_CONTENTSIZE_ERROR) throw ParquetError("a zstd page is corrupt: no valid frame");
      refuse_if_past(static_cast<size_t>(std::min<unsigned long long>(most, SIZE_MAX)), "zstd");
      break;
    }
    default: break;
  }
  std::string out(expected, '\0');
  switch (codec) {
    case Codec::Uncompressed:
      if (size != expected) throw ParquetError("an uncompressed page's sizes disagree");
      std::memcpy(out.data(), data, size);
      return out;
    case Codec::Snappy: {
      size_t n = 0;
      if (snappy_uncompressed_length(reinterpret_cast<const char*>(data), size, &n) != SNAPPY_OK || n != expected)
        throw ParquetError("a snappy page does not decompress to its stated size");
      if (snappy_uncompress(reinterpret_cast<const char*>(data), size, out.data(), &n) != SNAPPY_OK)
        throw ParquetError("a snappy page is corrupt");
      return out;
    }
    case Codec::Gzip: {
      z_stream z{};
      if (inflateInit2(&z, 15 + 32) != Z_OK) throw ParquetError("zlib could not start");
      z.next_in = const_cast<Bytef*>(data);
      z.avail_in = static_cast<uInt>(size);
      z.next_out = reinterpret_cast<Bytef*>(out.data());
      z.avail_out = static_cast<uInt>(expected);
      const int rc = inflate(&z, Z_FINISH);
      const size_t produced = z.total_out;
      inflateEnd(&z);
      if (rc != Z_STREAM_END || produced != expected) throw ParquetError("a gzip page is corrupt");
      return out;
    }
    case Codec::Zstd: {
      const size_t n = ZSTD_decompress(out.data(), expected, data, size);
      if (ZSTD_isError(n) || n != expected)
        throw ParquetError(std::string("a zstd page is corrupt: ") + (ZSTD_isError(n) ? ZSTD_getErrorName(n) : "size"));
      return out;
    }
    default:
      throw ParquetError(fmt::format("compression {} is not supported (SNAPPY, GZIP, ZSTD and none are); rewrite the "
                                     "file with one of those, e.g. pyarrow.parquet.write_table(t, f, "
                                     "compression='zstd')", codec_name(codec)));
  }
}

}  // namespace grpo::data::parquet
