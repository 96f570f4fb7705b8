// The fused sampler against the tensor-op computation it replaces (softmax,
// cumsum, the first index past u, log_softmax), and against the probabilities
// themselves.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include <torch/torch.h>

#include "model/cpu_sampling.h"

using grpo::model::cpu::sample_rows;

namespace {

struct Reference {
  std::vector<int64_t> tokens;
  std::vector<float> logprobs;
};

// What sample_next computed before the fused kernel, with at:: ops.
Reference reference(const at::Tensor& logits, double temperature, int64_t top_k, const std::vector<float>& u) {
  at::Tensor scaled = logits.to(at::kFloat) / temperature;
  at::Tensor logp = scaled.log_softmax(-1);
  const int64_t V = scaled.size(1);
  if (top_k > 0 && top_k < V) {
    at::Tensor kth = std::get<0>(scaled.topk(top_k, -1)).narrow(-1, top_k - 1, 1);
    scaled = scaled.masked_fill(scaled < kth, -std::numeric_limits<float>::infinity());
  }
  at::Tensor cdf = scaled.softmax(-1).cumsum(-1);
  Reference r;
  for (int64_t b = 0; b < scaled.size(0); ++b) {
    const float target = u[static_cast<size_t>(b)] * cdf[b][V - 1].item<float>();
    const int64_t t = (cdf[b] <= target).sum().item<int64_t>();  // cdf is non-decreasing
    r.tokens.push_back(std::min(t, V - 1));
    r.logprobs.push_back(logp[b][std::min(t, V - 1)].item<float>());
  }
  return r;
}

std::vector<float> draws(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<float> u;
  for (int64_t i = 0; i < n; ++i) u.push_back(std::uniform_real_distribution<float>(0.0f, 1.0f)(rng));
  return u;
}

}  // namespace

TEST(CpuSampling, MatchesSoftmaxCumsumSearchAtAFullVocabulary) {
  torch::manual_seed(5);
  const int64_t B = 48, V = 151936;
  for (auto [dtype, temperature, top_k] : {std::tuple{at::kFloat, 1.0, int64_t{0}},
                                           std::tuple{at::kBFloat16, 0.7, int64_t{0}},
                                           std::tuple{at::kFloat, 1.0, int64_t{50}},
                                           std::tuple{at::kBFloat16, 1.2, int64_t{1}}}) {
    at::Tensor logits = (torch::randn({B, V}) * 3).to(dtype);
    const std::vector<float> u = draws(B, 17);
    std::vector<int64_t> tokens(B);
    std::vector<float> logprobs(B);
    sample_rows(logits, temperature, top_k, u, tokens.data(), logprobs.data());
    const Reference ref = reference(logits, temperature, top_k, u);
    int differ = 0;
    for (int64_t b = 0; b < B; ++b) {
      differ += tokens[b] != ref.tokens[b];
      EXPECT_NEAR(logprobs[b], logits[b][tokens[b]].to(at::kFloat).item<float>() / temperature -
                                   (logits[b].to(at::kFloat) / temperature).logsumexp(0).item<float>(), 2e-4);
      if (tokens[b] == ref.tokens[b]) EXPECT_NEAR(logprobs[b], ref.logprobs[b], 2e-4);
      if (top_k == 1) EXPECT_EQ(tokens[b], logits[b].argmax().item<int64_t>());
    }
    // Sums taken in another order may move a draw that falls within rounding
    // of a cumulative boundary; at these sizes that is rare.
    EXPECT_LE(differ, 1) << c10::toString(dtype) << " top_k " << top_k;
  }
}

TEST(CpuSampling, DrawsFollowTheProbabilities) {
  // Five tokens, u on a fine grid: each token is drawn for its share of [0, 1).
  const at::Tensor logits = torch::tensor({{0.0f, 1.0f, 2.0f, -1.0f, 0.5f}});
  const at::Tensor p = logits.softmax(-1)[0];
  std::vector<int64_t> counts(5, 0);
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    int64_t token = -1;
    float logprob = 0;
    sample_rows(logits, 1.0, 0, {(static_cast<float>(i) + 0.5f) / n}, &token, &logprob);
    ASSERT_GE(token, 0);
    ASSERT_LT(token, 5);
    EXPECT_NEAR(logprob, std::log(p[token].item<float>()), 1e-5);
    ++counts[static_cast<size_t>(token)];
  }
  for (int64_t t = 0; t < 5; ++t) EXPECT_NEAR(static_cast<double>(counts[t]) / n, p[t].item<double>(), 1e-3) << t;
  // Top-k 2 keeps tokens 2 and 1 only, in their renormalised proportions.
  std::vector<int64_t> top2(5, 0);
  for (int i = 0; i < n; ++i) {
    int64_t token = -1;
    float logprob = 0;
    sample_rows(logits, 1.0, 2, {(static_cast<float>(i) + 0.5f) / n}, &token, &logprob);
    ++top2[static_cast<size_t>(token)];
  }
  EXPECT_EQ(top2[0] + top2[3] + top2[4], 0);
  EXPECT_NEAR(static_cast<double>(top2[2]) / n, std::exp(2.0) / (std::exp(2.0) + std::exp(1.0)), 1e-3);
}
