// A Parquet file from any bytes, read as a dataset is: every row group and
// column into JSON rows, each written out as a JSON writer would. Either that
// works or a UserError names the file; a bad_alloc from a size the bytes only
// claim (libFuzzer's -rss_limit_mb and -malloc_limit_mb catch those) is a finding.
#include <optional>

#include "data/dataset.h"
#include "data/file_rows.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = grpo::fuzz::scratch_file("rows.parquet", grpo::fuzz::text_of(data, size));
  grpo::fuzz::expect_clean([&] {
    for (const grpo::data::Row& row : grpo::data::read_parquet_rows(path, std::nullopt)) (void)row.columns.dump();
  });
  return 0;
}
