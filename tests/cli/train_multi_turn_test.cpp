// `grpo-host train` with multi-turn rollouts and reward models, as users run
// it: ms-swift's multi-turn example YAML (configs/multi_turn.yaml) at small
// scale, with async_generate, and --reward_model on a tiny sequence
// classifier.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/cli_util.h"

using namespace grpo::testing;

namespace {

// The example's YAML with the model, data and sizes of this machine; stop
// strings end most of the random model's turns early, so hints follow.
std::string small_scale(const std::string& dir, int max_steps = 2) {
  return "train --config " GRPO_SOURCE_DIR "/configs/multi_turn.yaml --model " + dir + "/model --dataset " + dir +
         "/rows.jsonl --torch_dtype float32 --num_generations 4 --per_device_train_batch_size 4 "
         "--gradient_accumulation_steps 1 --max_completion_length 12 --max_steps " + std::to_string(max_steps) +
         " --logging_steps 1 "
         "--save_steps 100 --stop_words a e i o u 1 2 3 --report_to none --output_dir " + dir + "/out";
}

}  // namespace

TEST(TrainMultiTurn, MsSwiftsMultiTurnExampleRunsAndTrainsOnEveryTurn) {
  const std::string dir = tiny_run_dir("train_multi_turn_example");
  CommandResult r = run_host(small_scale(dir));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto log = read_jsonl(dir + "/out/logging.jsonl");
  ASSERT_EQ(log.size(), 2u);
  for (const char* key : {"turns/mean", "turns/max", "tools/call_frequency", "multi_turn/handler_errors"})
    EXPECT_TRUE(log[0].contains(key)) << key << " missing from " << log[0];
  const auto completions = read_jsonl(dir + "/out/completions.jsonl");
  ASSERT_EQ(completions.size(), 8u);
  size_t hinted = 0;
  for (const auto& c : completions) {
    ASSERT_TRUE(c.contains("messages")) << c;
    const auto& messages = c["messages"];
    EXPECT_EQ(messages.back()["role"], "assistant");
    EXPECT_EQ(messages.back()["content"], c["completion"]);  // rewards scored the last turn
    if (c["turns"].get<int>() > 1) {
      ++hinted;
      EXPECT_EQ(messages[2]["role"], "user");
      EXPECT_NE(messages[2]["content"].get<std::string>().find("not correct"), std::string::npos);
      EXPECT_LT(c["sampled_tokens"].get<int>(), c["completion_tokens"].get<int>());  // the hint is no policy token
    }
    EXPECT_LE(c["turns"].get<int>(), 3);
  }
  EXPECT_GT(hinted, 0u) << "no conversation got a hint: the run tested single turns only";
  EXPECT_NE(read_file(dir + "/out/args.yaml").find("multi_turn_scheduler: math_tip_trick"), std::string::npos);
}

TEST(TrainMultiTurn, WorksWithAsyncGenerate) {
  const std::string dir = tiny_run_dir("train_multi_turn_async");
  CommandResult r = run_host(small_scale(dir, 3) + " --async_generate true");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(read_jsonl(dir + "/out/logging.jsonl").size(), 3u);
}

TEST(TrainMultiTurn, AnUnknownHandlerIsNamedWithWhatExists) {
  const std::string dir = tiny_run_dir("train_multi_turn_unknown");
  CommandResult r = run_host(small_scale(dir) + " --multi_turn_scheduler math_tip_trik");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("math_tip_trik"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("math_tip_trick"), std::string::npos) << r.output;  // the closest name
}

TEST(TrainRewardModel, ACausalCheckpointRelabelledAsAClassifierIsRefused) {
  const std::string dir = tiny_run_dir("train_reward_model");
  // The tiny model itself as a one-label sequence classifier: its embedding row 0 as the head.
  CommandResult made = run_host("init-model --arch qwen2 --preset tiny --out " + dir + "/my_rm --seed 5");
  ASSERT_EQ(made.exit_code, 0) << made.output;
  nlohmann::json config = nlohmann::json::parse(read_file(dir + "/my_rm/config.json"));
  config["architectures"] = {"Qwen2ForSequenceClassification"};
  config["num_labels"] = 1;
  write_file(dir + "/my_rm/config.json", config.dump());
  CommandResult r = run_host("train --model " + dir + "/model --dataset " + dir + "/rows.jsonl --train_type full "
                             "--reward_funcs format --reward_model " + dir + "/my_rm --reward_weights 1 0.5 "
                             "--num_generations 4 --per_device_train_batch_size 4 --max_completion_length 8 "
                             "--max_steps 1 --log_completions true --report_to none --output_dir " + dir + "/out");
  // A causal checkpoint relabelled has no score head: the run must say so, naming the file.
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("score.weight"), std::string::npos) << r.output;
}
