// The native sampler plugin through the sampler ABI: the same completions as
// the engine itself, and weights shared with the trainer without copies.
#include <filesystem>

#include <gtest/gtest.h>
#include <torch/types.h>
#include <torch/utils.h>

#include "model/engine.h"
#include "model/sampling.h"
#include "model/weights.h"
#include "plugins/builtin_plugins.h"
#include "plugins/plugin_error.h"
#include "plugins/sampler_client.h"
#include "tokenizer/byte_tokenizer.h"
#include "tokenizer/tokenizer.h"
#include "trainer/weight_views.h"

using namespace grpo::plugins;

namespace {

const std::string kDir = GRPO_TEST_DATA_DIR "/tiny-qwen2";
// tiny-qwen2 ships no tokenizer; its ids (< 300) are valid Qwen3 ids.
const std::string kTokenizer = GRPO_TEST_DATA_DIR "/qwen3-tokenizer.json";
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
    EXPECT_TRUE(got[i].truncated());
  }
}

TEST(NativeSampler, CopiesOfAGroupSampledApartEqualTheWholeGroup) {
  // Data parallel ranks each sample some copies of a group: copy k must be
  // the same completion whichever call samples it.
  auto sampler = native({{"model", kDir}, {"tokenizer", kTokenizer}});
  SampleOptions o;
  o.max_new_tokens = 8;
  o.temperature = 1.2;
  auto whole = sampler->generate({{kPrompt, "", "", 4, 99, {}}}, o);
  SampleRequest tail{kPrompt, "", "", 3, grpo::model::seed_of_copies(99, 1), {}};
  tail.first_copy = 1;
  auto part = sampler->generate({tail}, o);
  ASSERT_EQ(part.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(part[i].index, i + 1);
    EXPECT_EQ(part[i].ids, whole[i + 1].ids) << i;
    // The same tokens; their log-probs come from a batch of 3 rows instead of
    // 4, and BLAS may pick another kernel (another summation order) for
    // another shape: on AVX-512 machines they differ in the sixth digit.
    ASSERT_EQ(part[i].logprobs.size(), whole[i + 1].logprobs.size()) << i;
    for (size_t t = 0; t < part[i].logprobs.size(); ++t)
      EXPECT_NEAR(part[i].logprobs[t], whole[i + 1].logprobs[t], 1e-4) << i << " token " << t;
  }
  EXPECT_NE(whole[0].ids, whole[1].ids) << "copies sample their own streams";
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

// tiny-qwen2 has 300 embedding rows and the byte tokenizer 259 tokens: with
// random weights the sampler draws ids that are no token, and decodes them
// to nothing instead of failing the call.
TEST(NativeSampler, DecodesSampledIdsThatAreNoTokenToNothing) {
  const auto tok_dir = std::filesystem::temp_directory_path() / ("grpo_native_bytes_" + std::to_string(::getpid()));
  grpo::tok::write_byte_level_tokenizer(tok_dir.string());
  auto sampler = native({{"model", kDir}, {"tokenizer", tok_dir.string()}});
  SampleOptions o;
  o.max_new_tokens = 16;
  o.temperature = 1.0;
  o.top_p = 1.0;
  auto got = sampler->generate({{{72, 101, 108}, "", "", 4, 5, {}}}, o);
  const grpo::tok::Tokenizer tokenizer = grpo::tok::Tokenizer::from_dir(tok_dir.string());
  size_t non_tokens = 0;
  for (const auto& c : got) {
    non_tokens += tokenizer.count_non_tokens(c.ids);
    std::vector<int32_t> tokens;
    for (int32_t id : c.ids)
      if (id < grpo::tok::kByteTokenizerVocabSize) tokens.push_back(id);
    EXPECT_EQ(c.text, tokenizer.decode(tokens, /*skip_special_tokens=*/true));
  }
  EXPECT_GT(non_tokens, 0u) << "the test needs ids past the tokenizer's vocabulary";
  std::filesystem::remove_all(tok_dir);
}

// load_format "trainer", as grpo-host creates it: no weights are read from the
// model directory (here it has none); the engine is built around the
// trainer's tensors when the last bucket arrives, and aliases them.
TEST(NativeSampler, WithTheTrainersWeightsNothingIsReadAndTheyAreShared) {
  const auto dir = std::filesystem::temp_directory_path() / ("grpo_native_trainer_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(kDir + "/config.json", dir / "config.json");
  auto sampler = native({{"model", dir.string()}, {"tokenizer", kTokenizer}, {"load_format", "trainer"}});
  SampleOptions greedy;
  greedy.top_k = 1;
  greedy.max_new_tokens = 6;
  const auto expect_no_weights_yet = [&] {
    try {
      sampler->generate({{kPrompt, "", "", 1, 1, {}}}, greedy);
      FAIL() << "expected an error";
    } catch (const PluginError& e) {
      EXPECT_NE(std::string(e.what()).find("no weights yet"), std::string::npos) << e.what();
    }
  };
  expect_no_weights_yet();
  grpo::model::CausalLM trainer = grpo::model::load_model(kDir);
  grpo::trainer::WeightViews views(*trainer);
  const std::vector<grpo_named_tensor>& all = views.tensors();
  const size_t half = all.size() / 2;
  sampler->load_weights({all.begin(), all.begin() + half}, GRPO_WEIGHTS_VIEW);
  expect_no_weights_yet();  // not before the last bucket
  sampler->load_weights({all.begin() + half, all.end()}, GRPO_WEIGHTS_VIEW | GRPO_WEIGHTS_LAST_BUCKET);
  grpo::model::SamplingParams p;
  p.top_k = 1;
  p.max_new_tokens = 6;
  grpo::model::Engine reference(grpo::model::load_model(kDir));
  EXPECT_EQ(sampler->generate({{kPrompt, "", "", 1, 1, {}}}, greedy)[0].ids,
            reference.generate({{kPrompt, 1, 1, {}}}, p)[0].ids);
  {
    torch::NoGradGuard no_grad;  // an optimizer's in-place update, seen without a transfer
    trainer->lm_head ? trainer->lm_head->weight.mul_(-1) : trainer->model->embed_tokens->weight.mul_(-1);
  }
  grpo::model::Engine updated(trainer);
  const auto after = sampler->generate({{kPrompt, "", "", 1, 1, {}}}, greedy)[0].ids;
  EXPECT_EQ(after, updated.generate({{kPrompt, 1, 1, {}}}, p)[0].ids);
  EXPECT_NE(after, reference.generate({{kPrompt, 1, 1, {}}}, p)[0].ids);
  std::filesystem::remove_all(dir);
}

TEST(NativeSampler, WithTheTrainersWeightsAMissingParameterIsNamed) {
  auto sampler = native({{"model", kDir}, {"tokenizer", kTokenizer}, {"load_format", "trainer"}});
  grpo::model::CausalLM trainer = grpo::model::load_model(kDir);
  grpo::trainer::WeightViews views(*trainer);
  std::vector<grpo_named_tensor> all_but_last = views.tensors();
  const std::string missing(all_but_last.back().name.data, all_but_last.back().name.size);
  all_but_last.pop_back();
  try {
    sampler->load_weights(all_but_last, GRPO_WEIGHTS_VIEW | GRPO_WEIGHTS_LAST_BUCKET);
    FAIL() << "expected an error";
  } catch (const PluginError& e) {
    EXPECT_NE(std::string(e.what()).find("'" + missing + "' was never given"), std::string::npos) << e.what();
  }
  try {
    native({{"model", kDir}, {"tokenizer", kTokenizer}, {"load_format", "dummy"}});
    FAIL() << "expected an error";
  } catch (const PluginError& e) {
    EXPECT_NE(std::string(e.what()).find("'dummy'"), std::string::npos) << e.what();
  }
}
