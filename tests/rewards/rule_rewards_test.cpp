// The formulas of format, cosine, repetition and soft_overlong
// (the project spec of the rewards, rewards.md), through the real plugin libraries.
#include <cmath>

#include <gtest/gtest.h>

#include "plugins/plugin_error.h"
#include "rewards/reward_test_util.h"

using grpo::testing::builtin_reward;
using grpo::testing::Completion;
using grpo::testing::score_one;

namespace {
constexpr double kPi = 3.14159265358979323846;
double cosfn(double t, double T, double lo, double hi) { return hi - (hi - lo) * (1 - std::cos(kPi * t / T)) / 2; }
}  // namespace

TEST(FormatReward, ExactShapeOnly) {
  auto fn = builtin_reward("format");
  EXPECT_EQ(score_one(*fn, {"<think>a</think><answer>b</answer>"}), 1.0);
  EXPECT_EQ(score_one(*fn, {"<think>\nmulti\nline</think>\n \t<answer>\n42\n</answer>"}), 1.0);
  EXPECT_EQ(score_one(*fn, {"<think></think><answer></answer>"}), 1.0);
  EXPECT_EQ(score_one(*fn, {"<think>a</think><answer>b</answer>\n"}), 0.0);  // nothing after </answer>
  EXPECT_EQ(score_one(*fn, {" <think>a</think><answer>b</answer>"}), 0.0);   // anchored at the start
  EXPECT_EQ(score_one(*fn, {"<think>a</think> x <answer>b</answer>"}), 0.0);  // only whitespace between
  EXPECT_EQ(score_one(*fn, {"<answer>b</answer>"}), 0.0);
  EXPECT_EQ(score_one(*fn, {""}), 0.0);
  // The lazy groups backtrack: a later </think> may close the block.
  EXPECT_EQ(score_one(*fn, {"<think>a</think>b</think><answer>c</answer>"}), 1.0);
  EXPECT_EQ(score_one(*fn, {"<think>a</think><answer>b</answer>c</answer>"}), 1.0);
}

TEST(RepetitionReward, SwiftFormulaOnWords) {
  auto fn = builtin_reward("repetition");
  EXPECT_EQ(score_one(*fn, {""}), 0.0);
  EXPECT_EQ(score_one(*fn, {"only two"}), 0.0);                // fewer words than n
  EXPECT_DOUBLE_EQ(score_one(*fn, {"a b c d e"}), 0.0);        // all 3-grams unique
  // "a a a a a": 3 trigrams, 1 unique -> (1 - 1/3) * -1
  EXPECT_DOUBLE_EQ(score_one(*fn, {"a a a a a"}), -(1.0 - 1.0 / 3.0));
  // lower-cased, whitespace of any kind
  EXPECT_DOUBLE_EQ(score_one(*fn, {"The cat\tTHE cat\nthe CAT"}), -(1.0 - 2.0 / 4.0));
}

TEST(RepetitionReward, OptionsAndTokenUnit) {
  auto fn = builtin_reward("repetition", {{"repetition_n_grams", 2}, {"repetition_max_penalty", -0.5}});
  // bigrams of "x y x y": xy yx xy -> 2 unique of 3
  EXPECT_DOUBLE_EQ(score_one(*fn, {"x y x y"}), -0.5 * (1.0 - 2.0 / 3.0));
  auto tok = builtin_reward("repetition", {{"unit", "token"}});
  Completion c{"日本日本日本", 6, {5, 6, 5, 6, 5, 6}};
  // trigrams over ids: 565 656 565 656 -> 2 unique of 4
  EXPECT_DOUBLE_EQ(score_one(*tok, c), -(1.0 - 2.0 / 4.0));
  EXPECT_THROW(builtin_reward("repetition", {{"unit", "char"}}), grpo::plugins::PluginError);
  EXPECT_THROW(builtin_reward("repetition", {{"repetition_n_grams", 0}}), grpo::plugins::PluginError);
}

TEST(SoftOverlongReward, RampAndFloor) {
  auto fn = builtin_reward("soft_overlong", {{"soft_max_length", 100}, {"soft_cache_length", 20}});
  EXPECT_EQ(score_one(*fn, {"", 0}), 0.0);
  EXPECT_EQ(score_one(*fn, {"x", 80}), 0.0);              // budget edge
  EXPECT_DOUBLE_EQ(score_one(*fn, {"x", 90}), -0.5);      // halfway into the cache
  EXPECT_DOUBLE_EQ(score_one(*fn, {"x", 100}), -1.0);     // at L_max
  EXPECT_DOUBLE_EQ(score_one(*fn, {"x", 500}), -1.0);     // floored (swift has no floor)
  // token count comes from the generated ids when given
  EXPECT_DOUBLE_EQ(score_one(*fn, {"x", -1, std::vector<int32_t>(95, 1)}), -0.75);
}

TEST(SoftOverlongReward, DefaultsAndRefusals) {
  auto fn = builtin_reward("soft_overlong", {{"soft_cache_length", 128}, {"max_completion_length", 512}});
  EXPECT_DOUBLE_EQ(score_one(*fn, {"x", 448}), -0.5);  // soft_max_length = max_completion_length
  try {
    builtin_reward("soft_overlong", {{"soft_max_length", 100}, {"soft_cache_length", 100}});
    FAIL() << "soft_cache_length >= soft_max_length must be refused";
  } catch (const grpo::plugins::PluginError& e) {
    EXPECT_NE(std::string(e.what()).find("smaller than soft_max_length"), std::string::npos) << e.what();
  }
  EXPECT_THROW(builtin_reward("soft_overlong"), grpo::plugins::PluginError);  // soft_cache_length required
  // unknown length is a clear failure of the batch, not a silent 0
  auto ok = builtin_reward("soft_overlong", {{"soft_max_length", 100}, {"soft_cache_length", 20}});
  EXPECT_TRUE(std::isnan(score_one(*ok, {"x", -1})));
  EXPECT_EQ(ok->failures(), 1);
}

TEST(CosineReward, FollowsTheSchedule) {
  auto fn = builtin_reward("cosine", {{"cosine_max_len", 100}});
  Completion right{"so \\boxed{42}", 0, {}, "42"}, wrong{"so \\boxed{41}", 0, {}, "42"};
  EXPECT_DOUBLE_EQ(score_one(*fn, right), 1.0);   // t = 0 -> min_len_value_correct
  EXPECT_DOUBLE_EQ(score_one(*fn, wrong), -0.5);  // t = 0 -> min_len_value_wrong
  right.tokens = wrong.tokens = 100;
  EXPECT_NEAR(score_one(*fn, right), 0.5, 1e-12);  // t = T -> max_len_value_correct
  EXPECT_NEAR(score_one(*fn, wrong), 0.0, 1e-12);
  right.tokens = wrong.tokens = 30;
  EXPECT_NEAR(score_one(*fn, right), cosfn(30, 100, 0.5, 1.0), 1e-12);
  EXPECT_NEAR(score_one(*fn, wrong), cosfn(30, 100, 0.0, -0.5), 1e-12);
  right.tokens = 200;  // past T: clamped, not rising again as in swift
  EXPECT_NEAR(score_one(*fn, right), 0.5, 1e-12);
  right.tokens = -1;
  right.ids = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  EXPECT_NEAR(score_one(*fn, right), cosfn(10, 100, 0.5, 1.0), 1e-12);
}

TEST(CosineReward, CustomValuesAndDefaultLength) {
  auto fn = builtin_reward("cosine", {{"cosine_min_len_value_correct", 2.0},
                                      {"cosine_max_len_value_correct", 1.0},
                                      {"max_completion_length", 50}});
  EXPECT_NEAR(score_one(*fn, {"\\boxed{7}", 25, {}, "7"}), 1.5, 1e-12);  // T = max_completion_length
  EXPECT_THROW(builtin_reward("cosine", {{"cosine_max_len", 0}}), grpo::plugins::PluginError);
}

TEST(AccuracyReward, MissingSolutionColumnIsAClearFailure) {
  auto fn = builtin_reward("accuracy");
  std::vector<grpo::plugins::RewardInput> in(1);
  in[0].completion = "\\boxed{1}";
  in[0].columns = grpo::plugins::RowColumns::from_json({{"answer", "1"}});
  std::vector<double> r = fn->score(in, {});
  EXPECT_TRUE(std::isnan(r[0]));
  EXPECT_EQ(fn->failures(), 1);
}
