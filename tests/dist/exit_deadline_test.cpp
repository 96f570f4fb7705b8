// dist/exit_deadline.h: a call past its limit ends the process with the
// reason; one that returns in time leaves it running at once.
#include <gtest/gtest.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <thread>

#include "dist/exit_deadline.h"

using grpo::dist::ExitDeadline;

TEST(ExitDeadline, ACallPastItsLimitEndsTheProcessSayingWhy) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        spdlog::set_default_logger(spdlog::stderr_color_mt("stderr"));  // where the death test reads
        ExitDeadline deadline(std::chrono::milliseconds(200), "joining the stuck group");
        std::this_thread::sleep_for(std::chrono::seconds(60));
      },
      ::testing::ExitedWithCode(1), "joining the stuck group \\(not finished after 0.2 s; exiting\\)");
}

TEST(ExitDeadline, ACallThatReturnsInTimeGoesOnWithoutWaitingOutTheLimit) {
  const auto start = std::chrono::steady_clock::now();
  { ExitDeadline deadline(std::chrono::minutes(10), "never said"); }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::minutes(1));
}
