// Parquet files pyarrow writes now, for every encoding, codec and data page
// version docs/datasets.md claims (tests/oracles/pyarrow_parquet.py), each
// read by our reader and compared row by row with pyarrow's own reading:
// the oracle is the library most datasets on the hub are written with, run at
// test time rather than files frozen when the reader was written.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "data/dataset.h"
#include "data/file_rows.h"
#include "oracles/python_oracle.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// pyarrow's files and readings, written once for the suite.
class ParquetPyarrow : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // Each file's bytes that are not UTF-8 are said once per file: 64 warnings of what the rows show anyway.
    spdlog::set_level(spdlog::level::err);
    // Per process: ctest -j runs each test of the suite as a process of its own, at once.
    dir_ = fs::temp_directory_path() / ("grpo_parquet_pyarrow_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    error_ = grpo::test::run_python(grpo::test::oracle_script("pyarrow_parquet.py") + " '" + dir_.string() + "'",
                                    dir_ / "make.log");
  }
  void SetUp() override { ASSERT_TRUE(error_.empty()) << error_; }

  static void TearDownTestSuite() {
    spdlog::set_level(spdlog::level::info);
    fs::remove_all(dir_);
  }

  static std::vector<json> cases() {
    std::vector<json> out;
    std::ifstream in(dir_ / "cases.jsonl");
    for (std::string line; std::getline(in, line);) out.push_back(json::parse(line));
    return out;
  }

  static inline fs::path dir_;
  static inline std::string error_;
};

// The first place `got` differs from pyarrow's `want`, or "" when none does.
// A float arrives as {"$float": float.hex(x)} and must be the same double bit
// for bit (every NaN equal to every NaN: Python's hex does not keep payloads).
std::string first_difference(const json& want, const json& got, const std::string& at) {
  if (want.is_object() && want.size() == 1 && want.contains("$float")) {
    const std::string hex = want["$float"];
    const std::string differs = at + ": want the float " + hex + ", got " + got.dump();
    if (!got.is_number_float()) return differs;
    const double w = std::strtod(hex.c_str(), nullptr), g = got.get<double>();
    uint64_t wb, gb;
    std::memcpy(&wb, &w, 8);
    std::memcpy(&gb, &g, 8);
    return (std::isnan(w) ? std::isnan(g) : wb == gb) ? "" : differs;
  }
  if (want.is_object() && got.is_object()) {
    if (want.size() != got.size()) return at + ": want the keys of " + want.dump() + ", got " + got.dump();
    for (const auto& [key, value] : want.items()) {
      if (!got.contains(key)) return at + ": no '" + key + "' in " + got.dump();
      if (std::string d = first_difference(value, got[key], at + "." + key); !d.empty()) return d;
    }
    return "";
  }
  if (want.is_array() && got.is_array()) {
    if (want.size() != got.size()) return at + ": want " + want.dump() + ", got " + got.dump();
    for (size_t i = 0; i < want.size(); ++i)
      if (std::string d = first_difference(want[i], got[i], at + "[" + std::to_string(i) + "]"); !d.empty()) return d;
    return "";
  }
  return want == got ? "" : at + ": want " + want.dump() + ", got " + got.dump();
}

TEST_F(ParquetPyarrow, EveryClaimedEncodingCodecAndPageVersionReadsAsPyarrowReadsIt) {
  size_t files = 0;
  for (const json& c : cases()) {
    if (c.value("refused", false)) continue;
    ++files;
    const std::string file = c["file"];
    const std::string what = file + " (" + c["encoding"].get<std::string>() + ", " + c["codec"].get<std::string>() +
                             ", data page v" + c["page"].get<std::string>().substr(0, 1) + ")";
    std::vector<grpo::data::Row> rows;
    try {
      rows = grpo::data::read_parquet_rows((dir_ / file).string(), std::nullopt);
    } catch (const std::exception& e) {
      ADD_FAILURE() << what << ": " << e.what();
      continue;
    }
    std::ifstream want_in(dir_ / c["rows"].get<std::string>());
    size_t n = 0;
    bool differed = false;  // one difference per file says which; the rest follow from it
    for (std::string line; std::getline(want_in, line); ++n) {
      if (differed || n >= rows.size()) continue;
      const std::string d = first_difference(json::parse(line), rows[n].columns, "row " + std::to_string(n));
      if (!d.empty()) ADD_FAILURE() << what << ": " << d;
      differed = !d.empty();
    }
    EXPECT_EQ(rows.size(), 300u) << what;
    EXPECT_EQ(n, 300u) << what << ": pyarrow's reading";
  }
  // 8 encodings x 4 codecs x 2 data page versions.
  EXPECT_EQ(files, 64u) << "files written by tests/oracles/pyarrow_parquet.py";
}

// LZ4 and Brotli are refused with an error naming the file and the column,
// as docs/datasets.md says, not read as garbage.
TEST_F(ParquetPyarrow, UnsupportedCodecsAreRefusedNamingTheColumn) {
  size_t files = 0;
  for (const json& c : cases()) {
    if (!c.value("refused", false)) continue;
    ++files;
    const std::string file = c["file"];
    try {
      (void)grpo::data::read_parquet_rows((dir_ / file).string(), std::nullopt);
      ADD_FAILURE() << file << " (" << c["codec"] << ") was read; it should be refused";
    } catch (const grpo::data::DataError& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find(file), std::string::npos) << message;
      EXPECT_NE(message.find("column 'problem'"), std::string::npos) << message;
      EXPECT_NE(message.find("is not supported"), std::string::npos) << message;
    }
  }
  EXPECT_EQ(files, 2u);
}

}  // namespace
