// Dataset reading: rows/s of the Parquet and CSV readers against the JSONL
// reader on the same 100,000 rows, in one run; and what `#N` saves.
//
//   (cd tests/data/parquet && npm install && node make_bench_files.mjs /tmp/grpo_bench_data)
//   build/bin/bench_datasets /tmp/grpo_bench_data
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>

#include <fmt/format.h>

#include "data/dataset.h"

namespace {

struct Timing {
  size_t rows = 0;
  double seconds = 0;
};

// The best of `repeats` reads (the first one also warms the page cache).
Timing time_read(const std::string& spec, int repeats) {
  Timing best{0, 1e30};
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    const size_t rows = grpo::data::load_rows(spec).size();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s < best.seconds) best = {rows, s};
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : "/tmp/grpo_bench_data";
  if (!std::filesystem::exists(dir + "/rows.jsonl")) {
    std::fprintf(stderr, "no %s/rows.jsonl: write the files first with tests/data/parquet/make_bench_files.mjs\n", dir.c_str());
    return 2;
  }
  std::printf("%-34s %10s %8s %12s %10s %12s %11s\n", "file", "MB", "rows", "rows/s", "MB/s", "vs JSONL", "time");
  auto report = [&](const std::string& name, const Timing& base) {
    const std::string path = dir + "/" + name;
    const Timing t = time_read(path, 3);
    const double mb = static_cast<double>(std::filesystem::file_size(path.substr(0, path.find('#')))) / 1e6;
    const bool whole = name.find('#') == std::string::npos;  // MB/s means the whole file was read
    std::printf("%-34s %10.1f %8zu %12.0f %10s %11.2fx %9.3f s\n", name.c_str(), mb, t.rows, t.rows / t.seconds,
                whole ? fmt::format("{:.1f}", mb / t.seconds).c_str() : "-",
                base.seconds > 0 ? (base.seconds / base.rows) / (t.seconds / t.rows) : 1.0, t.seconds);
    return t;
  };
  std::puts("-- problem, solution, messages (list<struct>)");
  const Timing jsonl = report("rows.jsonl", {});
  report("rows_snappy.parquet", jsonl);
  report("rows_zstd.parquet", jsonl);
  report("rows_snappy.parquet#1000", jsonl);
  std::puts("-- problem, solution");
  const Timing flat = report("rows_flat.jsonl", {});
  report("rows.csv", flat);
  return 0;
}
