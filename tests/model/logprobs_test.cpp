// Chunked log-probabilities equal the plain computation — values and
// gradients — and agree with transformers on the tiny-qwen2 fixture.
#include "model/logprobs.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <fstream>
#include <set>
#include <nlohmann/json.hpp>

#include "model/weights.h"

using namespace grpo::model;

namespace {

// The unchunked reference: the full [rows, V] log_softmax.
at::Tensor plain_logprobs(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& targets, double temp) {
  at::Tensor logits = at::matmul(hidden, weight.t()).to(at::kFloat) / temp;
  return at::log_softmax(logits, -1).gather(-1, targets.unsqueeze(-1)).squeeze(-1);
}

}  // namespace

TEST(ChunkedLogprobs, ValuesAndGradientsEqualThePlainComputation) {
  torch::manual_seed(0);
  at::Tensor hidden = torch::randn({3, 7, 16}, torch::requires_grad());
  at::Tensor weight = torch::randn({50, 16}, torch::requires_grad());
  at::Tensor targets = torch::randint(0, 50, {3, 7}, torch::kLong);
  at::Tensor g = torch::randn({3, 7});
  for (int64_t chunk : {1, 4, 21, 1000}) {
    for (double temp : {1.0, 0.7}) {
      SCOPED_TRACE(chunk);
      at::Tensor want = plain_logprobs(hidden, weight, targets, temp);
      auto want_grads = torch::autograd::grad({want}, {hidden, weight}, {g});
      TokenLogprobs got = chunked_logprobs(hidden, weight, targets, {temp, chunk, true});
      EXPECT_TRUE(torch::allclose(got.logprobs, want, 1e-5, 1e-6));
      auto grads = torch::autograd::grad({got.logprobs}, {hidden, weight}, {g});
      EXPECT_TRUE(torch::allclose(grads[0], want_grads[0], 1e-4, 1e-5));
      EXPECT_TRUE(torch::allclose(grads[1], want_grads[1], 1e-4, 1e-5));
      at::Tensor p = at::softmax(at::matmul(hidden, weight.t()) / temp, -1).detach();
      EXPECT_TRUE(torch::allclose(got.entropy, -(p * p.log()).sum(-1), 1e-4, 1e-5));
    }
  }
}

// In bfloat16 the chunked backward multiplies in bfloat16, as autograd does
// through the plain computation; and a frozen weight (LoRA) gets no gradient
// while the hidden states still get theirs.
TEST(ChunkedLogprobs, BFloat16GradientsFollowAutogradAndAFrozenWeightIsSkipped) {
  torch::manual_seed(1);
  at::Tensor hidden = torch::randn({2, 9, 64}).to(at::kBFloat16).requires_grad_();
  at::Tensor weight = torch::randn({300, 64}).mul(0.2).to(at::kBFloat16).requires_grad_();
  at::Tensor targets = torch::randint(0, 300, {2, 9}, torch::kLong);
  at::Tensor g = torch::randn({2, 9});
  at::Tensor want = plain_logprobs(hidden, weight, targets, 0.9);
  auto want_grads = torch::autograd::grad({want}, {hidden, weight}, {g});
  TokenLogprobs got = chunked_logprobs(hidden, weight, targets, {0.9, 5, false});
  EXPECT_TRUE(torch::allclose(got.logprobs, want, 1e-5, 1e-6));
  auto grads = torch::autograd::grad({got.logprobs}, {hidden, weight}, {g});
  for (int i : {0, 1}) {
    EXPECT_EQ(grads[i].scalar_type(), at::kBFloat16);
    const at::Tensor a = grads[i].to(at::kFloat), b = want_grads[i].to(at::kFloat);
    // A bfloat16 rounding or two apart (the weight's gradient is summed over 4 chunks).
    EXPECT_TRUE(torch::allclose(a, b, 2e-2, 2e-2 * b.abs().max().item<float>())) << i << ": "
                                                                                << (a - b).abs().max().item<float>();
  }
  at::Tensor frozen = weight.detach();
  auto only_h = torch::autograd::grad({chunked_logprobs(hidden, frozen, targets, {0.9, 5, false}).logprobs}, {hidden}, {g});
  EXPECT_TRUE(at::equal(only_h[0], grads[0]));
}

TEST(ChunkedLogprobs, CompletionLogprobsMatchTransformersOnTinyQwen2) {
  const std::string dir = GRPO_TEST_DATA_DIR "/tiny-qwen2";
  nlohmann::json e = nlohmann::json::parse(std::ifstream(dir + "/expected.json"))["single"];
  std::vector<int64_t> ids = e["input"]["prompt_ids"];
  std::vector<int64_t> completion = e["input"]["completion_ids"];
  ids.insert(ids.end(), completion.begin(), completion.end());
  CausalLM model = load_model(dir);
  torch::NoGradGuard no_grad;
  at::Tensor t = torch::tensor(ids, torch::kLong).unsqueeze(0);
  TokenLogprobs lp = sequence_logprobs(*model, t, {}, {1.0, 5, false});
  std::vector<double> want = e["token_logprobs"][0];
  ASSERT_EQ(lp.logprobs.size(1), static_cast<int64_t>(want.size()));
  double diff = 0;
  for (size_t i = 0; i < want.size(); ++i) diff = std::max(diff, std::abs(lp.logprobs[0][i].item<double>() - want[i]));
  std::printf("max |logprob - transformers| = %.3g\n", diff);
  EXPECT_LT(diff, 1e-4);
}

namespace {

// Whether the autograd graph behind `t` has a node whose name contains `part`.
bool graph_has(const at::Tensor& t, const std::string& part) {
  std::vector<torch::autograd::Node*> todo = {t.grad_fn().get()};
  std::set<torch::autograd::Node*> seen;
  while (!todo.empty()) {
    torch::autograd::Node* node = todo.back();
    todo.pop_back();
    if (!node || !seen.insert(node).second) continue;
    if (node->name().find(part) != std::string::npos) return true;
    for (const auto& edge : node->next_edges()) todo.push_back(edge.function.get());
  }
  return false;
}

}  // namespace

TEST(GradientCheckpointing, SameLossAndGradientsWithLessKeptForBackward) {
  const std::string dir = GRPO_TEST_DATA_DIR "/tiny-qwen2";
  at::Tensor ids = torch::randint(0, 100, {2, 12}, torch::kLong);
  at::Tensor mask = torch::ones({2, 12}, torch::kLong);
  mask[1].narrow(0, 0, 3).zero_();  // left padding in the second row
  auto run = [&](bool checkpointing) {
    CausalLM model = load_model(dir);
    model->train();
    model->set_gradient_checkpointing(checkpointing);
    TokenLogprobs lp = sequence_logprobs(*model, ids, mask, {1.0, 5, false});
    // The layers run inside the recomputing node exactly when asked to.
    EXPECT_EQ(graph_has(lp.logprobs, "CheckpointFunction"), checkpointing);
    lp.logprobs.sum().backward();
    std::vector<at::Tensor> grads;
    for (const auto& p : model->parameters()) grads.push_back(p.grad().clone());
    return std::make_pair(lp.logprobs.detach(), grads);
  };
  auto [plain, plain_grads] = run(false);
  auto [recomputed, recomputed_grads] = run(true);
  EXPECT_TRUE(torch::equal(plain, recomputed));
  ASSERT_EQ(plain_grads.size(), recomputed_grads.size());
  for (size_t i = 0; i < plain_grads.size(); ++i)
    EXPECT_TRUE(torch::allclose(plain_grads[i], recomputed_grads[i], 1e-5, 1e-6)) << "parameter " << i;
}

TEST(GradientCheckpointing, FrozenInputsStillGiveTheLayersGradients) {
  CausalLM model = load_model(GRPO_TEST_DATA_DIR "/tiny-qwen2");
  model->set_gradient_checkpointing(true);
  model->model->embed_tokens->weight.set_requires_grad(false);  // as under LoRA: the input carries no grad
  at::Tensor hidden = model->hidden_states(torch::randint(0, 100, {1, 6}, torch::kLong));
  ASSERT_TRUE(graph_has(hidden, "CheckpointFunction"));
  hidden.sum().backward();
  const at::Tensor& g = model->model->layers->ptr<DecoderLayerImpl>(0)->self_attn->q_proj->weight.grad();
  ASSERT_TRUE(g.defined());
  EXPECT_GT(g.abs().sum().item<double>(), 0.0);
}
