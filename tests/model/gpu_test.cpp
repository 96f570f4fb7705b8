// The model and engine on CUDA (label `gpu`; skipped without a GPU): the same
// logits as on the CPU in float32, bfloat16 logits within bfloat16's precision
// of float32's, the same sampled ids as the CPU from the same seeds, greedy
// decoding in bfloat16, and LoRA adapters on a bfloat16 model.
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/types.h>
#include <torch/utils.h>

#include <cmath>

#include "model/engine.h"
#include "model/model_config.h"
#include "model/lora.h"
#include "model/weights.h"

using namespace grpo::model;

namespace {
const std::string kDir = GRPO_TEST_DATA_DIR "/tiny-qwen2";
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

// bfloat16 keeps 8 significant bits: each stored weight and each rounded
// activation is off by at most u = 2^-8 of itself. The logits pass through
// 2 L + 1 matmul stages (attention and MLP per layer, then lm_head), each
// adding about 2u of relative error; 4x that, for the error the normalisations
// and softmax pass on, bounds the relative (Frobenius) error. A wrong kernel or
// weight gives errors of order 1, far above it.
TEST(Gpu, Bfloat16LogitsAreFloat32sWithinBfloat16Precision) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  torch::NoGradGuard no_grad;
  CausalLM f32 = load_model(kDir), bf16 = load_model(kDir);
  f32->to(at::kCUDA);
  bf16->to(at::kCUDA, at::kBFloat16);
  at::Tensor ids = torch::randint(0, 300, {3, 17}, torch::kLong).to(at::kCUDA);
  at::Tensor want = f32->forward(ids), got = bf16->forward(ids).to(at::kFloat);
  const double u = std::ldexp(1.0, -8);
  const int64_t layers = ModelConfig::load(kDir + "/config.json").num_hidden_layers;
  const double bound = 4 * (2 * layers + 1) * 2 * u;
  EXPECT_LT(((got - want).norm() / want.norm()).item<double>(), bound);
  EXPECT_GT((got - want).abs().max().item<double>(), 0.0) << "the bfloat16 model ran in float32";
}

// Sampling draws each sequence's uniforms on the host from its own seed, so
// the device changes only the probabilities, which agree to float32 rounding:
// the same seeds give the same ids (a flip needs a draw within ~1e-6 of a
// cumulative-probability boundary).
TEST(Gpu, SampledIdsMatchTheCpuWithTheSameSeeds) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  SamplingParams p;
  p.max_new_tokens = 16;
  p.temperature = 1.0;
  p.top_k = 0;
  Engine cpu(load_model(kDir));
  CausalLM m = load_model(kDir);
  m->to(at::kCUDA);
  Engine gpu(m);
  const std::vector<Completion> a = cpu.generate({{kPrompt, 4, 7, {}}}, p), b = gpu.generate({{kPrompt, 4, 7, {}}}, p);
  ASSERT_EQ(a.size(), 4u);
  ASSERT_EQ(b.size(), 4u);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].ids, b[i].ids) << "copy " << i;
    ASSERT_EQ(a[i].logprobs.size(), b[i].logprobs.size());
    for (size_t t = 0; t < a[i].logprobs.size(); ++t) EXPECT_NEAR(a[i].logprobs[t], b[i].logprobs[t], 1e-4);
  }
  // Different seeds sample differently: the comparison above is not of greedy runs.
  EXPECT_NE(a[0].ids, a[1].ids);
}

TEST(Gpu, LoraOnABfloat16ModelStaysOnTheDevice) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  CausalLM lm = load_model(kDir);
  lm->to(at::kCUDA, at::kBFloat16);
  at::Tensor ids = torch::randint(0, 300, {2, 9}, torch::kLong).to(at::kCUDA);
  torch::NoGradGuard no_grad;
  at::Tensor base = lm->forward(ids);
  LoraOptions o;
  o.dropout = 0;
  apply_lora(*lm, o);
  for (at::Tensor& p : adapter_parameters(*lm)) {
    EXPECT_TRUE(p.is_cuda());
    EXPECT_EQ(p.scalar_type(), at::kFloat);
    p.add_(at::randn_like(p) * 0.05);
  }
  at::Tensor adapted = lm->forward(ids);
  EXPECT_GT((adapted - base).abs().max().item<double>(), 0.0);
  {
    AdaptersDisabled reference(*lm);
    EXPECT_TRUE(at::equal(lm->forward(ids), base));
  }
  std::map<std::string, at::Tensor> merged = merged_weight_buffers(*lm);
  merge_lora_into(*lm, merged);
  CausalLM plain = load_model(kDir);
  plain->to(at::kCUDA, at::kBFloat16);
  auto params = plain->named_parameters();
  for (auto& [name, t] : merged) {
    EXPECT_TRUE(t.is_cuda()) << name;
    params[name].copy_(t);
  }
  // bfloat16 rounds the merged weights once; the logits agree to its precision.
  at::Tensor diff = (plain->forward(ids) - adapted).to(at::kFloat).abs();
  EXPECT_LT(diff.max().item<double>(), 0.1 * adapted.to(at::kFloat).abs().max().item<double>());
}
