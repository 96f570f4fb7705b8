// What the benchmarks that time `grpo-host train` share: running a command
// line (echoed; its output kept in a log whose end is shown when it fails)
// and reading a run's logging.jsonl.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <unistd.h>

namespace grpo::bench {

inline int run(const std::string& cmd) {
  std::printf("$ %s\n", cmd.c_str());
  std::fflush(stdout);
  const std::string log = "/tmp/grpo_bench_run_" + std::to_string(::getpid()) + ".log";
  const int status = std::system((cmd + " > '" + log + "' 2>&1").c_str());
  // Where the run cannot be repeated by hand (a lent device), what it said is the only trace.
  if (status != 0) std::system(("tail -n 40 '" + log + "' >&2").c_str());
  std::remove(log.c_str());
  return status;
}

// Each numeric metric of out/logging.jsonl summed over the steps after the
// first (which pays one-time costs: thread pools, first allocations); `n`
// gets how many steps that is.
inline std::map<std::string, double> sums_after_first_step(const std::string& out, int& n) {
  std::map<std::string, double> sums;
  std::ifstream log(out + "/logging.jsonl");
  n = 0;
  int line_no = 0;
  for (std::string line; std::getline(log, line);) {
    const nlohmann::json j = nlohmann::json::parse(line);  // items() refers to it: keep it alive
    if (line_no++ == 0) continue;
    ++n;
    for (const auto& [k, v] : j.items())
      if (v.is_number()) sums[k] += v.get<double>();
  }
  return sums;
}

// Every logged step's value of `key`, in order (the first step included).
inline std::vector<double> per_step(const std::string& out, const std::string& key) {
  std::vector<double> values;
  std::ifstream log(out + "/logging.jsonl");
  for (std::string line; std::getline(log, line);) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (j.contains(key)) values.push_back(j[key].get<double>());
  }
  return values;
}

}  // namespace grpo::bench
