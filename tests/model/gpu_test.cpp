// The model and engine on CUDA (label `gpu`; skipped without a GPU): the same
// logits as on the CPU in float32, and greedy decoding in bfloat16.
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/types.h>
#include <torch/utils.h>

#include "model/engine.h"
#include "model/weights.h"

using namespace grpo::model;

namespace {
const std::string kDir = GRPO_SHARED_DATA_DIR "/tiny-qwen2";
const std::vector<int32_t> kPrompt = {93, 283, 208, 107, 40, 235, 119, 177, 185, 88, 109};
}  // namespace

TEST(Gpu, Float32LogitsMatchTheCpu) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  torch::NoGradGuard no_grad;
  CausalLM cpu = load_model(kDir), gpu = load_model(kDir);
  gpu->to(at::kCUDA);
  at::Tensor ids = torch::randint(0, 300, {3, 17}, torch::kLong);
  at::Tensor a = cpu->forward(ids), b = gpu->forward(ids.to(at::kCUDA)).to(at::kCPU);
  EXPECT_LT((a - b).abs().max().item<double>(), 1e-3);
}

TEST(Gpu, EngineGreedyMatchesTheCpuAndBfloat16Runs) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  SamplingParams p;
  p.max_new_tokens = 16;
  p.top_k = 1;
  Engine cpu(load_model(kDir));
  CausalLM m = load_model(kDir);
  m->to(at::kCUDA);
  Engine gpu(m);
  EXPECT_EQ(cpu.generate({{kPrompt, 1, 1, {}}}, p)[0].ids, gpu.generate({{kPrompt, 1, 1, {}}}, p)[0].ids);
  CausalLM half = load_model(kDir);
  half->to(at::kCUDA, at::kBFloat16);
  Engine bf16(half);
  p.top_k = 0;
  auto out = bf16.generate({{kPrompt, 4, 3, {}}}, p);
  ASSERT_EQ(out.size(), 4u);
  for (const auto& c : out) EXPECT_EQ(c.ids.size(), 16u);
}
