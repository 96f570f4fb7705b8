// Decoding in slots (model/slot_decoder.h) samples what the eager engine
// samples for the same seeds: every sampling filter, rows beyond the slots
// that wait for finished rows' slots, stop ids and stop strings found between
// reads of the progress, per-request budgets, top log-probabilities and a
// conversation's next turn. On the CPU the steps run eagerly; the same code
// is what a GPU captures as CUDA graphs (tests/model/gpu_test.cpp).
#include <gtest/gtest.h>
#include <torch/types.h>

#include "model/engine.h"
#include "model/sampling.h"
#include "model/weights.h"
#include "tokenizer/tokenizer.h"

using namespace grpo::model;

namespace {

const std::string kDir = GRPO_TEST_DATA_DIR "/tiny-qwen2";
const std::vector<int32_t> kPrompt = {93, 283, 208, 107, 40, 235, 119, 177, 185, 88, 109};

EngineOptions slots(int64_t max_slots = 256, int64_t readback_every = 0) {
  EngineOptions o;
  o.decode = EngineOptions::Decode::Slots;
  o.max_slots = max_slots;
  o.readback_every = readback_every;
  return o;
}

EngineOptions eager() {
  EngineOptions o;
  o.decode = EngineOptions::Decode::Eager;
  return o;
}

SamplingParams params(int64_t max_new, double temperature = 1.0, int64_t top_k = 0) {
  SamplingParams p;
  p.max_new_tokens = max_new;
  p.temperature = temperature;
  p.top_k = top_k;
  return p;
}

// Prompts of three lengths; one request stops at an id the model samples
// often, one has a budget of its own below max_new_tokens.
std::vector<GenerateRequest> requests() {
  std::vector<GenerateRequest> r = {{kPrompt, 3, 5, {}}, {{1, 2, 3}, 2, 9, {296, 17}}, {{40, 41, 42, 43, 44, 45}, 2, 13, {}}};
  r[2].max_new_tokens = 4;
  return r;
}

void expect_same(const std::vector<Completion>& got, const std::vector<Completion>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].request, want[i].request) << i;
    EXPECT_EQ(got[i].index, want[i].index) << i;
    EXPECT_EQ(got[i].ids, want[i].ids) << "row " << i;
    EXPECT_EQ(got[i].finish, want[i].finish) << "row " << i;
    ASSERT_EQ(got[i].logprobs.size(), want[i].logprobs.size()) << i;
    for (size_t t = 0; t < got[i].logprobs.size(); ++t)
      EXPECT_NEAR(got[i].logprobs[t], want[i].logprobs[t], 1e-4) << i << " " << t;
    ASSERT_EQ(got[i].top_ids.size(), want[i].top_ids.size()) << i;
    for (size_t t = 0; t < got[i].top_ids.size(); ++t) EXPECT_EQ(got[i].top_ids[t], want[i].top_ids[t]) << i << " " << t;
  }
}

}  // namespace

TEST(SlotDecode, SamplesTheEagerEnginesIdsUnderEveryFilter) {
  Engine in_slots(load_model(kDir), nullptr, slots()), eagerly(load_model(kDir), nullptr, eager());
  std::vector<std::pair<std::string, SamplingParams>> cases;
  cases.emplace_back("temperature", params(14, 1.0));
  cases.emplace_back("top_k", params(14, 0.7, 5));
  cases.emplace_back("greedy", params(14, 1.0, 1));
  SamplingParams nucleus = params(14, 1.2);
  nucleus.top_p = 0.8;
  nucleus.min_p = 0.02;
  cases.emplace_back("top_p and min_p", nucleus);
  SamplingParams repeat = params(14, 1.0, 20);
  repeat.repetition_penalty = 1.3;
  cases.emplace_back("repetition_penalty", repeat);
  for (const auto& [name, p] : cases) {
    SCOPED_TRACE(name);
    const auto got = in_slots.generate(requests(), p), want = eagerly.generate(requests(), p);
    expect_same(got, want);
    EXPECT_TRUE(in_slots.decode_stats().slots);
    EXPECT_EQ(in_slots.decode_stats().admissions, 1) << "7 rows of 3 prompts into their slots at once";
    EXPECT_FALSE(eagerly.decode_stats().slots);
  }
  // The budgets and the stop ids were met: rows of three lengths.
  const auto out = in_slots.generate(requests(), params(14));
  EXPECT_EQ(out[5].ids.size(), 4u);
  EXPECT_EQ(out[0].ids.size(), 14u);
}

TEST(SlotDecode, RowsBeyondTheSlotsTakeTheSlotsOfFinishedRows) {
  std::vector<GenerateRequest> r = requests();
  r.push_back({{7, 8, 9, 10}, 4, 21, {}});
  r.back().max_new_tokens = 2;
  Engine two(load_model(kDir), nullptr, slots(2)), eagerly(load_model(kDir), nullptr, eager());
  const SamplingParams p = params(10, 0.9);
  expect_same(two.generate(r, p), eagerly.generate(r, p));
  const DecodeStats& stats = two.decode_stats();
  EXPECT_EQ(stats.slot_count, 2);
  EXPECT_EQ(stats.refills, 11 - 2);  // every row but the first two waited for a slot
  // Never more than two rows at once: at least the longest rows' steps, one after another.
  EXPECT_GE(stats.steps, 10 + 10);
}

TEST(SlotDecode, RowsLeftAfterOthersFinishMoveIntoTheFirstSlots) {
  std::vector<GenerateRequest> r;
  const std::vector<int64_t> budgets = {2, 3, 3, 4, 5, 2, 6, 20};
  for (size_t i = 0; i < budgets.size(); ++i) {
    r.push_back({{static_cast<int32_t>(10 + i), 11, 12}, 1, 30 + i, {}});
    r.back().max_new_tokens = budgets[i];
  }
  Engine packing(load_model(kDir), nullptr, slots(8)), eagerly(load_model(kDir), nullptr, eager());
  SamplingParams p = params(20, 1.0);
  p.repetition_penalty = 1.2;  // every per-row buffer moves with its row
  p.top_logprobs = 2;
  expect_same(packing.generate(r, p), eagerly.generate(r, p));
  EXPECT_GE(packing.decode_stats().compactions, 1);  // 4 rows left of 8: into slots 0..3
  // The last row decoded most of its 20 ids alone: steps never exceed its budget.
  EXPECT_EQ(packing.decode_stats().steps, 19);
}

// vLLM's sleep mode for the colocated sampler: the slots' cache (and on a
// GPU the graphs) go when a call ends and come back with the next.
TEST(SlotDecode, ASleepingEngineLetsItsSlotsGoAfterEachCall) {
  EngineOptions sleeping = slots(4);
  sleeping.release_after_call = true;
  Engine asleep(load_model(kDir), nullptr, sleeping), awake(load_model(kDir), nullptr, slots(4)),
      eagerly(load_model(kDir), nullptr, eager());
  const SamplingParams p = params(6);
  for (int call = 0; call < 2; ++call) {
    const auto want = eagerly.generate(requests(), p);
    expect_same(asleep.generate(requests(), p), want);
    expect_same(awake.generate(requests(), p), want);
    EXPECT_FALSE(asleep.holds_slots());
    EXPECT_TRUE(awake.holds_slots());
  }
}

TEST(SlotDecode, ProgressReadEveryFewStepsEndsRowsWhereTheyEnded) {
  Engine every5(load_model(kDir), nullptr, slots(3, 5)), eagerly(load_model(kDir), nullptr, eager());
  const SamplingParams p = params(13, 1.0, 1);
  expect_same(every5.generate(requests(), p), eagerly.generate(requests(), p));
  EXPECT_LT(every5.decode_stats().readbacks, every5.decode_stats().steps);
}

TEST(SlotDecode, StopStringsFoundBetweenReadsCutTheRowAtTheirFirstId) {
  static grpo::tok::Tokenizer tokenizer = grpo::tok::Tokenizer::from_file(GRPO_TEST_DATA_DIR "/qwen3-tokenizer.json");
  Engine every4(load_model(kDir), &tokenizer, slots(256, 4)), eagerly(load_model(kDir), &tokenizer, eager());
  SamplingParams p = params(24, 1.3);
  const auto free_run = eagerly.generate(requests(), p);
  // Stop strings from the text of two rows' middles: each row stops where its
  // text first holds one of them, mostly between two reads.
  p.stop_strings = {tokenizer.decode({free_run[0].ids[6]}), tokenizer.decode({free_run[3].ids[2]})};
  const auto want = eagerly.generate(requests(), p);
  int stopped = 0;
  for (const auto& c : want) stopped += c.finish == FinishReason::Stop;
  ASSERT_GE(stopped, 2);
  expect_same(every4.generate(requests(), p), want);
}

TEST(SlotDecode, TopLogprobsAreThoseOfTheEagerEngine) {
  Engine in_slots(load_model(kDir), nullptr, slots(2, 3)), eagerly(load_model(kDir), nullptr, eager());
  SamplingParams p = params(7, 0.8);
  p.top_logprobs = 3;
  expect_same(in_slots.generate(requests(), p), eagerly.generate(requests(), p));
}

TEST(SlotDecode, ANextTurnStartsFromTheKeptCompletion) {
  Engine in_slots(load_model(kDir), nullptr, slots(4)), eagerly(load_model(kDir), nullptr, eager());
  const SamplingParams p = params(6);
  const std::vector<GenerateRequest> turn1 = requests();
  const auto out1 = in_slots.generate(turn1, p, {false, true});
  expect_same(out1, eagerly.generate(turn1, p, {false, true}));
  std::vector<GenerateRequest> turn2;
  for (const Completion& c : out1) {
    GenerateRequest r{turn1[c.request].prompt_ids, 1, 50 + turn2.size(), {}};
    r.prompt_ids.insert(r.prompt_ids.end(), c.ids.begin(), c.ids.end());
    r.prompt_ids.push_back(5);
    turn2.push_back(std::move(r));
  }
  const auto out2 = in_slots.generate(turn2, p, {true, false});
  expect_same(out2, eagerly.generate(turn2, p, {true, false}));
  EXPECT_EQ(in_slots.reused_ids(), eagerly.reused_ids());
  EXPECT_GT(in_slots.reused_ids(), 0);
}

// The draw-driven sampler picks the first id whose cumulative probability
// exceeds draw * total, computed here by hand over softmax(logits / T).
TEST(SlotDecode, SamplingWithDrawsPicksTheInverseCdfId) {
  at::Tensor logits = at::tensor({0.5f, 2.0f, -1.0f, 1.0f, 0.0f, 1.5f, -0.5f, 0.25f}).view({2, 4});
  const std::vector<float> draws = {0.1f, 0.97f};
  SamplingParams p = params(1, 0.8);
  p.top_p = 0.99;  // the tensor path, as on a GPU
  const Sampled s = sample_with_draws(logits, {}, p, at::tensor(draws));
  for (int64_t b = 0; b < 2; ++b) {
    const at::Tensor probs = (logits[b] / 0.8).softmax(0);
    double total = 0, cumulative = 0;
    for (int64_t v = 0; v < 4; ++v) total += probs[v].item<double>();
    int64_t want = 3;
    for (int64_t v = 0; v < 4; ++v) {
      cumulative += probs[v].item<double>();
      if (cumulative > draws[static_cast<size_t>(b)] * total) {
        want = v;
        break;
      }
    }
    EXPECT_EQ(s.tokens[b].item<int64_t>(), want) << b;
    EXPECT_NEAR(s.logprobs[b].item<float>(), std::log(probs[want].item<double>()), 1e-6);
  }
}
