// Rewards -> advantages (spec grpo.md §2) on cases small enough to do by hand.
#include "trainer/advantages.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

using namespace grpo::trainer;

namespace {

const double kNan = std::numeric_limits<double>::quiet_NaN();

// rows: N x F values, row-major.
at::Tensor matrix(const std::vector<double>& values, int64_t f) {
  const int64_t n = static_cast<int64_t>(values.size()) / f;
  return at::tensor(values, at::TensorOptions().dtype(at::kDouble)).view({n, f});
}

void expect_values(const at::Tensor& got, const std::vector<double>& want) {
  ASSERT_EQ(got.numel(), static_cast<int64_t>(want.size()));
  at::Tensor g = got.to(at::kDouble).contiguous();
  for (size_t i = 0; i < want.size(); ++i) {
    const double v = g[static_cast<int64_t>(i)].item<double>();
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(v)) << "index " << i << ": got " << v << ", want NaN";
    } else {
      EXPECT_NEAR(v, want[i], 1e-12) << "index " << i;
    }
  }
}

}  // namespace

TEST(Advantages, GroupScaleDividesByEachGroupsBesselStdPlusEpsilon) {
  // Groups {1, 3} (mean 2, std sqrt(2)) and {2, 2} (std 0).
  Advantages a = compute_advantages(matrix({1, 3, 2, 2}, 1), {1.0}, 2, ScaleRewards::Group);
  const double s = std::sqrt(2.0) + 1e-4;
  expect_values(a.advantages, {-1 / s, 1 / s, 0, 0});
  expect_values(a.rewards, {1, 3, 2, 2});
  expect_values(a.group_std, {std::sqrt(2.0), 0});
  EXPECT_EQ(a.all_nan_rows, 0);
  EXPECT_DOUBLE_EQ(a.frac_zero_std, 0.5);
}

TEST(Advantages, BatchScaleCentresPerGroupButDividesByTheBatchStd) {
  // Batch {1, 3, 2, 2}: mean 2, Bessel std sqrt(2 / 3).
  Advantages a = compute_advantages(matrix({1, 3, 2, 2}, 1), {1.0}, 2, ScaleRewards::Batch);
  const double s = std::sqrt(2.0 / 3.0) + 1e-4;
  expect_values(a.advantages, {-1 / s, 1 / s, 0, 0});
  expect_values(a.group_std, {std::sqrt(2.0), 0});
  EXPECT_DOUBLE_EQ(a.frac_zero_std, 0.0);  // TRL looks at the std it divides by: the batch's

  // Centring stays per group: {0, 10} and {100, 110} both give -5, +5 over the batch std.
  Advantages b = compute_advantages(matrix({0, 10, 100, 110}, 1), {1.0}, 2, ScaleRewards::Batch);
  const double var = (55.0 * 55 + 45 * 45 + 45 * 45 + 55 * 55) / 3;  // around the batch mean 55
  const double sb = std::sqrt(var) + 1e-4;
  expect_values(b.advantages, {-5 / sb, 5 / sb, -5 / sb, 5 / sb});
}

TEST(Advantages, NoScaleOnlyCentres) {
  Advantages a = compute_advantages(matrix({1, 3, 2, 2}, 1), {1.0}, 2, ScaleRewards::None);
  expect_values(a.advantages, {-1, 1, 0, 0});
  EXPECT_DOUBLE_EQ(a.frac_zero_std, 0.5);  // still measured on the group std
}

TEST(Advantages, NanMeansNoOpinionAndAllNanRowsGetZeroAdvantage) {
  // r = nansum(R * w): {1, NaN | 4, 2}. Group 0 has one scored row: mean 1,
  // std NaN, so both its rows get 0. Group 1: mean 3, std sqrt(2).
  at::Tensor r = matrix({1, kNan, kNan, kNan, 3, 1, 0, 2}, 2);
  Advantages a = compute_advantages(r, {1.0, 1.0}, 2, ScaleRewards::Group);
  const double s = std::sqrt(2.0) + 1e-4;
  expect_values(a.rewards, {1, kNan, 4, 2});
  expect_values(a.advantages, {0, 0, 1 / s, -1 / s});
  expect_values(a.group_std, {kNan, std::sqrt(2.0)});
  EXPECT_EQ(a.all_nan_rows, 1);
  EXPECT_DOUBLE_EQ(a.frac_zero_std, 0.0);  // an undefined std is not a zero std

  // Batch: nanstd of {1, 4, 2} = sqrt(7 / 3); row 0 sits at its group mean.
  Advantages b = compute_advantages(r, {1.0, 1.0}, 2, ScaleRewards::Batch);
  const double sb = std::sqrt(7.0 / 3.0) + 1e-4;
  expect_values(b.advantages, {0, 0, 1 / sb, -1 / sb});

  Advantages c = compute_advantages(r, {1.0, 1.0}, 2, ScaleRewards::None);
  expect_values(c.advantages, {0, 0, 1, -1});
}

TEST(Advantages, AGroupWithOneValidValueHasNoStdAndZeroAdvantage) {
  Advantages a = compute_advantages(matrix({5, kNan, kNan, 1, 2, 3}, 1), {1.0}, 3, ScaleRewards::Group);
  expect_values(a.group_std, {kNan, 1.0});
  expect_values(a.advantages, {0, 0, 0, -1 / (1 + 1e-4), 0, 1 / (1 + 1e-4)});
  EXPECT_EQ(a.all_nan_rows, 2);
}

TEST(Advantages, WeightsScaleEachFunctionAndSkipItsNan) {
  // r = {2 * 1 + NaN skipped, 2 * 0 + 0.5 * 2} = {2, 1}: mean 1.5, std sqrt(0.5).
  Advantages a = compute_advantages(matrix({1, kNan, 0, 2}, 2), {2.0, 0.5}, 2, ScaleRewards::Group);
  const double s = std::sqrt(0.5) + 1e-4;
  expect_values(a.rewards, {2, 1});
  expect_values(a.advantages, {0.5 / s, -0.5 / s});
}

TEST(Advantages, ConstantRewardsWithWeightsGiveTheWeightedRewardAndZeroAdvantage) {
  // TRL's test_reward_metric_reflects_reward_weights: weights [0.7, 0.3], rewards [1, 0] -> 0.7.
  at::Tensor r = matrix({1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0}, 2);
  for (ScaleRewards scale : {ScaleRewards::Group, ScaleRewards::Batch, ScaleRewards::None}) {
    Advantages a = compute_advantages(r, {0.7, 0.3}, 3, scale);
    expect_values(a.rewards, std::vector<double>(6, 0.7));
    expect_values(a.advantages, std::vector<double>(6, 0.0));
    EXPECT_DOUBLE_EQ(a.frac_zero_std, 1.0);
    EXPECT_EQ(a.all_nan_rows, 0);
  }
}

TEST(Advantages, AllNanRewardsGiveZeroAdvantagesAndCountEveryRow) {
  at::Tensor r = at::full({4, 2}, kNan, at::kDouble);
  for (ScaleRewards scale : {ScaleRewards::Group, ScaleRewards::Batch, ScaleRewards::None}) {
    Advantages a = compute_advantages(r, {1.0, 1.0}, 2, scale);
    expect_values(a.advantages, {0, 0, 0, 0});
    expect_values(a.rewards, {kNan, kNan, kNan, kNan});
    EXPECT_EQ(a.all_nan_rows, 4);
    EXPECT_DOUBLE_EQ(a.frac_zero_std, 0.0);
  }
}

TEST(Advantages, AnEmptyBatchGivesEmptyResults) {
  Advantages a = compute_advantages(at::empty({0, 2}, at::kDouble), {1.0, 1.0}, 4, ScaleRewards::Batch);
  EXPECT_EQ(a.advantages.numel(), 0);
  EXPECT_EQ(a.group_std.numel(), 0);
  EXPECT_EQ(a.all_nan_rows, 0);
}

TEST(Advantages, Float32RewardsAreAccepted) {
  Advantages a = compute_advantages(matrix({1, 3}, 1).to(at::kFloat), {1.0}, 2, ScaleRewards::None);
  EXPECT_EQ(a.advantages.scalar_type(), at::kDouble);
  expect_values(a.advantages, {-1, 1});
}

TEST(Advantages, RejectsShapesThatDoNotFit) {
  EXPECT_THROW(compute_advantages(matrix({1, 2, 3}, 1), {1.0}, 2, ScaleRewards::Group), std::invalid_argument);
  EXPECT_THROW(compute_advantages(matrix({1, 2, 3, 4}, 2), {1.0}, 1, ScaleRewards::Group), std::invalid_argument);
  EXPECT_THROW(compute_advantages(at::ones({4}, at::kDouble), {1.0}, 2, ScaleRewards::Group),
               std::invalid_argument);
  EXPECT_THROW(compute_advantages(matrix({1, 2}, 1), {1.0}, 0, ScaleRewards::Group), std::invalid_argument);
  try {
    compute_advantages(matrix({1, 2, 3}, 1), {1.0}, 2, ScaleRewards::Group);
    ADD_FAILURE() << "no error for 3 completions in groups of 2";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("num_generations = 2"), std::string::npos) << e.what();
  }
}
