// What one logging window writes to logging.jsonl.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "trainer/run_log.h"

namespace {

nlohmann::json last_line(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::string line, last;
  while (std::getline(in, line)) last = line;
  return nlohmann::json::parse(last);
}

}  // namespace

// Measurements are the window's mean; epoch and learning_rate are where the run stands at the
// window's end, as transformers' Trainer logs them.
TEST(RunLog, MeasurementsAreWindowMeansAndTheRunsPositionIsItsLastValue) {
  auto dir = std::filesystem::temp_directory_path() / ("grpo_run_log_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  {
    grpo::trainer::RunLog log(dir.string());
    for (int step = 1; step <= 4; ++step)
      log.add({{"reward", step * 1.0}, {"epoch", step / 8.0}, {"learning_rate", 1e-5 * (5 - step)}});
    log.flush(4, 8);
  }
  nlohmann::json line = last_line(dir / "logging.jsonl");
  EXPECT_DOUBLE_EQ(line["reward"].get<double>(), 2.5);
  EXPECT_DOUBLE_EQ(line["epoch"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(line["learning_rate"].get<double>(), 1e-5);
  EXPECT_EQ(line["global_step"].get<int>(), 4);
  std::filesystem::remove_all(dir);
}
