// The generation engine on the tiny-qwen2 fixture.
#include <gtest/gtest.h>
#include <torch/types.h>
#include <torch/utils.h>

#include "model/cpu_small_matmul.h"
#include "model/engine.h"
#include "model/logprobs.h"
#include "model/weights.h"
#include "tokenizer/tokenizer.h"

using namespace grpo::model;

namespace {

const std::string kDir = GRPO_TEST_DATA_DIR "/tiny-qwen2";
const std::vector<int32_t> kPrompt = {93, 283, 208, 107, 40, 235, 119, 177, 185, 88, 109};

Engine& engine() {
  static Engine e(load_model(kDir));
  return e;
}

SamplingParams params(int64_t max_new, double temperature = 1.0, int64_t top_k = 0) {
  SamplingParams p;
  p.max_new_tokens = max_new;
  p.temperature = temperature;
  p.top_k = top_k;
  return p;
}

}  // namespace

TEST(Engine, TopK1IsGreedyAndMatchesTransformersContinuation) {
  auto out = engine().generate({{kPrompt, 1, 7, {}}}, params(16, 0.7, 1));
  ASSERT_EQ(out.size(), 1u);
  std::vector<int32_t> want(16, 296);  // expected.json "greedy"
  EXPECT_EQ(out[0].ids, want);
  EXPECT_EQ(out[0].finish, FinishReason::Length);
}

// Every projection and the lm_head of each forward pass (2 layers x 7 + 1 at
// this fixture's shapes; 4 tokens are a prefill and 3 decode steps) take the
// decode matmul where the CPU has AVX-512: one that stopped would be missed.
// Checked before any kernel runs: on a GPU an id past the embedding would be a
// device-side assert, which ends the process's CUDA context.
TEST(Engine, APromptIdOutsideTheVocabularyIsRefusedNamingIt) {
  const int64_t V = engine().model()->config().vocab_size;
  for (int32_t bad : {static_cast<int32_t>(V), -1}) {
    std::vector<int32_t> prompt = kPrompt;
    prompt[3] = bad;
    try {
      engine().generate({{kPrompt, 1, 7, {}}, {prompt, 1, 7, {}}}, params(4));
      FAIL() << "expected an error for id " << bad;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("request 1: prompt id " + std::to_string(bad) + " is not a token id"),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_EQ(engine().generate({{kPrompt, 1, 7, {}}}, params(16, 0.7, 1))[0].ids, std::vector<int32_t>(16, 296));
}

TEST(Engine, DecodesThroughTheSmallMatmulWhereTheCpuHasAvx512) {
  const int64_t before = cpu::small_linear_count();
  engine().generate({{kPrompt, 2, 3, {}}}, params(4));
  const int64_t calls = cpu::small_linear_count() - before;
  // 4 forwards (a prefill, 3 steps), each 4 products per layer (q/k/v packed
  // in one, o, gate/up packed in one, down) over 2 layers and the lm_head.
  if (__builtin_cpu_supports("avx512f")) EXPECT_EQ(calls, 4 * (4 * 2 + 1));
  else EXPECT_EQ(calls, 0);
}

TEST(Engine, CopiesGetDistinctSeedsAndSeedsReproduce) {
  auto a = engine().generate({{kPrompt, 4, 123, {}}}, params(12));
  auto b = engine().generate({{kPrompt, 4, 123, {}}}, params(12));
  ASSERT_EQ(a.size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(a[i].ids, b[i].ids) << i;
  int distinct = 0;
  for (size_t i = 1; i < 4; ++i) distinct += a[i].ids != a[0].ids;
  EXPECT_GT(distinct, 0) << "the copies of one prompt must not coincide";
  // A copy's output does not depend on the batch it runs in.
  auto alone = engine().generate({{kPrompt, 1, 123, {}}}, params(12));
  EXPECT_EQ(alone[0].ids, a[0].ids);
}

TEST(Engine, ReturnedLogprobsEqualRecomputedOnes) {
  const double temperature = 0.8;
  auto out = engine().generate({{kPrompt, 2, 5, {}}, {{1, 2, 3}, 1, 9, {}}}, params(10, temperature));
  torch::NoGradGuard no_grad;
  for (const auto& c : out) {
    const auto& prompt = c.request == 0 ? kPrompt : std::vector<int32_t>{1, 2, 3};
    std::vector<int64_t> seq(prompt.begin(), prompt.end());
    seq.insert(seq.end(), c.ids.begin(), c.ids.end());
    at::Tensor ids = torch::tensor(seq, torch::kLong).unsqueeze(0);
    at::Tensor lp = sequence_logprobs(*engine().model(), ids, {}, {temperature, 64, false}).logprobs[0];
    for (size_t t = 0; t < c.ids.size(); ++t)
      EXPECT_NEAR(lp[static_cast<int64_t>(prompt.size() - 1 + t)].item<float>(), c.logprobs[t], 1e-4);
  }
}

TEST(Engine, StopIdsEndEarlyAndFinishedRowsLeaveTheBatch) {
  auto greedy = engine().generate({{kPrompt, 1, 1, {}}}, params(3, 1.0, 1));
  const int32_t first = greedy[0].ids[0];
  auto out = engine().generate({{kPrompt, 2, 1, {first}}, {{5, 6, 7}, 2, 3, {}}}, params(6, 1.0, 1));
  EXPECT_EQ(out[0].ids, std::vector<int32_t>{first});
  EXPECT_EQ(out[0].finish, FinishReason::Stop);
  EXPECT_EQ(out[2].ids.size(), 6u);  // the other prompt runs on to max_new_tokens
  EXPECT_EQ(out[2].finish, FinishReason::Length);
}

TEST(Engine, StopStringsEndGenerationWhereTheTextFirstContainsThem) {
  // tiny-qwen2's ids (< 300) are valid ids of the Qwen3 tokenizer, which
  // gives the sampled tokens text to search.
  static grpo::tok::Tokenizer tokenizer = grpo::tok::Tokenizer::from_file(GRPO_TEST_DATA_DIR "/qwen3-tokenizer.json");
  Engine with_text(load_model(kDir), &tokenizer);
  SamplingParams p = params(24, 1.3);
  auto free_run = with_text.generate({{kPrompt, 1, 77, {}}}, p)[0];
  ASSERT_EQ(free_run.ids.size(), 24u);
  // A stop string made of the end of token 5's text and the start of token 6's.
  std::string t5 = tokenizer.decode({free_run.ids[5]}), t6 = tokenizer.decode({free_run.ids[6]});
  ASSERT_FALSE(t5.empty() || t6.empty());
  std::string stop = t5.substr(t5.size() - 1) + t6.substr(0, 1);
  size_t expected_len = 0;  // the first prefix whose text contains the stop string
  for (size_t k = 1; k <= free_run.ids.size() && !expected_len; ++k) {
    std::vector<int32_t> prefix(free_run.ids.begin(), free_run.ids.begin() + static_cast<std::ptrdiff_t>(k));
    if (tokenizer.decode(prefix).find(stop) != std::string::npos) expected_len = k;
  }
  p.stop_strings = {stop};
  auto stopped = with_text.generate({{kPrompt, 1, 77, {}}}, p)[0];
  EXPECT_EQ(stopped.finish, FinishReason::Stop);
  EXPECT_EQ(stopped.ids.size(), expected_len);
  EXPECT_TRUE(std::equal(stopped.ids.begin(), stopped.ids.end(), free_run.ids.begin()));
}

TEST(Engine, TopLogprobsListTheMostLikelyTokensFirst) {
  SamplingParams p = params(6, 0.9);
  p.top_logprobs = 4;
  auto sampled = engine().generate({{kPrompt, 2, 11, {}}}, p);
  SamplingParams greedy = params(6, 0.9, 1);
  greedy.top_logprobs = 4;
  auto argmax = engine().generate({{kPrompt, 1, 11, {}}}, greedy);
  for (const auto& c : sampled) {
    ASSERT_EQ(c.top_ids.size(), c.ids.size());
    for (size_t t = 0; t < c.ids.size(); ++t) {
      ASSERT_EQ(c.top_ids[t].size(), 4u);
      for (size_t k = 1; k < 4; ++k) EXPECT_GE(c.top_logprobs[t][k - 1], c.top_logprobs[t][k]);
      EXPECT_GE(c.top_logprobs[t][0], c.logprobs[t]);  // nothing beats the most likely token
    }
  }
  // Greedy picks the first listed token, with the same logprob.
  for (size_t t = 0; t < argmax[0].ids.size(); ++t) {
    EXPECT_EQ(argmax[0].top_ids[t][0], argmax[0].ids[t]);
    EXPECT_FLOAT_EQ(argmax[0].top_logprobs[t][0], argmax[0].logprobs[t]);
  }
  // Off by default: nothing extra is collected.
  EXPECT_TRUE(engine().generate({{kPrompt, 1, 11, {}}}, params(3))[0].top_ids.empty());
}

namespace {

// Turn t + 1 of each completion: its prompt, its ids and some appended ids
// (a tool's answer), as a multi-turn rollout continues it.
std::vector<GenerateRequest> next_turns(const std::vector<GenerateRequest>& turn, const std::vector<Completion>& out,
                                        uint64_t seed) {
  std::vector<GenerateRequest> next;
  for (const Completion& c : out) {
    GenerateRequest r{turn[c.request].prompt_ids, 1, seed + next.size(), {}};
    r.prompt_ids.insert(r.prompt_ids.end(), c.ids.begin(), c.ids.end());
    for (int32_t id : {5, 6, static_cast<int32_t>(7 + next.size())}) r.prompt_ids.push_back(id);
    next.push_back(std::move(r));
  }
  return next;
}

void expect_same(const std::vector<Completion>& a, const std::vector<Completion>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].ids, b[i].ids) << i;
    ASSERT_EQ(a[i].logprobs.size(), b[i].logprobs.size()) << i;
    for (size_t t = 0; t < a[i].logprobs.size(); ++t) EXPECT_NEAR(a[i].logprobs[t], b[i].logprobs[t], 1e-4) << i << " " << t;
  }
}

}  // namespace

// The next turn of a conversation starts from the kept keys and values of
// the previous call's completion: only its new ids are prefilled, and it
// samples what a prefill of the whole prompt samples. Prompts of different
// lengths, one without a kept prefix, and a third turn from the second.
TEST(Engine, ANextTurnReusesTheKeptCompletionAndSamplesAsAFullPrefill) {
  Engine reusing(load_model(kDir)), fresh(load_model(kDir));
  std::vector<GenerateRequest> turn1 = {{kPrompt, 2, 11, {}, 5}, {{1, 2, 3, 4}, 1, 12, {}, 9}};
  const auto p = params(8, 1.0);
  auto out1 = reusing.generate(turn1, p, {false, true});
  expect_same(out1, fresh.generate(turn1, p));
  EXPECT_EQ(reusing.reused_ids(), 0);
  EXPECT_EQ(reusing.prefilled_ids(), static_cast<int64_t>(kPrompt.size() + 4));

  std::vector<GenerateRequest> turn2 = next_turns(turn1, out1, 100);
  turn2.push_back({{9, 8, 7, 6, 5}, 1, 200, {}});  // a prompt no completion starts
  auto out2 = reusing.generate(turn2, p, {true, true});
  int64_t kept = 0, total = 0;
  for (const Completion& c : out1) kept += static_cast<int64_t>(turn1[c.request].prompt_ids.size() + c.ids.size() - 1);
  for (const auto& r : turn2) total += static_cast<int64_t>(r.prompt_ids.size());
  EXPECT_EQ(reusing.reused_ids(), kept);
  EXPECT_EQ(reusing.prefilled_ids(), total - kept);
  expect_same(out2, fresh.generate(turn2, p));

  const std::vector<GenerateRequest> turn3 = next_turns(turn2, out2, 300);
  auto out3 = reusing.generate(turn3, p, {true, false});
  EXPECT_GT(reusing.reused_ids(), kept);
  expect_same(out3, fresh.generate(turn3, p));

  // Nothing was kept by the last call, and a call that does not continue uses nothing.
  reusing.generate(next_turns(turn3, out3, 400), p, {true, false});
  EXPECT_EQ(reusing.reused_ids(), 0);
  reusing.generate(turn1, p, {false, true});
  reusing.generate(turn2, p, {false, false});
  EXPECT_EQ(reusing.reused_ids(), 0);
}

// More distinct prompts than one prefill forward takes (max_prefill_tokens)
// are prefilled a batch at a time: the same completions as all at once,
// first turns and next turns that continue kept completions alike.
TEST(Engine, PromptsPrefilledInBatchesSampleAsPrefilledAtOnce) {
  EngineOptions small;
  small.max_prefill_tokens = 12;  // the 11-token prompt alone; the short ones two by two
  Engine batched(load_model(kDir), nullptr, small), whole(load_model(kDir));
  std::vector<GenerateRequest> turn1 = {{kPrompt, 2, 11, {}}, {{1, 2, 3, 4}, 1, 12, {}}, {{5, 6}, 2, 13, {}},
                                        {{7, 8, 9, 10, 11, 12}, 1, 14, {}}};
  const auto p = params(8, 1.0);
  auto out1 = batched.generate(turn1, p, {false, true});
  EXPECT_EQ(batched.decode_stats().prefill_forwards, 3) << "the prompts of 11, 4 and 2, and 6 new tokens";
  expect_same(out1, whole.generate(turn1, p, {false, true}));
  EXPECT_EQ(whole.decode_stats().prefill_forwards, 1);
  std::vector<GenerateRequest> turn2 = next_turns(turn1, out1, 100);
  turn2.push_back({{9, 8, 7, 6, 5}, 1, 200, {}});
  auto out2 = batched.generate(turn2, p, {true, false});
  EXPECT_GT(batched.reused_ids(), 0);
  expect_same(out2, whole.generate(turn2, p, {true, false}));
  auto greedy = params(8, 1.0, 1);
  expect_same(batched.generate(turn1, greedy), whole.generate(turn1, greedy));
  // Decoding in slots (a GPU's way) takes the batched prefill's cache as it takes the whole one's.
  small.decode = EngineOptions::Decode::Slots;
  Engine slots(load_model(kDir), nullptr, small);
  expect_same(slots.generate(turn1, p), whole.generate(turn1, p));
}

// A prompt longer than one prefill forward takes is prefilled in chunks of
// it, each continuing the cache: the same completions as in one forward, for
// a first turn and for a next turn whose new ids past a kept completion are
// chunked too.
TEST(Engine, ALongPromptIsPrefilledInChunksAsInOneForward) {
  EngineOptions small;
  small.max_prefill_tokens = 5;
  Engine chunked(load_model(kDir), nullptr, small), whole(load_model(kDir));
  std::vector<GenerateRequest> turn1 = {{kPrompt, 2, 21, {}}};
  const auto p = params(8, 1.0);
  auto out1 = chunked.generate(turn1, p, {false, true});
  EXPECT_EQ(chunked.decode_stats().prefill_forwards, 3) << "11 ids in chunks of 5, 5 and 1";
  expect_same(out1, whole.generate(turn1, p, {false, true}));
  EXPECT_EQ(whole.decode_stats().prefill_forwards, 1);
  std::vector<GenerateRequest> turn2 = next_turns(turn1, out1, 300);
  turn2.resize(1);
  for (int32_t id : {30, 31, 32, 33, 34, 35}) turn2[0].prompt_ids.push_back(id);  // 10 ids past the kept 18
  auto out2 = chunked.generate(turn2, p, {true, false});
  EXPECT_GT(chunked.reused_ids(), 0);
  EXPECT_EQ(chunked.prefilled_ids(), 10);
  EXPECT_EQ(chunked.decode_stats().prefill_forwards, 2) << "the new ids in chunks of 5 and 5";
  expect_same(out2, whole.generate(turn2, p, {true, false}));
  small.decode = EngineOptions::Decode::Slots;
  Engine slots(load_model(kDir), nullptr, small);
  expect_same(slots.generate(turn1, p), whole.generate(turn1, p));
}
