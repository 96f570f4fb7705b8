// Training metrics: averaged over each logging window (the run's position,
// epoch and learning_rate, taken at its end), appended to
// output_dir/logging.jsonl (and to TensorBoard event files under
// output_dir/runs when asked), and printed as one line.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "trainer/jsonl_appender.h"
#include "trainer/tensorboard_writer.h"

namespace grpo::trainer {

class RunLog {
 public:
  explicit RunLog(const std::string& output_dir, bool tensorboard = false);

  // Adds one step's metrics to the window.
  void add(const std::map<std::string, double>& metrics);

  // Writes the window's means (plus global_step) as one JSON line, prints a
  // summary, and starts a new window.
  void flush(int64_t global_step, int64_t max_steps);

  // Writes `metrics` (e.g. an evaluation's eval_* values) as their own line
  // at once, outside the window. A failed write throws LogWriteError.
  void write(int64_t global_step, const std::map<std::string, double>& metrics);

 private:
  JsonlAppender out_;
  std::unique_ptr<TensorBoardWriter> tensorboard_;
  std::map<std::string, std::pair<double, long>> window_;
};

}  // namespace grpo::trainer
