// dynamic_sample's group collection and the live progress line's text.
#include <cmath>
#include <deque>

#include <gtest/gtest.h>

#include "trainer/generation_batch.h"
#include "trainer/progress_line.h"

using namespace grpo;
using trainer::GenerationBatch;
using trainer::GroupCollector;

namespace {

// `groups` groups of G rows; every row of group g has prompt id `first + g`
// and reward `rewards[g][i]`.
GenerationBatch batch_of(int first, const std::vector<std::vector<double>>& rewards) {
  static std::deque<Prompt> prompts;  // samples point at their prompt, which outlives them
  GenerationBatch b;
  b.rewards.names = {"r"};
  b.rewards.by_fn.assign(1, {});
  for (size_t g = 0; g < rewards.size(); ++g) {
    prompts.push_back({{first + static_cast<int>(g)}, "[]", nullptr});
    for (double r : rewards[g]) {
      Sample s;
      s.prompt = &prompts.back();
      s.ids = {1};
      b.samples.push_back(s);
      b.rewards.by_fn[0].push_back(r);
      b.rewards.total.push_back(r);
    }
  }
  return b;
}

at::Tensor stds(const std::vector<double>& v) { return at::tensor(v, at::kDouble); }

}  // namespace

TEST(GroupCollector, KeepsValidGroupsOfEveryAttemptThenFillsWithZeroVariance) {
  GroupCollector c(3, 2);
  c.add(batch_of(10, {{1, 1}, {0, 1}, {0, 0}}), stds({0, 0.7, 0}));
  EXPECT_FALSE(c.full());
  EXPECT_EQ(c.missing(), 2u);
  EXPECT_EQ(c.next_request(), 3u);  // 2 missing at a valid rate of 1/3: a whole batch (the cap)
  c.add(batch_of(20, {{1, 0}, {1, 1}, {0, 0}}), stds({0.7, 0, NAN}));
  EXPECT_EQ(c.missing(), 1u);
  EXPECT_EQ(c.next_request(), 3u);  // 1 missing at 2/6 valid
  GenerationBatch out = c.take();
  ASSERT_EQ(out.size(), 6u);
  EXPECT_EQ(out.samples[0].prompt->ids[0], 11);  // the valid groups first, in the order seen
  EXPECT_EQ(out.samples[2].prompt->ids[0], 20);
  EXPECT_EQ(out.samples[4].prompt->ids[0], 10);  // then the first zero-variance group
  EXPECT_EQ(out.rewards.by_fn[0][1], 1.0);
  EXPECT_EQ(out.rewards.total.size(), 6u);
}

TEST(GroupCollector, StopsCollectingOnceFullAndAsksForFewWhenMostAreValid) {
  GroupCollector c(4, 2);
  c.add(batch_of(0, {{0, 1}, {0, 1}, {1, 1}, {0, 1}}), stds({0.7, 0.7, 0, 0.7}));
  EXPECT_EQ(c.next_request(), 2u);  // 1 missing at 3/4 valid -> ceil(4/3)
  c.add(batch_of(10, {{0, 1}, {0, 1}}), stds({0.7, 0.7}));
  EXPECT_TRUE(c.full());
  EXPECT_EQ(c.next_request(), 0u);
  GenerationBatch out = c.take();
  ASSERT_EQ(out.size(), 8u);
  EXPECT_EQ(out.samples[6].prompt->ids[0], 10);  // the surplus valid group is not kept
}

TEST(GenerationBatch, RewardTensorIsRowsByFunctions) {
  GenerationBatch b = batch_of(0, {{1, 2}});
  at::Tensor t = trainer::reward_tensor(b.rewards);
  ASSERT_EQ(t.sizes(), (at::IntArrayRef{2, 1}));
  EXPECT_EQ(t[1][0].item<double>(), 2.0);
}

TEST(ProgressLine, ShowsStepRewardLossThroughputAndEta) {
  EXPECT_EQ(trainer::ProgressLine::format(3, 10, 0.5, 0.01234, 812.4, 125),
            "step 3/10  reward 0.500  loss 0.01234  812 tok/s  ETA 2m05s");
  EXPECT_EQ(trainer::ProgressLine::format(1, 10, NAN, NAN, 0, NAN), "step 1/10  0 tok/s  ETA ?");
  EXPECT_EQ(trainer::ProgressLine::format(1, 100, 1, 2, 3, 7300), "step 1/100  reward 1.000  loss 2  3 tok/s  ETA 2h01m");
}
