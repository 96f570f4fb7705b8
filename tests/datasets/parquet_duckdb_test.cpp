// Parquet files that DuckDB (from PyPI) writes now, with the column types a
// downloaded dataset may carry besides its text: decimals past 18 digits and
// UUIDs and intervals (FIXED_LEN_BYTE_ARRAY), and bytes that are not UTF-8.
// Before, each was read as text and the run stopped at the first JSON writer
// with "invalid UTF-8 byte", naming no file, row or column.
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "data/dataset.h"
#include "data/file_rows.h"
#include "oracles/python_oracle.h"

namespace fs = std::filesystem;
using nlohmann::json;

TEST(ParquetDuckdb, DecimalsUuidsIntervalsAndBytesReadAsValuesNotBrokenText) {
  const fs::path dir = fs::temp_directory_path() / "grpo_parquet_duckdb";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string parquet = (dir / "typed.parquet").string(), want = (dir / "want.jsonl").string();
  // DuckDB's own text of each value is written beside the file, for comparison.
  const std::string script =
      "import duckdb, json\n"
      "duckdb.sql(\"\"\"COPY (SELECT 'p' || i AS problem,\n"
      "  CAST(i * 7 AS DECIMAL(30,1)) AS big, CAST('-12345678901234567890.5' AS DECIMAL(38,1)) AS huge,\n"
      "  uuid() AS id, INTERVAL (i) DAY + INTERVAL 2 MONTH + INTERVAL 3 SECOND AS iv,\n"
      "  '\\\\x82\\\\xFFab'::BLOB AS raw FROM range(3) t(i)) TO '" + parquet + "' (FORMAT parquet)\"\"\")\n"
      "with open('" + want + "', 'w') as out:\n"
      "    for p, id_, months, days, micros in duckdb.sql(\"\"\"SELECT problem, id::VARCHAR, datepart('month', iv),\n"
      "            datepart('day', iv), epoch_us(iv) % 86400000000 FROM '" + parquet + "'\"\"\").fetchall():\n"
      "        out.write(json.dumps({'problem': p, 'id': id_, 'months': months, 'days': days, 'ms': micros // 1000}) + '\\n')\n";
  const std::string error = grpo::test::run_python_source(script, dir);
  ASSERT_TRUE(error.empty()) << error;

  const std::vector<grpo::data::Row> rows = grpo::data::read_parquet_rows(parquet, std::nullopt);
  std::ifstream want_in(want);
  ASSERT_EQ(rows.size(), 3u);
  for (size_t i = 0; i < rows.size(); ++i) {
    std::string line;
    ASSERT_TRUE(std::getline(want_in, line));
    const json w = json::parse(line), got = rows[i].columns;
    EXPECT_EQ(got["problem"], w["problem"]);
    EXPECT_EQ(got["big"], 7.0 * static_cast<double>(i)) << got.dump();
    EXPECT_NEAR(got["huge"].get<double>(), -12345678901234567890.5, 1e5) << got.dump();
    EXPECT_EQ(got["id"], w["id"]) << got.dump();
    EXPECT_EQ(got["iv"], json({{"months", w["months"]}, {"days", w["days"]}, {"milliseconds", w["ms"]}})) << got.dump();
    EXPECT_EQ(got["raw"], "\xEF\xBF\xBD\xEF\xBF\xBD" "ab") << "each invalid byte one U+FFFD: " << got.dump();
    EXPECT_NO_THROW((void)got.dump()) << "every value can be written as JSON";
  }
}
