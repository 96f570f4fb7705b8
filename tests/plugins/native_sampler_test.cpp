// The native sampler plugin through the sampler ABI: the same completions as
// the engine itself, and weights shared with the trainer without copies.
#include <gtest/gtest.h>
#include <torch/types.h>
#include <torch/utils.h>

#include "model/engine.h"
#include "model/weights.h"
#include "plugins/builtin_plugins.h"
#include "plugins/plugin_error.h"
#include "plugins/sampler_client.h"
#include "trainer/weight_views.h"

using namespace grpo::plugins;

namespace {

const std::string kDir = GRPO_SHARED_DATA_DIR "/tiny-qwen2";
// tiny-qwen2 ships no tokenizer; its ids (< 300) are valid Qwen3 ids.
const std::string kTokenizer = GRPO_SHARED_DATA_DIR "/qwen3-tokenizer.json";
const std::vector<int32_t> kPrompt = {93, 283, 208, 107, 40, 235, 119, 177, 185, 88, 109};

std::unique_ptr<SamplerClient> native(const nlohmann::json& options) {
  return grpo::testing::builtin_sampler("native", options);
}

}  // namespace

TEST(NativeSampler, GivesTheEnginesCompletionsThroughTheAbi) {
  auto sampler = native({{"model", kDir}, {"tokenizer", kTokenizer}});
  EXPECT_TRUE(sampler->in_process());
  SampleOptions o;
  o.max_new_tokens = 8;
  o.temperature = 0.9;
  auto got = sampler->generate({{kPrompt, "", "", 3, 11, {}}, {{1, 2, 3}, "", "", 1, 12, {}}}, o);
  grpo::model::Engine engine(grpo::model::load_model(kDir));
  grpo::model::SamplingParams p;
  p.max_new_tokens = 8;
  p.temperature = 0.9;
  auto want = engine.generate({{kPrompt, 3, 11, {}}, {{1, 2, 3}, 1, 12, {}}}, p);
  ASSERT_EQ(got.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(got[i].ids, want[i].ids) << i;
    EXPECT_EQ(got[i].logprobs, want[i].logprobs) << i;
    EXPECT_TRUE(got[i].truncated);
  }
}

TEST(NativeSampler, SeesAnOptimizerUpdateWithoutAnyTransfer) {
  auto sampler = native({{"model", kDir}, {"tokenizer", kTokenizer}});
  grpo::model::CausalLM trainer = grpo::model::load_model(kDir);
  grpo::trainer::WeightViews views(*trainer);
  sampler->load_weights(views.tensors(), GRPO_WEIGHTS_VIEW | GRPO_WEIGHTS_LAST_BUCKET);
  SampleOptions greedy;
  greedy.top_k = 1;
  greedy.max_new_tokens = 6;
  auto before = sampler->generate({{kPrompt, "", "", 1, 1, {}}}, greedy)[0].ids;
  {
    // An in-place update, as an optimizer step makes: no load_weights call after it.
    torch::NoGradGuard no_grad;
    trainer->lm_head ? trainer->lm_head->weight.mul_(-1) : trainer->model->embed_tokens->weight.mul_(-1);
  }
  auto after = sampler->generate({{kPrompt, "", "", 1, 1, {}}}, greedy)[0].ids;
  EXPECT_NE(before, after) << "the sampler did not see the trainer's in-place update";
  grpo::model::Engine reference(trainer);
  grpo::model::SamplingParams p;
  p.top_k = 1;
  p.max_new_tokens = 6;
  EXPECT_EQ(after, reference.generate({{kPrompt, 1, 1, {}}}, p)[0].ids);
}

TEST(NativeSampler, BadConfigurationAndWeightsAreClearErrors) {
  try {
    native(nlohmann::json::object());
    FAIL() << "expected an error";
  } catch (const PluginError& e) {
    EXPECT_NE(std::string(e.what()).find("'model'"), std::string::npos) << e.what();
  }
  auto sampler = native({{"model", kDir}, {"tokenizer", kTokenizer}});
  std::string name = "model.no_such.weight";
  std::vector<int64_t> shape = {2};
  float data[2] = {0, 0};
  grpo_named_tensor t{{name.data(), name.size()},
                      {data, {GRPO_DEVICE_CPU, 0}, 1, {GRPO_DTYPE_FLOAT, 32, 1}, shape.data(), nullptr, 0}};
  try {
    sampler->load_weights({t}, 0);
    FAIL() << "expected an error";
  } catch (const PluginError& e) {
    EXPECT_NE(std::string(e.what()).find("model.no_such.weight"), std::string::npos) << e.what();
  }
}
