// sft, evaluate and score under the faults train already survives: a stop
// signal keeps sft's work and stops evaluate with a message; a reward plugin
// that crashes or hangs costs its batch under --plugin_isolation process.
#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/cli_util.h"
#include "plugin_paths.h"

using namespace grpo::testing;
namespace fs = std::filesystem;

namespace {

// `command` (grpo-host's arguments) in the background; SIGTERM once `ready`
// (a file) is not empty; its output in DIR/log.txt and "exit=N" in the result.
std::string run_and_terminate(const std::string& dir, const std::string& command, const std::string& ready) {
  return run_shell("'" GRPO_HOST_EXE "' " + command + " > " + dir + "/log.txt 2>&1 & pid=$!; " +
                   "for i in $(seq 1 600); do [ -s " + ready + " ] && break; sleep 0.1; done; " +
                   "kill -TERM $pid; wait $pid; echo exit=$?")
      .output;
}

std::string sft_rows(const std::string& dir) {
  std::string rows;
  for (int i = 1; i <= 4; ++i)
    rows += "{\"query\": \"" + std::to_string(i) + "+1\", \"response\": \"" + std::to_string(i + 1) + "\"}\n";
  write_file(dir + "/sft.jsonl", rows);
  return dir + "/sft.jsonl";
}

}  // namespace

// Before: sft installed no handler, so SIGTERM killed it (exit 143) and every
// step since the start was lost. Now the step in progress finishes, is saved
// as checkpoint-N and the command exits 0, as train does.
TEST(SftCommand, SigtermSavesTheStepInProgressAndExitsCleanly) {
  const std::string dir = temp_dir("sft_sigterm");
  ASSERT_EQ(run_host("init-model --arch qwen2 --preset tiny --out " + dir + "/model").exit_code, 0);
  const std::string out = run_and_terminate(
      dir,
      "sft --model " + dir + "/model --dataset " + sft_rows(dir) + " --train_type full --max_steps 100000 " +
          "--save_steps 100000 --logging_steps 1 --output_dir " + dir + "/out",
      dir + "/out/logging.jsonl");
  const std::string log = read_file(dir + "/log.txt");
  EXPECT_NE(out.find("exit=0"), std::string::npos) << out << log;
  EXPECT_NE(log.find("stopped by a signal at step"), std::string::npos) << log;
  const auto lines = read_jsonl(dir + "/out/logging.jsonl");
  ASSERT_FALSE(lines.empty()) << log;
  const std::string saved = dir + "/out/checkpoint-" + std::to_string(lines.back()["global_step"].get<int64_t>());
  EXPECT_TRUE(fs::exists(saved + "/model.safetensors")) << log;
  const auto state = nlohmann::json::parse(read_file(saved + "/trainer_state.json"));
  EXPECT_EQ(state["global_step"], lines.back()["global_step"]);
}

// sft honours --save_steps (it saved only at the end before).
TEST(SftCommand, SaveStepsWritesCheckpointsOnTheWay) {
  const std::string dir = temp_dir("sft_save_steps");
  ASSERT_EQ(run_host("init-model --arch qwen2 --preset tiny --out " + dir + "/model").exit_code, 0);
  CommandResult r = run_host("sft --model " + dir + "/model --dataset " + sft_rows(dir) + " --train_type full " +
                             "--max_steps 5 --save_steps 2 --output_dir " + dir + "/out");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* step : {"2", "4", "5"})
    EXPECT_TRUE(fs::exists(dir + "/out/checkpoint-" + std::string(step) + "/model.safetensors")) << step;
  // --save_strategy no: none, not even the last.
  r = run_host("sft --model " + dir + "/model --dataset " + sft_rows(dir) + " --train_type full " +
               "--max_steps 3 --save_steps 2 --save_strategy no --output_dir " + dir + "/none");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* step : {"2", "3"}) EXPECT_FALSE(fs::exists(dir + "/none/checkpoint-" + std::string(step))) << step;
}

// Before: SIGTERM killed evaluate with no word (exit 143). Now a generation
// that does not end within seconds of the signal (here a multi-turn handler
// that sleeps an hour) is given up with a message and exit status 1.
TEST(EvaluateCommand, SigtermWhileGeneratingStopsWithAMessage) {
  const std::string dir = temp_dir("evaluate_sigterm");
  ASSERT_EQ(run_host("init-model --arch qwen2 --preset tiny --out " + dir + "/m").exit_code, 0);
  write_file(dir + "/rows.jsonl", "{\"problem\": \"1+1?\", \"solution\": \"2\"}\n");
  // The tiny model's first token is a newline: a stop word ends the turn
  // there, so the handler is called (and sleeps). Its option `log` writes
  // "begin <id>" when a conversation starts.
  write_file(dir + "/stop.yaml", "stop_words: [\"\\n\"]\n");
  const std::string out = run_and_terminate(
      dir,
      "evaluate --config " + dir + "/stop.yaml --model " + dir + "/m --dataset " + dir + "/rows.jsonl " +
          "--reward_funcs format --max_completion_length 4 --plugins " + FIXTURE_MULTITURN_STEP_HANGS +
          " --multi_turn_scheduler fixture_multiturn_step_hangs --plugin_args '{\"fixture_multiturn_step_hangs\": " +
          "{\"turns\": 3, \"log\": \"" + dir + "/turns.log\"}}'",
      dir + "/turns.log");
  const std::string log = read_file(dir + "/log.txt");
  EXPECT_NE(out.find("exit=1"), std::string::npos) << out << log;
  EXPECT_NE(log.find("evaluate stopped by a signal while generating for 1 rows"), std::string::npos) << log;
}

// Before: evaluate and score accepted --plugin_isolation process and ran the
// reward in their own process, so its crash ended the command (signal 11, no
// message). Now the crash costs the batch: the other rewards still score,
// the crash is named and the exit status is 1.
TEST(EvaluateCommand, PluginIsolationHonouredACrashingRewardCostsItsBatch) {
  const std::string dir = temp_dir("evaluate_isolated");
  ASSERT_EQ(run_host("init-model --arch qwen2 --preset tiny --out " + dir + "/m").exit_code, 0);
  write_file(dir + "/rows.jsonl", "{\"problem\": \"1+1?\", \"solution\": \"2\"}\n");
  CommandResult r = run_host("evaluate --model " + dir + "/m --dataset " + dir + "/rows.jsonl --plugins " +
                             FIXTURE_CRASHES + " --reward_funcs fixture_crashes format --max_completion_length 4 " +
                             "--plugin_isolation process");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("died of signal 11"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("reward 'fixture_crashes'"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("weighted reward"), std::string::npos) << "the scores are still printed: " << r.output;
}

TEST(ScoreCommand, PluginIsolationHonouredCrashesAndHangsCostTheirBatch) {
  const std::string dir = temp_dir("score_isolated");
  write_file(dir + "/rows.jsonl", "{\"problem\": \"What is 6*7?\", \"solution\": \"42\"}\n");
  write_file(dir + "/c.jsonl", "{\"completion\": \"<think>6*7</think><answer>42</answer>\"}\n");
  const std::string base = "score --dataset " + dir + "/rows.jsonl --completions " + dir + "/c.jsonl --output " +
                           dir + "/rewards.jsonl --plugin_isolation process ";
  CommandResult crash = run_host(base + "--plugins " + FIXTURE_CRASHES + " --reward_funcs fixture_crashes format");
  EXPECT_EQ(crash.exit_code, 1) << crash.output;
  EXPECT_NE(crash.output.find("died of signal 11"), std::string::npos) << crash.output;
  auto lines = read_jsonl(dir + "/rewards.jsonl");
  ASSERT_EQ(lines.size(), 1u) << crash.output;
  EXPECT_TRUE(lines[0]["rewards"]["fixture_crashes"].is_null()) << lines[0];
  EXPECT_EQ(lines[0]["rewards"]["format"], 1.0) << lines[0];
  CommandResult hang =
      run_host(base + "--reward_timeout 1 --plugins " + FIXTURE_HANGS + " --reward_funcs fixture_hangs");
  EXPECT_EQ(hang.exit_code, 1) << hang.output;
  EXPECT_NE(hang.output.find("did not answer within 1 s"), std::string::npos) << hang.output;
}
