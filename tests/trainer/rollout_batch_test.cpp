// Sampled completions as training tensors, and the policy's log-probs of them.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <torch/types.h>
#include <torch/utils.h>

#include "model/engine.h"
#include "model/weights.h"
#include "tokenizer/byte_tokenizer.h"
#include "trainer/prompt_source.h"
#include "trainer/rollout_batch.h"

using namespace grpo;

TEST(RolloutBatch, LayoutMasksAndOverlongFilter) {
  std::vector<trainer::RolloutSequence> seqs = {{{5, 6, 7}, {8, 9}, false}, {{1}, {2, 3, 4}, true}};
  trainer::RolloutBatch b = trainer::make_rollout_batch(seqs, 0, /*overlong_filter=*/false);
  EXPECT_EQ(b.prompt_length, 3);
  EXPECT_TRUE(at::equal(b.input_ids, torch::tensor({{5, 6, 7, 8, 9, 0}, {0, 0, 1, 2, 3, 4}}, torch::kLong)));
  EXPECT_TRUE(at::equal(b.attention_mask, torch::tensor({{1, 1, 1, 1, 1, 0}, {0, 0, 1, 1, 1, 1}}, torch::kLong)));
  EXPECT_TRUE(at::equal(b.completion_mask, torch::tensor({{1.f, 1.f, 0.f}, {1.f, 1.f, 1.f}})));
  trainer::RolloutBatch f = trainer::make_rollout_batch(seqs, 0, /*overlong_filter=*/true);
  EXPECT_TRUE(at::equal(f.completion_mask, torch::tensor({{1.f, 1.f, 0.f}, {0.f, 0.f, 0.f}})));
  EXPECT_TRUE(f.truncated[1].item<bool>());
  EXPECT_THROW(trainer::make_rollout_batch({}, 0, false), std::invalid_argument);
}

TEST(RolloutBatch, SamplesCarryLossByTheirFinishReason) {
  const Prompt prompt{{5, 6}, "[]", nullptr};
  std::vector<Sample> samples(3);
  const FinishReason finish[] = {FinishReason::Stop, FinishReason::Length, FinishReason::Abort};
  for (size_t i = 0; i < 3; ++i) {
    samples[i].prompt = &prompt;
    samples[i].ids = {8, 9};
    samples[i].finish = finish[i];
  }
  trainer::RolloutBatch b = trainer::make_rollout_batch(samples, 0, 3, 0, /*overlong_filter=*/false);
  EXPECT_TRUE(at::equal(b.completion_mask, torch::tensor({{1.f, 1.f}, {1.f, 1.f}, {0.f, 0.f}})))
      << "an aborted completion never trains";
  trainer::RolloutBatch f = trainer::make_rollout_batch(samples, 0, 3, 0, /*overlong_filter=*/true);
  EXPECT_TRUE(at::equal(f.completion_mask, torch::tensor({{1.f, 1.f}, {0.f, 0.f}, {0.f, 0.f}})));
  EXPECT_TRUE(at::equal(f.truncated, torch::tensor({false, true, false})));
  trainer::RolloutBatch tail = trainer::make_rollout_batch(samples, 2, 1, 0, false);
  EXPECT_EQ(tail.completion_mask.sum().item<float>(), 0.0f);
}

TEST(RolloutBatch, OnPolicyLogprobsEqualTheSamplersAcrossPaddedRows) {
  const std::string dir = GRPO_TEST_DATA_DIR "/tiny-qwen2";
  model::CausalLM lm = model::load_model(dir);
  model::Engine engine(lm);
  model::SamplingParams p;
  p.max_new_tokens = 7;
  p.temperature = 0.8;
  std::vector<int32_t> short_prompt = {11, 12}, long_prompt = {93, 283, 208, 107, 40, 235};
  auto done = engine.generate({{short_prompt, 2, 1, {}}, {long_prompt, 2, 2, {}}}, p);
  std::vector<trainer::RolloutSequence> seqs;
  for (const auto& c : done) seqs.push_back({c.request == 0 ? short_prompt : long_prompt, c.ids, false});
  seqs[1].completion_ids.resize(4);  // rows of different lengths: right padding must not matter
  trainer::RolloutBatch b = trainer::make_rollout_batch(seqs, 0, false);
  torch::NoGradGuard no_grad;
  at::Tensor lp = trainer::completion_logprobs(*lm, b, {0.8, 16, false}).logprobs;
  for (size_t i = 0; i < seqs.size(); ++i)
    for (size_t t = 0; t < seqs[i].completion_ids.size(); ++t)
      EXPECT_NEAR(lp[static_cast<int64_t>(i)][static_cast<int64_t>(t)].item<float>(), done[i].logprobs[t], 1e-4)
          << i << "," << t;
  EXPECT_EQ(lp[1][5].item<float>(), 0.0f);  // padding
}

TEST(PromptSource, MaxLengthCutsOrDropsLongPrompts) {
  auto dir = std::filesystem::temp_directory_path() / "grpo_prompt_source";
  std::filesystem::remove_all(dir);
  tok::write_byte_level_tokenizer(dir.string());
  tok::Tokenizer tokenizer = tok::Tokenizer::from_dir(dir.string());
  std::ofstream(dir / "rows.jsonl") << "{\"prompt\": \"short\"}\n{\"prompt\": \"" << std::string(200, 'x') << "\"}\n";
  const std::vector<data::Row> data = data::load_rows((dir / "rows.jsonl").string());
  auto source = [&](int64_t max_tokens, trainer::Truncation truncation) {
    return trainer::PromptSource(data, {&tokenizer, tok::ChatFamily::ChatML, "", max_tokens, truncation}, false, 0);
  };
  trainer::PromptSource full = source(0, trainer::Truncation::Left);
  const size_t long_len = full.next(2)[1]->ids.size();
  trainer::PromptSource left = source(50, trainer::Truncation::Left);
  auto l = left.next(2);
  EXPECT_EQ(l[1]->ids.size(), 50u);
  EXPECT_TRUE(std::equal(l[1]->ids.begin(), l[1]->ids.end(), full.next(2)[1]->ids.end() - 50));  // the end is kept
  trainer::PromptSource right = source(50, trainer::Truncation::Right);
  EXPECT_EQ(right.next(2)[1]->ids.size(), 50u);
  trainer::PromptSource del = source(50, trainer::Truncation::Delete);
  EXPECT_EQ(del.size(), 1u);
  EXPECT_EQ(del.dropped(), 1u);
  EXPECT_GT(long_len, 200u);
}

// A text far longer than any prompt is cut before it is tokenized, and what
// truncation keeps is the same as from tokenizing all of it: the end
// (left) or the start (right), with Qwen3's real BPE and multi-byte text.
TEST(PromptSource, AHugeTextIsCutBeforeTokenizingToTheSameTokens) {
  const tok::Tokenizer tokenizer = tok::Tokenizer::from_file(GRPO_TEST_DATA_DIR "/qwen3-tokenizer.json");
  std::string text;
  for (int i = 0; text.size() < 2'000'000; ++i)
    text += "Step " + std::to_string(i) + ": naïve café — 数学题 " + std::string(i % 7, '=') + " x^" +
            std::to_string(i * 37 % 101) + "\n";
  nlohmann::json row = {{"prompt", text}};
  const std::vector<data::Row> data = {data::Row{row, "rows.jsonl:1"}};
  auto source = [&](int64_t max_tokens, trainer::Truncation truncation) {
    return trainer::PromptSource(data, {&tokenizer, tok::ChatFamily::ChatML, "", max_tokens, truncation}, false, 0);
  };
  const std::vector<int32_t> whole = source(0, trainer::Truncation::Left).next(1)[0]->ids;
  ASSERT_GT(whole.size(), 500'000u);
  trainer::PromptSource left = source(300, trainer::Truncation::Left);
  const Prompt& l = *left.next(1)[0];
  EXPECT_EQ(l.ids, std::vector<int32_t>(whole.end() - 300, whole.end()));
  EXPECT_LT(l.messages_json.size(), text.size() / 4);  // the text was cut, not tokenized whole
  trainer::PromptSource right = source(300, trainer::Truncation::Right);
  EXPECT_EQ(right.next(1)[0]->ids, std::vector<int32_t>(whole.begin(), whole.begin() + 300));
}
