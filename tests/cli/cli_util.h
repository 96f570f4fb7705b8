// Runs grpo-host as a user would and captures what it prints.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace grpo::testing {

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// Runs a shell command line, stdout and stderr together.
CommandResult run_shell(const std::string& command);

// `args` is appended to the grpo-host path, as a shell command line.
CommandResult run_host(const std::string& args, const std::string& env = "");

// A fresh temporary directory for one test.
std::string temp_dir(const std::string& name);
// temp_dir(name) holding a tiny random model in dir/model and dir/rows.jsonl
// with the additions 1+1 .. 8+1 (`problem`, and `solution` unless told not to).
std::string tiny_run_dir(const std::string& name, bool with_solution = true, const std::string& extra_rows = "");
void write_file(const std::string& path, const std::string& text);
std::string read_file(const std::string& path);
// One JSON value per non-empty line.
std::vector<nlohmann::json> read_jsonl(const std::string& path);

// `train` flags `base` run twice: straight into dir/straight, and resumed
// from dir/straight/checkpoint-2 into dir/resumed (a failing run is a test
// failure, with its output). Their logging.jsonl lines.
struct ResumedRuns {
  std::vector<nlohmann::json> straight, resumed;
};
ResumedRuns run_straight_and_resumed(const std::string& base, const std::string& dir);

}  // namespace grpo::testing
