// The Parquet and CSV readers against files written by real writers — DuckDB and
// arrow-rs (parquet-wasm), see tests/data/parquet/make_fixtures.mjs — and the
// rows those writers were given, kept beside them as JSONL.
#include <filesystem>
#include <cstring>
#include <fstream>

#include <gtest/gtest.h>

#include "data/dataset.h"
#include "data/parquet/column_reader.h"
#include "data/parquet/parquet_meta.h"

namespace {

namespace fs = std::filesystem;
using grpo::data::DataError;
using grpo::data::load_rows;
using nlohmann::json;

const std::string kDir = GRPO_TEST_DATA_DIR "/parquet/";

std::vector<json> expected_rows(const std::string& jsonl) {
  std::vector<json> out;
  for (const auto& row : load_rows(kDir + jsonl)) out.push_back(row.columns);
  return out;
}

void expect_same_rows(const std::string& file, const std::vector<json>& expected, size_t count) {
  const auto rows = load_rows(kDir + file);
  ASSERT_EQ(rows.size(), count) << file;
  for (size_t i = 0; i < count; ++i)
    ASSERT_EQ(rows[i].columns, expected[i]) << file << " row " << i << "\n  read:     " << rows[i].columns.dump()
                                            << "\n  expected: " << expected[i].dump();
}

std::string bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string write_temp(const std::string& name, const std::string& bytes) {
  const fs::path dir = fs::temp_directory_path() / "grpo_parquet_test";
  fs::create_directories(dir);
  std::ofstream(dir / name, std::ios::binary) << bytes;
  return (dir / name).string();
}

std::string error_of(const std::string& spec) {
  try {
    load_rows(spec);
  } catch (const DataError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Parquet, DuckdbFilesUnderEveryCodecAndPageVersionHoldTheRowsItWasGiven) {
  const auto expected = expected_rows("duckdb_rows.jsonl");
  ASSERT_EQ(expected.size(), 3000u);
  for (const char* file : {"duckdb_snappy.parquet", "duckdb_gzip.parquet", "duckdb_zstd.parquet",
                           "duckdb_uncompressed.parquet", "duckdb_v2.parquet"})
    expect_same_rows(file, expected, expected.size());
}

TEST(Parquet, ArrowRsFilesPlainDictionaryDeltaAndByteStreamSplitHoldTheRowsItWasGiven) {
  const auto expected = expected_rows("arrow_rows.jsonl");
  ASSERT_EQ(expected.size(), 700u);
  for (const char* file : {"arrow_plain_snappy.parquet", "arrow_dictionary_gzip.parquet",
                           "arrow_v2_delta_zstd.parquet", "arrow_v2_uncompressed.parquet"})
    expect_same_rows(file, expected, expected.size());
}

TEST(Parquet, TheFixturesCoverWhatTheReaderClaims) {
  // The claims of docs/datasets.md, checked on the fixtures' own page headers:
  // each codec, both data page versions, dictionary, PLAIN and DELTA encodings.
  using namespace grpo::data::parquet;
  std::set<std::string> seen;
  for (const auto& entry : fs::directory_iterator(kDir)) {
    if (entry.path().extension() != ".parquet") continue;
    std::ifstream in(entry.path(), std::ios::binary);
    const std::string all = bytes_of(entry.path().string());
    uint32_t len = 0;  // the footer length, little-endian, at no particular alignment
    std::memcpy(&len, all.data() + all.size() - 8, sizeof len);
    size_t used = 0;
    const FileMeta meta = parse_file_meta(
        read_struct(reinterpret_cast<const uint8_t*>(all.data() + all.size() - 8 - len), len, used));
    for (const RowGroup& g : meta.row_groups)
      for (const ColumnChunk& c : g.columns) {
        seen.insert(codec_name(c.codec));
        int64_t pos = c.start;
        while (pos < c.start + c.total_compressed_size) {
          const PageHeader h = parse_page_header(read_struct(reinterpret_cast<const uint8_t*>(all.data() + pos),
                                                             all.size() - static_cast<size_t>(pos), used));
          seen.insert(h.type == PageType::DataV2 ? "page v2" : h.type == PageType::Data ? "page v1" : "dictionary page");
          if (h.type != PageType::Dictionary) seen.insert(encoding_name(h.encoding));
          pos += static_cast<int64_t>(used) + h.compressed_size;
        }
      }
  }
  for (const char* want : {"UNCOMPRESSED", "SNAPPY", "GZIP", "ZSTD", "page v1", "page v2", "dictionary page", "PLAIN",
                           "RLE_DICTIONARY", "DELTA_BINARY_PACKED", "DELTA_LENGTH_BYTE_ARRAY", "DELTA_BYTE_ARRAY",
                           "BYTE_STREAM_SPLIT"})
    EXPECT_TRUE(seen.count(want)) << want << " is in no fixture";
}

TEST(Parquet, NestedColumnsKeepNullsEmptyListsAndNullElements) {
  const auto rows = load_rows(kDir + "duckdb_zstd.parquet#40");
  ASSERT_EQ(rows.size(), 40u);
  // Row ids are sorted; find the rows the generator made special by their index i = (id + 5e7) / 1000003.
  int nulls = 0, empties = 0, null_elements = 0;
  for (const auto& row : rows) {
    const json& m = row.columns["messages"];
    nulls += m.is_null();
    empties += m.is_array() && m.empty();
    for (const json& t : row.columns["tags"]) null_elements += t.is_null();
    if (m.is_array())
      for (const json& turn : m) EXPECT_TRUE(turn.contains("role") && turn.contains("content")) << turn.dump();
  }
  EXPECT_GT(nulls, 0);
  EXPECT_GT(empties, 0);
  EXPECT_GT(null_elements, 0);
}

TEST(Parquet, ARowLimitStopsInsideTheFirstRowGroupAndSpansRowGroups) {
  const auto expected = expected_rows("duckdb_rows.jsonl");
  for (size_t n : {1u, 7u, 2048u, 2049u, 2999u}) {
    const auto rows = load_rows(kDir + "duckdb_snappy.parquet#" + std::to_string(n));
    ASSERT_EQ(rows.size(), n);
    EXPECT_EQ(rows.back().columns, expected[n - 1]) << n;
  }
  // The second row group is destroyed: reading all of it fails naming the column,
  // reading #100 never touches it.
  std::string bytes = bytes_of(kDir + "duckdb_snappy.parquet");
  using namespace grpo::data::parquet;
  uint32_t len = 0;
  std::memcpy(&len, bytes.data() + bytes.size() - 8, sizeof len);
  size_t used = 0;
  const FileMeta meta = parse_file_meta(
      read_struct(reinterpret_cast<const uint8_t*>(bytes.data() + bytes.size() - 8 - len), len, used));
  ASSERT_GE(meta.row_groups.size(), 2u);
  const ColumnChunk& second = meta.row_groups[1].columns[0];
  for (int64_t k = 0; k < 16; ++k) bytes[static_cast<size_t>(second.start + k)] = '\xff';
  const std::string broken = write_temp("second_group_broken.parquet", bytes);
  EXPECT_EQ(load_rows(broken + "#100").size(), 100u);
  const std::string error = error_of(broken);
  EXPECT_NE(error.find(broken), std::string::npos) << error;
  EXPECT_NE(error.find("column 'id'"), std::string::npos) << error;
}

TEST(Parquet, CorruptFilesAreErrorsNamingTheFileAndColumn) {
  const std::string good = bytes_of(kDir + "duckdb_gzip.parquet");
  // Not Parquet at all, and a file cut short (its footer gone).
  std::string error = error_of(write_temp("text.parquet", "problem,solution\n1+1,2\n"));
  EXPECT_NE(error.find("not a Parquet file"), std::string::npos) << error;
  error = error_of(write_temp("cut.parquet", good.substr(0, good.size() / 2)));
  EXPECT_NE(error.find("cut.parquet"), std::string::npos) << error;
  // A footer whose length points outside the file.
  std::string bad_length = good;
  bad_length[bad_length.size() - 5] = '\x7f';
  error = error_of(write_temp("bad_length.parquet", bad_length));
  EXPECT_NE(error.find("corrupt Parquet footer"), std::string::npos) << error;
  // Compressed bytes changed inside every page of the file: each is an error
  // naming a column (a gzip stream checks itself), never a crash or garbage rows.
  size_t refused = 0;
  for (size_t at = 4; at + 64 < good.size() / 2; at += 997) {
    std::string hit = good;
    for (size_t k = 0; k < 8; ++k) hit[at + k] = static_cast<char>(hit[at + k] ^ 0x5a);
    const std::string path = write_temp("flipped.parquet", hit);
    try {
      load_rows(path);
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find("column '"), std::string::npos) << e.what();
      ++refused;
    }
  }
  EXPECT_GT(refused, 10u);  // flips inside compressed pages are caught, not read as rows
}

TEST(Csv, DuckdbCsvReadsAsPandasTypesIt) {
  const auto rows = load_rows(kDir + "hub/train.csv");
  const auto expected = expected_rows("hub/rows.jsonl");
  ASSERT_EQ(rows.size(), 80u);
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].columns["problem"], expected[i]["problem"]);
    // An all-digit column is integers, as pandas (and so `datasets`) reads it.
    EXPECT_EQ(rows[i].columns["solution"], std::stoll(expected[i]["solution"].get<std::string>()));
    EXPECT_EQ(rows[i].columns["id"], expected[i]["id"]);
  }
}

TEST(Csv, QuotesLineBreaksNullsAndBadRows) {
  const std::string path = write_temp("quoted.csv",
                                      "query,response,score\r\n"
                                      "\"a, \"\"b\"\"\nc\",x,1.5\r\n"
                                      ",y,\r\n"
                                      "plain,z,2\r\n");
  const auto rows = load_rows(path);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].columns["query"], "a, \"b\"\nc");
  EXPECT_EQ(rows[0].columns["score"], 1.5);
  EXPECT_TRUE(rows[1].columns["query"].is_null());
  EXPECT_TRUE(rows[1].columns["score"].is_null());
  EXPECT_EQ(rows[2].columns["score"], 2.0);
  EXPECT_NE(error_of(write_temp("ragged.csv", "a,b\n1,2\n3\n")).find("ragged.csv:3: 1 fields"), std::string::npos);
  EXPECT_NE(error_of(write_temp("open.csv", "a,b\n\"1,2\n")).find("never closed"), std::string::npos);
}

}  // namespace
