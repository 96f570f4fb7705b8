// The pieces of one GRPO step together on a real model: sample a group,
// score it, compute advantages, the policy's log-probs and the loss, and
// backpropagate — what must hold for every loss type.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/engine.h"
#include "model/weights.h"
#include "trainer/advantages.h"
#include "trainer/grpo_loss.h"
#include "trainer/rollout_batch.h"

using namespace grpo;

namespace {

const std::string kDir = GRPO_TEST_DATA_DIR "/tiny-qwen2";

struct Group {
  trainer::RolloutBatch batch;
  at::Tensor advantages;
};

// G = 4 completions of one prompt, scored by hand-picked rewards.
Group sample_group(model::CausalLM& policy, bool all_truncated_filtered) {
  model::Engine engine(policy);
  model::SamplingParams p;
  p.max_new_tokens = 6;
  auto done = engine.generate({{{93, 283, 208, 107}, 4, 42, {}}}, p);
  std::vector<trainer::RolloutSequence> seqs;
  for (const auto& c : done) seqs.push_back({{93, 283, 208, 107}, c.ids, c.finish == model::FinishReason::Length});
  at::Tensor rewards = torch::tensor({1.0, 0.0, 0.5, 0.25}, torch::kDouble).unsqueeze(1);  // [N, F=1]
  auto adv = trainer::compute_advantages(rewards, {1.0}, 4, trainer::ScaleRewards::Group);
  return {trainer::make_rollout_batch(seqs, 0, all_truncated_filtered), adv.advantages.to(at::kFloat)};
}

}  // namespace

TEST(GrpoStepMath, EveryLossTypeReachesEveryParameter) {
  for (auto type : {trainer::LossType::Grpo, trainer::LossType::Bnpo, trainer::LossType::DrGrpo,
                    trainer::LossType::Dapo}) {
    model::CausalLM policy = model::load_model(kDir), reference = model::load_model(kDir);
    Group g = sample_group(policy, false);
    at::Tensor ref;
    {
      torch::NoGradGuard no_grad;
      ref = trainer::completion_logprobs(*reference, g.batch, {1.0, 16, false}).logprobs;
    }
    at::Tensor logp = trainer::completion_logprobs(*policy, g.batch, {1.0, 16, false}).logprobs;
    trainer::LossOptions o;
    o.loss_type = type;
    o.beta = 0.04;
    o.max_completion_length = 6;
    trainer::LossOutput out = trainer::grpo_loss({logp, {}, ref, g.advantages, g.batch.completion_mask}, o);
    policy->zero_grad();
    out.loss.backward();
    for (auto& p : policy->named_parameters()) {
      ASSERT_TRUE(p.value().grad().defined()) << p.key();
      EXPECT_GT(p.value().grad().abs().sum().item<double>(), 0.0) << p.key() << " got no gradient";
    }
  }
}

TEST(GrpoStepMath, AllRowsFilteredGiveZeroLossAndZeroGradients) {
  model::CausalLM policy = model::load_model(kDir);
  Group g = sample_group(policy, true);  // max_new_tokens without a stop id: every row is truncated
  ASSERT_TRUE(g.batch.truncated.all().item<bool>());
  at::Tensor logp = trainer::completion_logprobs(*policy, g.batch, {1.0, 16, false}).logprobs;
  trainer::LossOptions o;
  o.beta = 0;
  trainer::LossOutput out = trainer::grpo_loss({logp, {}, {}, g.advantages, g.batch.completion_mask}, o);
  EXPECT_EQ(out.loss.item<double>(), 0.0);
  policy->zero_grad();
  out.loss.backward();
  for (auto& p : policy->named_parameters())
    if (p.value().grad().defined()) EXPECT_EQ(p.value().grad().abs().sum().item<double>(), 0.0) << p.key();
}
