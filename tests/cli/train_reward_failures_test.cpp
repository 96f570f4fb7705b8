// Reward failures nobody misses: per-step counts in logging.jsonl, infinite
// rewards turned into NaN with a warning, and a run whose reward failed ends
// with a summary and a non-zero exit unless the user tolerates it.
#include <filesystem>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/cli_util.h"
#include "plugin_paths.h"

using namespace grpo::testing;

namespace {

std::string flags(const std::string& dir, const std::string& plugin, const std::string& reward) {
  return "train --model " + dir + "/model --dataset " + dir + "/rows.jsonl --train_type full --plugins " + plugin +
         " --reward_funcs " + reward + " format --num_generations 4 --per_device_train_batch_size 4 "
         "--gradient_accumulation_steps 1 --max_completion_length 8 --logging_steps 1 --max_steps 2 "
         "--report_to none --gradient_checkpointing false --output_dir " + dir + "/out ";
}

}  // namespace

TEST(TrainRewardFailures, AFailingRewardIsCountedSummarisedAndFailsTheRun) {
  const std::string dir = tiny_run_dir("train_reward_throws");
  CommandResult r = run_host(flags(dir, FIXTURE_SCORE_THROWS, "fixture_throws"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("reward 'fixture_throws'"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("failed on 2 batch(es)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--tolerate_reward_errors true"), std::string::npos) << r.output;
  EXPECT_TRUE(std::filesystem::exists(dir + "/out/checkpoint-2")) << "the finished steps are kept";
  auto log = read_jsonl(dir + "/out/logging.jsonl");
  ASSERT_EQ(log.size(), 2u);
  for (const auto& line : log) {
    EXPECT_EQ(line["rewards/fixture_throws/internal_errors"], 1.0) << line;
    EXPECT_EQ(line["rewards/fixture_throws/nan_frac"], 1.0) << line;
    EXPECT_EQ(line["rewards/format/internal_errors"], 0.0) << line;
    EXPECT_EQ(line["rewards/format/nan_frac"], 0.0) << line;
  }
}

TEST(TrainRewardFailures, ToleratedFailuresExitZero) {
  const std::string dir = tiny_run_dir("train_reward_tolerated");
  CommandResult r = run_host(flags(dir, FIXTURE_SCORE_THROWS, "fixture_throws") + "--tolerate_reward_errors true");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("failed on 2 batch(es)"), std::string::npos) << "still summarised: " << r.output;
}

TEST(TrainRewardFailures, InfiniteRewardsAreNaNWithAWarning) {
  const std::string dir = tiny_run_dir("train_reward_inf");
  CommandResult r = run_host(flags(dir, FIXTURE_RETURNS_INF, "fixture_inf"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("returned 2 infinite value(s) of 4"), std::string::npos) << r.output;
  auto log = read_jsonl(dir + "/out/logging.jsonl");
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[0]["rewards/fixture_inf/nan_frac"], 0.5) << log[0];
  EXPECT_EQ(log[0]["rewards/fixture_inf/internal_errors"], 0.0) << log[0];
  // The finite half still ranks its group: the total is not Inf, and not every advantage is 0.
  EXPECT_TRUE(log[0]["reward"].is_number()) << log[0];
}
