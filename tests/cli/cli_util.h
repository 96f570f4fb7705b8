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
void write_file(const std::string& path, const std::string& text);
std::string read_file(const std::string& path);
// One JSON value per non-empty line.
std::vector<nlohmann::json> read_jsonl(const std::string& path);

}  // namespace grpo::testing
