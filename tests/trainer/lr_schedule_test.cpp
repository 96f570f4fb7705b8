// Schedules against values worked out by hand from transformers' definitions.
#include <cmath>

#include <gtest/gtest.h>

#include "trainer/lr_schedule.h"

using grpo::trainer::LrSchedule;

TEST(LrSchedule, WarmupThenCosine) {
  LrSchedule s("cosine", 1e-3, 10, -1, 0.2);  // warmup ceil(0.2 * 10) = 2
  EXPECT_EQ(s.warmup_steps(), 2);
  EXPECT_DOUBLE_EQ(s.lr(0), 0.0);
  EXPECT_DOUBLE_EQ(s.lr(1), 0.5e-3);
  EXPECT_DOUBLE_EQ(s.lr(2), 1e-3);
  EXPECT_NEAR(s.lr(6), 1e-3 * 0.5 * (1 + std::cos(M_PI * 0.5)), 1e-15);
  EXPECT_NEAR(s.lr(10), 0.0, 1e-15);
}

TEST(LrSchedule, LinearConstantAndExplicitWarmup) {
  LrSchedule linear("linear", 2.0, 5, 1, 0.9);  // warmup_steps wins over the ratio
  EXPECT_DOUBLE_EQ(linear.lr(0), 0.0);
  EXPECT_DOUBLE_EQ(linear.lr(1), 2.0);
  EXPECT_DOUBLE_EQ(linear.lr(3), 2.0 * (1 - 2.0 / 4.0));
  EXPECT_DOUBLE_EQ(LrSchedule("constant", 3.0, 5, 2, 0).lr(0), 3.0);
  LrSchedule cw("constant_with_warmup", 3.0, 5, 2, 0);
  EXPECT_DOUBLE_EQ(cw.lr(1), 1.5);
  EXPECT_DOUBLE_EQ(cw.lr(4), 3.0);
  EXPECT_THROW(LrSchedule("polynomial", 1, 1, 0, 0), std::invalid_argument);
}
