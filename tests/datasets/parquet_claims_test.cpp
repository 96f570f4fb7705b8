// Parquet files of a few hundred bytes whose counts and sizes claim far more
// than their bytes hold. Each is read in a child process whose address space
// is capped at 512 MiB above what it already uses: a reader that believes a
// claim and allocates for it fails there with std::bad_alloc; the reader must
// instead refuse the file with an error naming it, the row group and the column.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <zlib.h>

#include <gtest/gtest.h>

#include "data/dataset.h"
#include "data/file_rows.h"
#include "datasets/parquet_forge.h"

using namespace grpo::testing;
namespace fs = std::filesystem;

namespace {

std::string write_temp(const std::string& name, const std::string& bytes) {
  const fs::path dir = fs::temp_directory_path() / "grpo_parquet_claims_test";
  fs::create_directories(dir);
  std::ofstream(dir / name, std::ios::binary) << bytes;
  return (dir / name).string();
}

size_t address_space_in_use() {
  std::ifstream statm("/proc/self/statm");
  size_t pages = 0;
  statm >> pages;
  return pages * static_cast<size_t>(::sysconf(_SC_PAGESIZE));
}

// What reading `path` ends in, read in a child under the memory cap:
// "error: <DataError's text>", "rows: N", or "other: <exception>".
std::string outcome_of_reading(const std::string& path) {
  const std::string report = path + ".outcome";
  fs::remove(report);
  const pid_t pid = ::fork();
  if (pid == 0) {
    const rlim_t cap = address_space_in_use() + (rlim_t{512} << 20);
    const rlimit limit{cap, cap};
    ::setrlimit(RLIMIT_AS, &limit);
    std::string out;
    try {
      out = "rows: " + std::to_string(grpo::data::read_parquet_rows(path, std::nullopt).size());
    } catch (const grpo::data::DataError& e) {
      out = std::string("error: ") + e.what();
    } catch (const std::exception& e) {
      out = std::string("other: ") + e.what();
    }
    std::ofstream(report) << out;
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  std::ifstream in(report);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return text.empty() ? "the child died (status " + std::to_string(status) + ")" : text;
}

std::string int32s(std::initializer_list<int32_t> values) {
  std::string out;
  for (int32_t v : values)
    for (int b = 0; b < 4; ++b) out += static_cast<char>(static_cast<uint32_t>(v) >> (8 * b) & 0xff);
  return out;
}

void expect_refused(const std::string& name, const std::string& file, const std::string& why) {
  const std::string path = write_temp(name, file);
  const std::string got = outcome_of_reading(path);
  EXPECT_EQ(got.rfind("error: " + path + ": row group 0, column 'x': ", 0), 0u) << got;
  EXPECT_NE(got.find(why), std::string::npos) << got;
}

}  // namespace

TEST(ParquetClaims, TheForgedFileReadsWhenItsClaimsAreTrue) {
  const std::string path =
      write_temp("true.parquet", forge_parquet({1, 0, 0, 3, 3}, {{0, 3, 0, -1, int32s({7, 8, 9})}}));
  EXPECT_EQ(outcome_of_reading(path), "rows: 3");
  const auto rows = grpo::data::read_parquet_rows(path, std::nullopt);
  EXPECT_EQ(rows[2].columns["x"], 9);
}

// Before: 2^40 rows were allocated as JSON objects (std::bad_alloc); 30
// million took 2.5 GB before the error.
TEST(ParquetClaims, ARowCountPastTheRecordsItsColumnsHoldIsRefusedBeforeRowsAreMade) {
  for (int64_t rows : {int64_t{1} << 40, int64_t{30'000'000}})
    expect_refused("rows.parquet", forge_parquet({1, 0, 0, rows, rows}, {{0, 1, 0, -1, int32s({7})}}),
                   "it holds 1 records where the row group promises " + std::to_string(rows));
}

// Before: a dictionary page of 2^31 - 1 values of zero bytes each decoded
// 2^31 empty strings from no bytes at all.
TEST(ParquetClaims, ValuesOfNoBytesAndCountsPastAPagesBytesAreRefused) {
  const std::string path = write_temp("zero_width.parquet", forge_parquet({7, 0}, {{2, 2147483647, 0, -1, ""}}));
  const std::string got = outcome_of_reading(path);
  EXPECT_NE(got.find("column 'x' is a FIXED_LEN_BYTE_ARRAY of length 0"), std::string::npos) << got;
  expect_refused("dictionary.parquet", forge_parquet({7, 1}, {{2, 2147483647, 0, -1, "a"}}),
                 "a page claims 2147483647 values in 1 bytes");
}

// Before: a DELTA_BINARY_PACKED block of 2^34 values of width 0 was unpacked
// whole (128 GiB) for the two values the page holds.
TEST(ParquetClaims, ADeltaBlockFarPastWhatWritersUseIsRefused) {
  ThriftWriter body;
  body.varint(uint64_t{1} << 34);  // values per block
  body.varint(1);                  // miniblocks per block
  body.varint(2);                  // values in all
  body.zigzag(5);                  // the first value
  body.zigzag(0);                  // the block's smallest delta
  std::string bytes = body.bytes() + std::string(1, '\0');  // the miniblock's bit width: 0
  expect_refused("delta.parquet", forge_parquet({1, 0, 0, 2, 2}, {{0, 2, 5, -1, bytes}}),
                 "a DELTA_BINARY_PACKED header is malformed");
}

// Before: the claimed uncompressed size (here 1 GiB - 1) was allocated before
// the page was decompressed.
TEST(ParquetClaims, AnUncompressedSizePastWhatTheCodecCanExpandToIsRefused) {
  const std::string plain = int32s({7});
  std::string gz(compressBound(plain.size()) + 32, '\0');
  uLongf gz_size = gz.size();
  ASSERT_EQ(compress2(reinterpret_cast<Bytef*>(gz.data()), &gz_size, reinterpret_cast<const Bytef*>(plain.data()),
                      plain.size(), 9),
            Z_OK);
  gz.resize(gz_size);  // a zlib stream: the reader's inflate takes zlib and gzip headers alike
  expect_refused("gzip.parquet", forge_parquet({1, 0, 2}, {{0, 1, 0, (1 << 30) - 1, gz}}),
                 "gzip page claims 1073741823 bytes uncompressed, more than it can hold");
  expect_refused("plain.parquet", forge_parquet({1, 0, 0}, {{0, 1, 0, 1 << 29, plain}}),
                 "uncompressed page claims 536870912 bytes uncompressed");
}

// Found by parquet_fuzz: a column name that is not UTF-8 became a JSON key,
// and the first JSON writer threw. Names are repaired as values are.
TEST(ParquetClaims, AColumnNameThatIsNotUtf8IsRepaired) {
  ForgedColumn column{1, 0, 0, 1, 1};
  column.name = "n\xFF";
  const std::string file = forge_parquet(column, {{0, 1, 0, -1, int32s({7})}});
  const auto rows = grpo::data::read_parquet_rows(write_temp("name.parquet", file), std::nullopt);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].columns.dump(), "{\"n\xEF\xBF\xBD\":7}");
}
