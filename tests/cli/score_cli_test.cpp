// `grpo-host score` and `grpo-host plugins` driven as a user drives them.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/cli_util.h"
#include "plugin_paths.h"

using namespace grpo::testing;

namespace {

struct ScoreFiles {
  std::string dir, rows, completions, out;
};

ScoreFiles make_files(const std::string& name) {
  ScoreFiles f;
  f.dir = temp_dir(name);
  f.rows = f.dir + "/rows.jsonl";
  f.completions = f.dir + "/c.jsonl";
  f.out = f.dir + "/rewards.jsonl";
  write_file(f.rows,
             "{\"problem\": \"What is 6*7?\", \"solution\": \"42\"}\n"
             "{\"messages\": [{\"role\": \"user\", \"content\": \"1+1?\"}], \"solution\": \"$2$\"}\n");
  write_file(f.completions,
             "{\"completion\": \"<think>6*7</think><answer>\\\\boxed{42}</answer>\", \"num_tokens\": 12}\n"
             "{\"completion\": \"the answer is 3\", \"num_tokens\": 5}\n");
  return f;
}

}  // namespace

TEST(ScoreCommand, ScoresWithBuiltInRewardsAndWeights) {
  ScoreFiles f = make_files("score_ok");
  CommandResult r = run_host("score --dataset " + f.rows + " --completions " + f.completions +
                             " --reward_funcs accuracy format --reward_weights 0.7 0.3 --output " + f.out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto lines = read_jsonl(f.out);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["rewards"]["accuracy"], 1.0);
  EXPECT_EQ(lines[0]["rewards"]["format"], 1.0);
  EXPECT_DOUBLE_EQ(lines[0]["reward"].get<double>(), 1.0);
  EXPECT_EQ(lines[1]["rewards"]["accuracy"], 0.0);
  EXPECT_EQ(lines[1]["row"], 1);
  EXPECT_NE(r.output.find("weighted total"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("accuracy"), std::string::npos) << r.output;
}

TEST(ScoreCommand, ConstantRewardsGiveTheWeightedMean) {
  ScoreFiles f = make_files("score_weights");
  // format is 1 on the first, 0 on the second: totals 0.3 and 0.0
  CommandResult r = run_host("score --dataset " + f.rows + " --completions " + f.completions +
                             " --reward_funcs format --reward_weights 0.3 --output " + f.out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto lines = read_jsonl(f.out);
  EXPECT_DOUBLE_EQ(lines[0]["reward"].get<double>(), 0.3);
  EXPECT_DOUBLE_EQ(lines[1]["reward"].get<double>(), 0.0);
}

TEST(ScoreCommand, GroupsOfGCompletionsPerRow) {
  ScoreFiles f = make_files("score_groups");
  write_file(f.completions,
             "{\"completion\": \"\\\\boxed{42}\"}\n{\"completion\": \"\\\\boxed{41}\"}\n"
             "{\"completion\": \"\\\\boxed{2}\"}\n{\"completion\": \"\\\\boxed{2}\"}\n");
  CommandResult r = run_host("score --dataset " + f.rows + " --completions " + f.completions +
                             " --reward_funcs accuracy --output " + f.out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto lines = read_jsonl(f.out);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0]["rewards"]["accuracy"], 1.0);
  EXPECT_EQ(lines[1]["rewards"]["accuracy"], 0.0);
  EXPECT_EQ(lines[2]["row"], 1);
  EXPECT_EQ(lines[3]["rewards"]["accuracy"], 1.0);
}

TEST(ScoreCommand, PluginArgsFromYamlReachThePlugin) {
  ScoreFiles f = make_files("score_yaml");
  write_file(f.dir + "/x.yaml",
             "reward_funcs: [soft_overlong]\n"
             "max_completion_length: 16\n"
             "plugin_args:\n  soft_overlong: {soft_cache_length: 8}\n");
  CommandResult r = run_host("score --config " + f.dir + "/x.yaml --dataset " + f.rows + " --completions " +
                             f.completions + " --output " + f.out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto lines = read_jsonl(f.out);
  EXPECT_DOUBLE_EQ(lines[0]["rewards"]["soft_overlong"].get<double>(), -0.5);  // 12 tokens, ramp 8..16
  EXPECT_DOUBLE_EQ(lines[1]["rewards"]["soft_overlong"].get<double>(), 0.0);
}

TEST(ScoreCommand, BrokenPluginIsReportedAndOthersStillScore) {
  ScoreFiles f = make_files("score_broken");
  CommandResult r = run_host(std::string("score --plugins ") + FIXTURE_SCORE_THROWS + " --dataset " + f.rows +
                             " --completions " + f.completions + " --reward_funcs fixture_throws format --output " +
                             f.out);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("fixture exploded inside score"), std::string::npos) << r.output;
  auto lines = read_jsonl(f.out);
  EXPECT_TRUE(lines[0]["rewards"]["fixture_throws"].is_null());
  EXPECT_EQ(lines[0]["rewards"]["format"], 1.0);
}

TEST(ScoreCommand, BadInputsGiveClearErrors) {
  ScoreFiles f = make_files("score_bad");
  write_file(f.dir + "/bad.jsonl", "{\"completion\": \"a\"}\n{not json\n");
  CommandResult r = run_host("score --dataset " + f.rows + " --completions " + f.dir +
                             "/bad.jsonl --reward_funcs format");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("bad.jsonl:2"), std::string::npos) << r.output;

  r = run_host("score --dataset " + f.dir + "/missing.jsonl --completions " + f.completions + " --reward_funcs format");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("missing.jsonl"), std::string::npos) << r.output;

  r = run_host("score --dataset " + f.rows + " --completions " + f.completions + " --reward_funcs formatt");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("did you mean 'format'"), std::string::npos) << r.output;

  r = run_host("score --dataset " + f.rows + " --completions " + f.completions +
               " --reward_funcs format accuracy --reward_weights 1.0");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("reward_weights"), std::string::npos) << r.output;

  r = run_host(std::string("score --plugins ") + FIXTURE_WRONG_MAJOR + " --dataset " + f.rows + " --completions " +
               f.completions + " --reward_funcs format");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("SDK 2.0.0"), std::string::npos) << r.output;
}

TEST(PluginsCommand, ListsBuiltInsAndDescribesOptions) {
  CommandResult r = run_host("plugins");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* name : {"accuracy", "format", "cosine", "repetition", "soft_overlong"})
    EXPECT_NE(r.output.find(name), std::string::npos) << name << "\n" << r.output;
  r = run_host("plugins --describe cosine");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("cosine_max_len_value_wrong"), std::string::npos) << r.output;
  r = run_host("plugins --describe cosin");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("did you mean 'cosine'"), std::string::npos) << r.output;
}

TEST(PluginsCommand, FindsPluginsWhenTheBuildIsMoved) {
  std::string dir = temp_dir("moved_build");
  CommandResult r = run_shell("mkdir -p " + dir + "/bin " + dir + "/lib/grpo && cp '" GRPO_HOST_EXE "' " + dir +
                              "/bin/ && cp -r '" PLUGIN_DIR "' " + dir + "/lib/grpo/ && " + dir + "/bin/grpo-host plugins");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const std::string& out = r.output;
  EXPECT_NE(out.find(dir + "/lib/grpo/plugins/libgrpo_accuracy.so"), std::string::npos) << out;
}
