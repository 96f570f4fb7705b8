// The external_server sampler against a real grpo-rollout: the same
// completions as the native sampler for the same prompt ids, seeds and
// weights, stop ids and stop strings ending completions where the native
// engine ends them, and weights pushed after an update reaching the server.
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/types.h>
#include <torch/utils.h>

#include <chrono>
#include <cstdio>

#include "model/weights.h"
#include "plugins/builtin_plugins.h"
#include "plugins/external_sampler_util.h"
#include "trainer/weight_views.h"
#include "rollout/rollout_process.h"
#include "tokenizer/tokenizer.h"

using namespace grpo::testing;
using grpo::Sample;
using grpo::plugins::SampleOptions;
using grpo::plugins::SampleRequest;

namespace {

const std::vector<int32_t> kPromptA = {72, 101, 108, 108, 111, 44, 32};
const std::vector<int32_t> kPromptB = {87, 104, 97, 116};

int32_t eos() { return *grpo::tok::Tokenizer::from_dir(tiny_model_dir()).eos_id(); }

std::vector<SampleRequest> two_requests() {
  return {{kPromptA, "", "", 3, 11, {eos()}}, {kPromptB, "", "", 1, 12, {eos()}}};
}

SampleOptions greedy(int32_t max_new_tokens = 10) {
  SampleOptions o;
  o.top_k = 1;
  o.max_new_tokens = max_new_tokens;
  return o;
}

std::unique_ptr<grpo::plugins::SamplerClient> native_sampler() {
  return builtin_sampler("native", {{"model", tiny_model_dir()}});
}

void expect_same(const std::vector<Sample>& got, const std::vector<Sample>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].request, want[i].request) << i;
    EXPECT_EQ(got[i].index, want[i].index) << i;
    EXPECT_EQ(got[i].ids, want[i].ids) << i;
    EXPECT_EQ(got[i].text, want[i].text) << i;
    EXPECT_EQ(got[i].truncated(), want[i].truncated()) << i;
    ASSERT_EQ(got[i].logprobs.size(), want[i].logprobs.size()) << i;
    for (size_t t = 0; t < got[i].logprobs.size(); ++t) EXPECT_NEAR(got[i].logprobs[t], want[i].logprobs[t], 1e-4);
  }
}

}  // namespace

TEST(ExternalSampler, GreedyEqualsTheNativeSamplerWithLogprobsAndCopies) {
  RolloutProcess server(tiny_model_dir());
  ASSERT_NE(server.port(), 0);
  auto external = external_sampler(server.base_url());
  EXPECT_FALSE(external->in_process());
  auto got = external->generate(two_requests(), greedy());
  ASSERT_EQ(got.size(), 4u);  // 3 copies of A, 1 of B
  EXPECT_EQ(got[0].ids, got[2].ids) << "greedy copies are equal";
  EXPECT_FALSE(got[0].ids.empty());
  EXPECT_FALSE(got[0].logprobs.empty());
  expect_same(got, native_sampler()->generate(two_requests(), greedy()));
}

TEST(ExternalSampler, SeededSamplingEqualsTheNativeSampler) {
  RolloutProcess server(tiny_model_dir());
  ASSERT_NE(server.port(), 0);
  SampleOptions o;
  o.temperature = 1.3;  // flat enough that the copies differ
  o.top_p = 0.95;
  o.max_new_tokens = 10;
  auto got = external_sampler(server.base_url())->generate(two_requests(), o);
  expect_same(got, native_sampler()->generate(two_requests(), o));
  EXPECT_TRUE(got[0].ids != got[1].ids || got[1].ids != got[2].ids) << "copies sample their own streams";
}

TEST(ExternalSampler, StopIdsAndStopStringsEndCompletionsAsTheNativeEngineDoes) {
  RolloutProcess server(tiny_model_dir());
  ASSERT_NE(server.port(), 0);
  auto external = external_sampler(server.base_url());
  auto native = native_sampler();
  const std::vector<int32_t> full = native->generate({{kPromptA, "", "", 1, 1, {}}}, greedy(12))[0].ids;
  ASSERT_GE(full.size(), 6u);
  // A stop id taken from the middle of the greedy completion: kept as the last id.
  std::vector<SampleRequest> with_stop_id = {{kPromptA, "", "", 2, 1, {full[4]}}};
  auto got = external->generate(with_stop_id, greedy(12));
  expect_same(got, native->generate(with_stop_id, greedy(12)));
  EXPECT_EQ(got[0].ids.back(), full[4]);
  EXPECT_LE(got[0].ids.size(), 5u);
  EXPECT_FALSE(got[0].truncated()) << "ended by a stop id";
  // A stop string: text the completion gains after its third token (a random
  // model's tokens may decode to nothing alone, so it is taken from the text).
  grpo::tok::Tokenizer tok = grpo::tok::Tokenizer::from_dir(tiny_model_dir());
  const std::string head = tok.decode(std::vector<int32_t>(full.begin(), full.begin() + 3));
  std::string stop;
  for (size_t t = 4; t <= full.size() && stop.empty(); ++t) {
    const std::string text = tok.decode(std::vector<int32_t>(full.begin(), full.begin() + static_cast<long>(t)));
    if (text.size() > head.size() && text.compare(0, head.size(), head) == 0) stop = text.substr(head.size(), 2);
  }
  ASSERT_FALSE(stop.empty()) << "the greedy completion's text never grows: " << tok.decode(full);
  SampleOptions o = greedy(12);
  o.stop_strings = {stop};
  std::vector<SampleRequest> plain = {{kPromptA, "", "", 1, 1, {}}};
  got = external->generate(plain, o);
  expect_same(got, native->generate(plain, o));
  EXPECT_LT(got[0].ids.size(), full.size());
  EXPECT_NE(got[0].text.find(stop), std::string::npos);
  EXPECT_FALSE(got[0].truncated());
  // Without a stop the completion runs to max_new_tokens: finish reason length.
  got = external->generate(plain, greedy(5));
  ASSERT_EQ(got[0].ids.size(), 5u);
  EXPECT_TRUE(got[0].truncated());
}

// Pushed weights (bucketed, and one call per parameter) change what the
// server generates to what the native sampler gives with the same weights.
TEST(ExternalSampler, PushedWeightsReachTheServer) {
  RolloutProcess server(tiny_model_dir());
  ASSERT_NE(server.port(), 0);
  grpo::model::CausalLM trainer = grpo::model::load_model(tiny_model_dir());
  {
    torch::NoGradGuard no_grad;
    auto gen = at::detail::createCPUGenerator(7);
    for (auto& p : trainer->parameters()) p.add_(0.5 * at::randn(p.sizes(), gen));
  }
  grpo::trainer::WeightViews views(*trainer);
  auto native = native_sampler();
  native->load_weights(views.tensors(), GRPO_WEIGHTS_LAST_BUCKET);  // copied, as for any sampler
  const auto want = native->generate(two_requests(), greedy());
  const auto before = external_sampler(server.base_url())->generate(two_requests(), greedy());
  ASSERT_NE(before[0].ids, want[0].ids) << "the perturbation must change the greedy completion";
  const size_t n_params = views.tensors().size();
  for (double bucket_mb : {256.0, 0.0}) {
    auto external = external_sampler(server.base_url(), {{"bucket_mb", bucket_mb}});
    const auto t0 = std::chrono::steady_clock::now();
    external->load_weights(views.tensors(), GRPO_WEIGHTS_LAST_BUCKET);
    const double first = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const auto t1 = std::chrono::steady_clock::now();
    external->load_weights(views.tensors(), GRPO_WEIGHTS_LAST_BUCKET);  // connected already
    const double again = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
    std::printf("weight push, bucket_mb %.0f, %zu tensors: first %.3f s (with connect), then %.3f s\n", bucket_mb,
                n_params, first, again);
    expect_same(external->generate(two_requests(), greedy()), want);
  }
  auto health = server.get("/health/");
  EXPECT_EQ(health.body.value("tensors_received", 0), static_cast<int>(4 * n_params)) << health.raw;
}

// sampler_args weight_backend: gloo carries the push from anywhere; nccl is
// refused, before anything is sent, where it cannot form (here: weights in
// host memory), and the next push over Gloo still arrives.
TEST(ExternalSampler, WeightBackendPicksWhatCarriesThePushOrSaysWhyItCannot) {
  RolloutProcess server(tiny_model_dir());
  ASSERT_NE(server.port(), 0);
  grpo::model::CausalLM trainer = grpo::model::load_model(tiny_model_dir());
  grpo::trainer::WeightViews views(*trainer);
  try {
    external_sampler(server.base_url(), {{"weight_backend", "infiniband"}});
    ADD_FAILURE() << "weight_backend infiniband was accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("weight_backend must be auto, gloo or nccl, got 'infiniband'"),
              std::string::npos)
        << e.what();
  }
  auto nccl = external_sampler(server.base_url(), {{"weight_backend", "nccl"}});
  try {
    nccl->load_weights(views.tensors(), GRPO_WEIGHTS_LAST_BUCKET);
    ADD_FAILURE() << "weight_backend nccl pushed weights from host memory";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("weight_backend nccl cannot be used: the weights are in host memory"),
              std::string::npos)
        << e.what();
  }
  auto gloo = external_sampler(server.base_url(), {{"weight_backend", "gloo"}});
  gloo->load_weights(views.tensors(), GRPO_WEIGHTS_LAST_BUCKET);
  auto health = server.get("/health/");
  EXPECT_EQ(health.body.value("tensors_received", 0), static_cast<int>(views.tensors().size())) << health.raw;
}
