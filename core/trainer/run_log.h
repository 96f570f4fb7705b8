// Training metrics: averaged over each logging window, appended to
// output_dir/logging.jsonl and printed as one line.
#pragma once

#include <fstream>
#include <map>
#include <string>

namespace grpo::trainer {

class RunLog {
 public:
  explicit RunLog(const std::string& output_dir);

  // Adds one step's metrics to the window.
  void add(const std::map<std::string, double>& metrics);

  // Writes the window's means (plus global_step) as one JSON line, prints a
  // summary, and starts a new window.
  void flush(int64_t global_step, int64_t max_steps);

 private:
  std::ofstream out_;
  std::map<std::string, std::pair<double, long>> window_;
};

}  // namespace grpo::trainer
