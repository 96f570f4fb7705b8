#include "trainer/run_log.h"

#include <cmath>
#include <cstdio>
#include <filesystem>

#include <nlohmann/json.hpp>

namespace grpo::trainer {

namespace {

std::string created_path(const std::string& output_dir, const char* name) {
  std::filesystem::create_directories(output_dir);
  return (std::filesystem::path(output_dir) / name).string();
}

}  // namespace

RunLog::RunLog(const std::string& output_dir, bool tensorboard) : out_(created_path(output_dir, "logging.jsonl")) {
  if (tensorboard) tensorboard_ = std::make_unique<TensorBoardWriter>((std::filesystem::path(output_dir) / "runs").string());
}

void RunLog::add(const std::map<std::string, double>& metrics) {
  for (const auto& [name, value] : metrics) {
    if (std::isnan(value)) continue;  // no value this step (as TRL's nanmean skips NaN)
    auto& [sum, count] = window_[name];
    // The run's position, not a measurement: logged as it stands at the end of the window, as
    // transformers' Trainer logs it (a mean would put `epoch` 0.3 on the line of step 5 of 10).
    if (name == "epoch" || name == "learning_rate") {
      sum = value, count = 1;
      continue;
    }
    sum += value;
    ++count;
  }
}

void RunLog::flush(int64_t global_step, int64_t max_steps) {
  if (window_.empty()) return;
  std::map<std::string, double> means;
  for (const auto& [name, sc] : window_) means[name] = sc.first / static_cast<double>(sc.second);
  write(global_step, means);
  // One line; only what this run logs (sft has no reward, beta 0 no kl).
  std::string text = "step " + std::to_string(global_step) + "/" + std::to_string(max_steps);
  for (const char* key : {"reward", "loss", "kl", "grad_norm", "learning_rate", "step_time"}) {
    auto it = means.find(key);
    if (it == means.end()) continue;
    char value[32];
    std::snprintf(value, sizeof value, std::string(key) == "learning_rate" ? "%.2e" : "%.4g", it->second);
    text += std::string("  ") + key + " " + value;
  }
  std::puts(text.c_str());
  std::fflush(stdout);
  window_.clear();
}

void RunLog::write(int64_t global_step, const std::map<std::string, double>& metrics) {
  nlohmann::json line = nlohmann::json::object();
  std::map<std::string, double> finite;
  for (const auto& [name, value] : metrics)
    if (!std::isnan(value)) finite[name] = value, line[name] = value;
  line["global_step"] = global_step;
  if (tensorboard_) tensorboard_->add_scalars(global_step, finite);
  out_.append(line.dump() + '\n');
}

}  // namespace grpo::trainer
