// The log level: GRPO_LOG_LEVEL, then --log_level (or the YAML key).
#include <gtest/gtest.h>

#include "cli/cli_util.h"

using namespace grpo::testing;

namespace {

// grpo-host score on one row: it loads the built-in plugins and logs at info.
std::string score_args(const std::string& dir) {
  write_file(dir + "/rows.jsonl", "{\"problem\": \"1+1=?\", \"solution\": \"2\"}\n");
  write_file(dir + "/c.jsonl", "{\"completion\": \"<think>x</think><answer>2</answer>\"}\n");
  return "score --dataset " + dir + "/rows.jsonl --completions " + dir + "/c.jsonl --reward_funcs format ";
}

}  // namespace

TEST(LogLevel, DebugShowsWhatInfoHides) {
  const std::string dir = temp_dir("log_level_debug");
  CommandResult plain = run_host(score_args(dir));
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  EXPECT_EQ(plain.output.find("[debug]"), std::string::npos) << plain.output;
  CommandResult flag = run_host(score_args(dir) + "--log_level debug");
  ASSERT_EQ(flag.exit_code, 0) << flag.output;
  EXPECT_NE(flag.output.find("[debug] plugin 'format' (grpo.reward/1"), std::string::npos) << flag.output;
  CommandResult env = run_host(score_args(dir), "GRPO_LOG_LEVEL=debug");
  EXPECT_NE(env.output.find("[debug] plugin 'format'"), std::string::npos) << env.output;
  CommandResult both = run_host(score_args(dir) + "--log_level info", "GRPO_LOG_LEVEL=debug");
  EXPECT_EQ(both.output.find("[debug]"), std::string::npos) << "the flag wins: " << both.output;
}

TEST(LogLevel, AnUnknownLevelIsAnInputError) {
  const std::string dir = temp_dir("log_level_bad");
  CommandResult env = run_host(score_args(dir), "GRPO_LOG_LEVEL=loud");
  EXPECT_EQ(env.exit_code, 2) << env.output;
  EXPECT_NE(env.output.find("GRPO_LOG_LEVEL 'loud' is not a log level"), std::string::npos) << env.output;
  CommandResult flag = run_host(score_args(dir) + "--log_level loud");
  EXPECT_EQ(flag.exit_code, 2) << flag.output;
  EXPECT_NE(flag.output.find("--log_level"), std::string::npos) << flag.output;
}
