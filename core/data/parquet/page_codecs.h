// A Parquet page's bytes under its column chunk's codec (none, snappy, gzip,
// zstd), with its claimed uncompressed size checked before it is allocated.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "data/parquet/byte_cursor.h"
#include "data/parquet/parquet_meta.h"

namespace grpo::data::parquet {

// The `expected` bytes `data[0, size)` decompresses to; ParquetError when the
// codec is not supported, the page is corrupt, or `expected` is more than
// the codec can expand `size` bytes to.
std::string decompress(Codec codec, const uint8_t* data, size_t size, size_t expected);

}  // namespace grpo::data::parquet
