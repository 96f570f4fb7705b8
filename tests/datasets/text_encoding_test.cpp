// Dataset text that is not UTF-8 — JSONL, a JSON array, CSV, Parquet — is
// read with each invalid sequence as U+FFFD and one warning naming the first
// place: the rule every text of a run follows where it enters. Before, a
// JSONL line was refused and a CSV cell passed on as it was, to stop the run
// at the first JSON writer with "invalid UTF-8 byte at index 5: 0xFF".
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include "data/dataset.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The warnings logged while reading `path`.
struct Read {
  std::vector<grpo::data::Row> rows;
  std::string log;
};
Read read_logged(const std::string& path) {
  std::ostringstream log;
  const auto previous = spdlog::default_logger();
  spdlog::set_default_logger(std::make_shared<spdlog::logger>("capture", std::make_shared<spdlog::sinks::ostream_sink_mt>(log)));
  Read r;
  try {
    r.rows = grpo::data::load_rows(path);
  } catch (...) {
    spdlog::set_default_logger(previous);
    throw;
  }
  spdlog::set_default_logger(previous);
  r.log = log.str();
  return r;
}

std::string write(const std::string& name, const std::string& bytes) {
  const fs::path dir = fs::temp_directory_path() / "grpo_text_encoding";
  fs::create_directories(dir);
  std::ofstream(dir / name, std::ios::binary) << bytes;
  return (dir / name).string();
}

TEST(DatasetText, JsonlBytesThatAreNotUtf8AreReadAsReplacementCharacters) {
  const std::string path = write("rows.jsonl", "{\"prompt\": \"fine\"}\n{\"prompt\": \"What is 2+2? \xff\xfe\", \"x\": \"\xc3\"}\n");
  const Read r = read_logged(path);
  ASSERT_EQ(r.rows.size(), 2u);
  EXPECT_EQ(r.rows[1].columns["prompt"], "What is 2+2? \uFFFD\uFFFD");
  EXPECT_EQ(r.rows[1].columns["x"], "\uFFFD");
  EXPECT_NO_THROW((void)r.rows[1].columns.dump());
  EXPECT_NE(r.log.find(path + ":2:26: the file is not UTF-8 there (byte 0xFF) and in 2 more places"), std::string::npos)
      << r.log;
}

TEST(DatasetText, AJsonArrayAndCsvAreRepairedTheSameWay) {
  const Read array = read_logged(write("rows.json", "[{\"prompt\": \"a \xe2\x88\"}]"));
  ASSERT_EQ(array.rows.size(), 1u);
  EXPECT_EQ(array.rows[0].columns["prompt"], "a \uFFFD");  // a truncated 3-byte sequence is one replacement
  EXPECT_NE(array.log.find("rows.json:1:16"), std::string::npos) << array.log;

  const std::string csv = write("rows.csv", "prompt,solution\n\"What \xff is 2+2?\",4\n");
  const Read r = read_logged(csv);
  ASSERT_EQ(r.rows.size(), 1u);
  EXPECT_EQ(r.rows[0].columns["prompt"], "What \uFFFD is 2+2?");
  EXPECT_EQ(r.rows[0].columns["solution"], 4);
  EXPECT_NO_THROW((void)r.rows[0].columns.dump());
  EXPECT_NE(r.log.find(csv + ":2:7"), std::string::npos) << r.log;
}

TEST(DatasetText, Utf8FilesAreReadAsTheyAreWithoutAWarning) {
  const Read r = read_logged(write("ok.jsonl", "{\"prompt\": \"12 \xc3\x97 34 \xe2\x88\x92 \xf0\x9f\x98\x80\"}\n"));
  ASSERT_EQ(r.rows.size(), 1u);
  EXPECT_EQ(r.rows[0].columns["prompt"], "12 × 34 − 😀");
  EXPECT_EQ(r.log, "");
}

}  // namespace
