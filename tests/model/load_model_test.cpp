// load_model and copy_model build the model without drawing initial values
// (model/skip_init.h): the checkpoint's weights, in the dtype asked for, as
// building, converting and loading gave them, and the global generator that
// --seed sets left where it was.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "model/presets.h"
#include "model/rope.h"
#include "model/skip_init.h"
#include "model/weights.h"

using namespace grpo;
namespace fs = std::filesystem;

namespace {

// A model with an lm_head of its own (nn::Linear, which draws in its constructor).
std::string untied_model_dir() {
  const fs::path dir = fs::temp_directory_path() / "grpo_load_model_untied";
  if (!fs::exists(dir / "config.json")) {
    nlohmann::json json = model::preset_config("qwen2", "small", 300);
    json["tie_word_embeddings"] = false;
    model::CausalLM lm(model::ModelConfig::from_json(json, "untied"));
    model::init_weights(*lm, 3);
    fs::create_directories(dir);
    model::save_model(*lm, dir.string());
  }
  return dir.string();
}

// The next draws of the global generator after `load` ran from seed 7.
at::Tensor draws_after(const std::function<void()>& load) {
  torch::manual_seed(7);
  load();
  return torch::rand({8});
}

}  // namespace

TEST(LoadModel, DrawsNothingFromTheGlobalGenerator) {
  torch::manual_seed(7);
  const at::Tensor expected = torch::rand({8});
  for (const std::string dir : {std::string(GRPO_TEST_DATA_DIR "/tiny-qwen2"), untied_model_dir()}) {
    EXPECT_TRUE(at::equal(draws_after([&] { model::load_model(dir); }), expected)) << dir;
    EXPECT_TRUE(at::equal(draws_after([&] { model::load_model(dir, at::kBFloat16); }), expected)) << dir;
    model::CausalLM policy = model::load_model(dir);
    EXPECT_TRUE(at::equal(draws_after([&] { model::copy_model(*policy); }), expected)) << dir;
  }
  // Building without a checkpoint still draws, as torch::nn::Linear does.
  const nlohmann::json json = nlohmann::json::parse(std::ifstream(untied_model_dir() + "/config.json"));
  EXPECT_FALSE(at::equal(draws_after([&] { model::CausalLM(model::ModelConfig::from_json(json, "x")); }), expected));
}

TEST(LoadModel, HoldsWhatBuildingConvertingAndLoadingGive) {
  for (const std::string dir : {std::string(GRPO_TEST_DATA_DIR "/tiny-qwen2"), untied_model_dir()}) {
    for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
      const model::CheckpointFiles files = model::CheckpointFiles::open(dir);
      model::CausalLM expected(model::ModelConfig::load(dir + "/config.json"));
      expected->to(dtype);
      model::load_weights(*expected, files);
      model::CausalLM loaded = model::load_model(dir, dtype);
      auto want = expected->named_parameters();
      auto got = loaded->named_parameters();
      ASSERT_EQ(got.size(), want.size()) << dir;
      for (const auto& item : want) {
        const at::Tensor& g = got[item.key()];
        EXPECT_TRUE(at::equal(g, item.value())) << dir << " " << item.key();
        EXPECT_EQ(g.scalar_type(), dtype) << item.key();
        EXPECT_EQ(g.requires_grad(), item.value().requires_grad()) << item.key();
      }
      auto want_buffers = expected->named_buffers();
      for (const auto& item : loaded->named_buffers())
        EXPECT_TRUE(at::equal(item.value(), want_buffers[item.key()])) << item.key();
      if (loaded->lm_head) {
        EXPECT_EQ(loaded->lm_head->options.in_features(), loaded->config().hidden_size);
        EXPECT_EQ(loaded->lm_head->options.out_features(), loaded->config().vocab_size);
      }
      torch::NoGradGuard no_grad;
      const at::Tensor ids = torch::tensor({{1, 2, 3, 4}}, torch::kLong);
      EXPECT_TRUE(at::equal(loaded->forward(ids), expected->forward(ids))) << dir;
    }
  }
}

TEST(LoadModel, SkipInitEndsWithItsScopeAndNests) {
  EXPECT_FALSE(model::init_skipped());
  {
    model::SkipInit outer;
    {
      model::SkipInit inner;
      EXPECT_TRUE(model::init_skipped());
    }
    EXPECT_TRUE(model::init_skipped());
  }
  EXPECT_FALSE(model::init_skipped());
}

// Hugging Face keeps RoPE's inv_freq in float32 whatever the weights' dtype:
// rounded to bfloat16, the angles drift by radians within a few thousand positions.
TEST(LoadModel, RotaryFrequenciesStayFloat32InABfloat16Model) {
  model::CausalLM lm = model::load_model(GRPO_TEST_DATA_DIR "/tiny-qwen2", at::kBFloat16);
  const at::Tensor exact = model::rope_inv_freq(lm->config());
  auto inv_freq = [&] { return lm->named_buffers()["inv_freq"]; };
  EXPECT_EQ(inv_freq().scalar_type(), at::kFloat);
  EXPECT_TRUE(at::equal(inv_freq(), exact));
  lm->to(at::kHalf);
  EXPECT_TRUE(at::equal(inv_freq(), exact));
  lm->to(at::kCPU, at::kBFloat16);
  EXPECT_TRUE(at::equal(inv_freq(), exact));
  EXPECT_EQ(lm->parameters().front().scalar_type(), at::kBFloat16);
}
