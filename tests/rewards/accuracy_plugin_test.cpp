// Every case of tests/data/accuracy_cases.json (values from the real
// Math-Verify, called as ms-swift calls it) through the accuracy plugin.
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "rewards/reward_test_util.h"

TEST(AccuracyPlugin, AgreesWithMathVerifyOnEverySharedCase) {
  std::ifstream in(GRPO_TEST_DATA_DIR "/accuracy_cases.json");
  ASSERT_TRUE(in) << "missing " GRPO_TEST_DATA_DIR "/accuracy_cases.json";
  nlohmann::json cases = nlohmann::json::parse(in)["cases"];
  ASSERT_GE(cases.size(), 60u);
  std::vector<grpo::testing::Completion> completions;
  for (const auto& c : cases) completions.push_back({c["completion"], -1, {}, c["solution"]});
  auto fn = grpo::testing::builtin_reward("accuracy");
  std::vector<double> got = grpo::testing::score(*fn, completions);
  int agree = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    double want = cases[i]["reward"];
    if (got[i] == want) {
      ++agree;
    } else {
      ADD_FAILURE() << "case " << i << ": completion=" << cases[i]["completion"] << " solution=" << cases[i]["solution"]
                    << " want " << want << " got " << got[i];
    }
  }
  std::printf("accuracy agrees with Math-Verify on %d/%zu cases\n", agree, cases.size());
}
