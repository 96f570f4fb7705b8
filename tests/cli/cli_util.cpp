#include "cli/cli_util.h"

#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "plugin_paths.h"

namespace grpo::testing {

CommandResult run_shell(const std::string& command) {
  CommandResult r;
  FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

CommandResult run_host(const std::string& args, const std::string& env) {
  return run_shell(env + (env.empty() ? "" : " ") + "'" GRPO_HOST_EXE "' " + args);
}

std::string temp_dir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("grpo_test_" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

void write_file(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

std::string tiny_run_dir(const std::string& name, bool with_solution, const std::string& extra_rows) {
  std::string dir = temp_dir(name);
  CommandResult r = run_host("init-model --arch qwen2 --preset tiny --out " + dir + "/model --seed 3");
  if (r.exit_code != 0) ADD_FAILURE() << r.output;
  std::string rows;
  for (int i = 1; i <= 8; ++i)
    rows += "{\"problem\": \"" + std::to_string(i) + "+1=?\"" +
            (with_solution ? ", \"solution\": \"" + std::to_string(i + 1) + "\"" : std::string()) + "}\n";
  write_file(dir + "/rows.jsonl", rows + extra_rows);
  return dir;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::istringstream in(read_file(path));
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  return out;
}

ResumedRuns run_straight_and_resumed(const std::string& base, const std::string& dir) {
  CommandResult a = run_host(base + "--output_dir " + dir + "/straight");
  EXPECT_EQ(a.exit_code, 0) << a.output;
  CommandResult b = run_host(base + "--output_dir " + dir + "/resumed --resume_from_checkpoint " + dir +
                             "/straight/checkpoint-2");
  EXPECT_EQ(b.exit_code, 0) << b.output;
  return {read_jsonl(dir + "/straight/logging.jsonl"), read_jsonl(dir + "/resumed/logging.jsonl")};
}

}  // namespace grpo::testing
