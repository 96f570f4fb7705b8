// Decoding in slots on CUDA (label `gpu`; skipped without a GPU): steps
// replayed as CUDA graphs sample exactly the ids of the same steps run
// eagerly, and of the eager engine, over batch sizes, lengths, early stops
// and rows that wait for a slot; greedy float32 decoding equals the CPU's;
// the sampled ids' log-probabilities agree with the training pass.
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/types.h>
#include <torch/utils.h>

#include "model/engine.h"
#include "model/logprobs.h"
#include "model/weights.h"

using namespace grpo::model;

namespace {

const std::string kDir = GRPO_TEST_DATA_DIR "/tiny-qwen2";
const std::vector<int32_t> kPrompt = {93, 283, 208, 107, 40, 235, 119, 177, 185, 88, 109};

CausalLM on_gpu(at::ScalarType dtype) {
  CausalLM m = load_model(kDir);
  m->to(at::kCUDA, dtype);
  return m;
}

EngineOptions mode(EngineOptions::Decode decode, bool graphs, int64_t max_slots = 256) {
  EngineOptions o;
  o.decode = decode;
  o.cuda_graphs = graphs;
  o.max_slots = max_slots;
  return o;
}

// Batches of 1, 3 and 17 rows, prompts of 3 to 40 ids, a stop id the model
// samples often and a short per-request budget.
std::vector<std::vector<GenerateRequest>> cases() {
  std::vector<int32_t> long_prompt;
  for (int32_t i = 0; i < 40; ++i) long_prompt.push_back((i * 37) % 290 + 3);
  std::vector<GenerateRequest> mixed = {{kPrompt, 3, 5, {}}, {{1, 2, 3}, 4, 9, {296, 17}}, {long_prompt, 10, 13, {}}};
  mixed[1].max_new_tokens = 5;
  return {{{kPrompt, 1, 1, {}}}, {{kPrompt, 3, 2, {296}}}, mixed};
}

void expect_same_ids(const std::vector<Completion>& got, const std::vector<Completion>& want, double logprob_tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].ids, want[i].ids) << "row " << i;
    EXPECT_EQ(got[i].finish, want[i].finish) << "row " << i;
    for (size_t t = 0; t < std::min(got[i].logprobs.size(), want[i].logprobs.size()); ++t)
      EXPECT_NEAR(got[i].logprobs[t], want[i].logprobs[t], logprob_tol) << i << " " << t;
  }
}

}  // namespace

TEST(GpuGraphs, ReplayedStepsSampleTheEagerStepsIds) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  for (at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    SCOPED_TRACE(c10::toString(dtype));
    Engine graphs(on_gpu(dtype), nullptr, mode(EngineOptions::Decode::Slots, true, 8));
    Engine steps(on_gpu(dtype), nullptr, mode(EngineOptions::Decode::Slots, false, 8));
    Engine eager(on_gpu(dtype), nullptr, mode(EngineOptions::Decode::Eager, false));
    SamplingParams p;
    p.temperature = 1.0;
    for (int64_t new_tokens : {1, 9, 70}) {
      p.max_new_tokens = new_tokens;
      for (const auto& requests : cases()) {
        SCOPED_TRACE(std::to_string(new_tokens) + " new, " + std::to_string(requests.size()) + " requests");
        const auto replayed = graphs.generate(requests, p);
        // Graphs and eager steps run the same kernels on the same buffers: bitwise the same.
        expect_same_ids(replayed, steps.generate(requests, p), 1e-6);
        if (dtype == at::kFloat) expect_same_ids(replayed, eager.generate(requests, p), 1e-4);
        if (new_tokens > 1) EXPECT_GT(graphs.decode_stats().replays, 0);
      }
    }
    EXPECT_GT(graphs.decode_stats().graphs, 0);
  }
}

TEST(GpuGraphs, GreedyFloat32EqualsTheCpuEngine) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  SamplingParams p;
  p.max_new_tokens = 24;
  p.top_k = 1;
  Engine cpu(load_model(kDir)), gpu(on_gpu(at::kFloat));
  const std::vector<GenerateRequest> r = cases().back();
  expect_same_ids(gpu.generate(r, p), cpu.generate(r, p), 1e-4);
  EXPECT_TRUE(gpu.decode_stats().slots);
}

// The training pass (log-softmax in float32 over the whole sequence) gives
// the sampled ids the log-probabilities the engine returned: within bfloat16's
// rounding of the logits (2^-8 relative, a few units on logits of size ~10).
TEST(GpuGraphs, LogprobsAgreeWithTheTrainingPass) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  for (at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    Engine engine(on_gpu(dtype));
    SamplingParams p;
    p.max_new_tokens = 20;
    p.temperature = 0.9;
    const auto out = engine.generate({{kPrompt, 4, 3, {}}}, p);
    torch::NoGradGuard no_grad;
    for (const auto& c : out) {
      std::vector<int64_t> seq(kPrompt.begin(), kPrompt.end());
      seq.insert(seq.end(), c.ids.begin(), c.ids.end());
      at::Tensor ids = torch::tensor(seq, torch::kLong).unsqueeze(0).to(at::kCUDA);
      at::Tensor lp = sequence_logprobs(*engine.model(), ids, {}, {0.9, 64, false}).logprobs[0].to(at::kCPU);
      for (size_t t = 0; t < c.ids.size(); ++t)
        EXPECT_NEAR(lp[static_cast<int64_t>(kPrompt.size() - 1 + t)].item<float>(), c.logprobs[t],
                    dtype == at::kFloat ? 1e-4 : 5e-2)
            << c10::toString(dtype) << " " << t;
    }
  }
}
