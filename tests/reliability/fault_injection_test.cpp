// Faults injected into real runs: writes that fail part way (a file size
// limit, `ulimit -f`, fails them exactly as a full disk does, with no root
// needed), and a kill -9 in the middle of saving. Finished work survives each.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/cli_util.h"
#include "plugin_paths.h"

using namespace grpo::testing;
namespace fs = std::filesystem;

namespace {

std::string run_flags(const std::string& dir, int max_steps, int save_steps = 1) {
  return "train --model " + dir + "/model --dataset " + dir + "/rows.jsonl --train_type full --reward_funcs format " +
         "--num_generations 4 --per_device_train_batch_size 4 --max_completion_length 8 --logging_steps 1 " +
         "--save_steps " + std::to_string(save_steps) + " --max_steps " + std::to_string(max_steps) +
         " --output_dir " + dir + "/out ";
}

// grpo-host under a file size limit of `kib` KiB (bash counts ulimit -f in
// KiB): every write past it fails with EFBIG.
CommandResult run_limited(const std::string& args, uintmax_t kib) {
  return run_shell("bash -c 'ulimit -f " + std::to_string(kib) + "; exec " + std::string(GRPO_HOST_EXE) + " " + args +
                   "'");
}

std::vector<std::string> unfinished_saves(const std::string& out) {
  std::vector<std::string> found;
  for (const auto& e : fs::directory_iterator(out))
    if (e.path().filename().string().rfind(".checkpoint-", 0) == 0) found.push_back(e.path().string());
  return found;
}

}  // namespace

TEST(FaultInjection, AFullDiskWhileSavingKeepsTheEarlierCheckpointsAndSaysSo) {
  const std::string dir = tiny_run_dir("fault_save");
  ASSERT_EQ(run_host(run_flags(dir, 2)).exit_code, 0);
  const uintmax_t weights = fs::file_size(dir + "/out/checkpoint-2/model.safetensors");
  // Room for the logs, args.yaml and the weights of checkpoint-3, not for
  // AdamW's state (twice the weights): LibTorch's own writer fails.
  CommandResult r = run_limited(run_flags(dir, 4) + "--resume_from_checkpoint " + dir + "/out/checkpoint-2",
                                weights * 3 / 2048);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("cannot write " + dir + "/out/checkpoint-3: optimizer.pt: "), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("Exception raised from"), std::string::npos) << "no LibTorch backtrace: " << r.output;
  EXPECT_NE(r.output.find("The checkpoints saved before are intact"), std::string::npos) << r.output;
  EXPECT_TRUE(unfinished_saves(dir + "/out").empty());
  EXPECT_FALSE(fs::exists(dir + "/out/checkpoint-3"));
  EXPECT_EQ(fs::file_size(dir + "/out/checkpoint-2/model.safetensors"), weights);
  // Once there is room again, the run continues from the newest checkpoint.
  r = run_host(run_flags(dir, 4) + "--resume_from_checkpoint " + dir + "/out/checkpoint-2");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(fs::exists(dir + "/out/checkpoint-4/model.safetensors"));
}

TEST(FaultInjection, AFullDiskWhileLoggingStopsTheRunWithWholeLines) {
  const std::string dir = tiny_run_dir("fault_log");
  ASSERT_EQ(run_host(run_flags(dir, 1, 1000)).exit_code, 0);
  const uintmax_t line = fs::file_size(dir + "/out/logging.jsonl");
  const uintmax_t args = fs::file_size(dir + "/out/args.yaml");
  fs::remove_all(dir + "/out");
  // args.yaml fits; logging.jsonl fills up after a few steps.
  const uintmax_t kib = (std::max(args, 3 * line) + 1023) / 1024;
  CommandResult r = run_limited(run_flags(dir, 40, 1000) + "--report_to none", kib);
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("cannot write " + dir + "/out/logging.jsonl: File too large"), std::string::npos)
      << r.output;
  const std::string text = read_file(dir + "/out/logging.jsonl");
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n') << "a log ends with a whole line";
  const auto lines = read_jsonl(dir + "/out/logging.jsonl");  // each line parses
  EXPECT_LT(lines.size(), 40u);
  EXPECT_TRUE(unfinished_saves(dir + "/out").empty());
}

// kill -9 at random moments of a run that saves every step: whatever moment
// it lands on, the newest checkpoint-N loads and the run resumes from it.
TEST(FaultInjection, KillNineDuringSavesLeavesANewestCheckpointThatResumes) {
  const std::string dir = tiny_run_dir("fault_kill");
  const std::string command = "exec " + std::string(GRPO_HOST_EXE) + " " + run_flags(dir, 200) + "> " + dir +
                              "/train.log 2>&1";
  // Each run starts over in the same folder; once it has logged a few steps
  // (each followed by a save), it is killed a little later, at whatever
  // point of its step or save that falls on.
  for (int delay_ms : {0, 37, 111}) {
    fs::remove(dir + "/out/logging.jsonl");
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    for (int i = 0; i < 1200 && read_jsonl(dir + "/out/logging.jsonl").size() < 3; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
  }
  int64_t newest = 0;
  for (const auto& e : fs::directory_iterator(dir + "/out")) {
    const std::string name = e.path().filename().string();
    if (name.rfind("checkpoint-", 0) == 0) newest = std::max<int64_t>(newest, std::stoll(name.substr(11)));
  }
  ASSERT_GT(newest, 0) << read_file(dir + "/train.log");
  const std::string from = dir + "/out/checkpoint-" + std::to_string(newest);
  CommandResult r = run_host(run_flags(dir, static_cast<int>(newest) + 1) + "--resume_from_checkpoint " + from);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(unfinished_saves(dir + "/out").empty()) << "the resumed run cleans what the kills left";
  EXPECT_TRUE(fs::exists(dir + "/out/checkpoint-" + std::to_string(newest + 1) + "/trainer_state.json"));
}
