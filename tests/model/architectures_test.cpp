// Llama and Qwen3 (no fixture from transformers here): what must hold for any
// correct implementation — save/load round trips, the cache agrees with the
// cache-free forward, padding is invisible, presets have the shapes config.json says.
#include <filesystem>

#include <gtest/gtest.h>
#include <torch/types.h>
#include <torch/utils.h>

#include "model/checkpoint_files.h"
#include "model/presets.h"
#include "model/weights.h"

using namespace grpo::model;

namespace {

class Architectures : public ::testing::TestWithParam<std::string> {
 protected:
  CausalLM make() {
    nlohmann::json json = preset_config(GetParam(), "tiny", 97);
    if (GetParam() == "llama") json["tie_word_embeddings"] = false;  // an untied lm_head
    if (GetParam() == "llama")
      json["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0},
                              {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 64}};
    CausalLM lm(ModelConfig::from_json(json, "preset"));
    init_weights(*lm, 3, 0.2);  // large weights: differences show
    return lm;
  }
  torch::NoGradGuard no_grad_;
};

}  // namespace

TEST_P(Architectures, SaveLoadRoundTripAndShapesMatchConfig) {
  CausalLM lm = make();
  auto dir = std::filesystem::temp_directory_path() / ("grpo_arch_" + GetParam());
  std::filesystem::remove_all(dir);
  save_model(*lm, dir.string());
  CheckpointFiles files = CheckpointFiles::open(dir.string());
  EXPECT_NO_THROW(check_tensors(lm->config(), files));
  EXPECT_EQ(files.find("lm_head.weight") != nullptr, !lm->config().tie_word_embeddings);
  CausalLM again = load_model(dir.string());
  at::Tensor ids = torch::randint(0, 97, {2, 9}, torch::kLong);
  EXPECT_TRUE(at::equal(lm->forward(ids), again->forward(ids)));
}

TEST_P(Architectures, CachedDecodingEqualsFullForward) {
  CausalLM lm = make();
  at::Tensor ids = torch::randint(0, 97, {3, 12}, torch::kLong);
  at::Tensor full = lm->forward(ids);  // [3, 12, V]
  KvCache cache = lm->new_cache();
  at::Tensor prefix = lm->logits(lm->hidden_states(ids.narrow(1, 0, 5), {}, {}, &cache));
  EXPECT_TRUE(torch::allclose(prefix, full.narrow(1, 0, 5), 1e-4, 1e-4));
  for (int64_t t = 5; t < 12; ++t) {
    at::Tensor step = lm->logits(lm->hidden_states(ids.narrow(1, t, 1), {}, {}, &cache));
    EXPECT_TRUE(torch::allclose(step.squeeze(1), full.select(1, t), 1e-4, 1e-4)) << "t=" << t;
  }
}

TEST_P(Architectures, LeftPaddingIsInvisible) {
  CausalLM lm = make();
  at::Tensor ids = torch::randint(0, 97, {1, 8}, torch::kLong);
  at::Tensor padded = at::cat({torch::zeros({1, 4}, torch::kLong), ids}, 1);
  at::Tensor mask = at::cat({torch::zeros({1, 4}, torch::kLong), torch::ones({1, 8}, torch::kLong)}, 1);
  at::Tensor a = lm->forward(ids), b = lm->forward(padded, mask).narrow(1, 4, 8);
  EXPECT_TRUE(torch::allclose(a, b, 1e-4, 1e-4));
}

TEST(Architectures, Llama3RopeScalingSlowsOnlyLongWavelengths) {
  nlohmann::json json = preset_config("llama", "tiny", 97);
  CausalLM plain(ModelConfig::from_json(json, "preset"));
  json["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0},
                          {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 64}};
  CausalLM scaled(ModelConfig::from_json(json, "preset"));
  at::Tensor a = plain->named_buffers()["inv_freq"], b = scaled->named_buffers()["inv_freq"];
  EXPECT_FLOAT_EQ(a[0].item<float>(), b[0].item<float>());  // highest frequency: unchanged
  const int64_t last = a.size(0) - 1;
  EXPECT_NEAR(b[last].item<float>(), a[last].item<float>() / 8.0f, 1e-9);  // longest wavelength: / factor
}

TEST_P(Architectures, Bfloat16StorageLoadsIntoFloat32) {
  CausalLM lm = make();
  lm->to(at::kBFloat16);
  auto dir = std::filesystem::temp_directory_path() / ("grpo_arch_bf16_" + GetParam());
  std::filesystem::remove_all(dir);
  save_model(*lm, dir.string());
  EXPECT_EQ(CheckpointFiles::open(dir.string()).require("model.norm.weight").dtype, DType::BF16);
  CausalLM back = load_model(dir.string(), at::kFloat);
  for (auto& p : back->named_parameters()) {
    ASSERT_EQ(p.value().scalar_type(), at::kFloat);
    EXPECT_TRUE(at::equal(p.value(), lm->named_parameters()[p.key()].to(at::kFloat))) << p.key();
  }
}

INSTANTIATE_TEST_SUITE_P(All, Architectures, ::testing::Values("qwen2", "llama", "qwen3"));

// The real-shape presets are Qwen2.5-0.5B's and 1.5B's config.json (Hugging Face
// Qwen/Qwen2.5-0.5B and Qwen/Qwen2.5-1.5B), so benchmarks at those shapes do
// the work those models do; their vocabulary stays 151,936 unless the tokenizer is larger.
TEST(Presets, RealShapesAreQwen25Configs) {
  struct Expected {
    const char* name;
    int64_t hidden, intermediate, layers, heads, kv_heads, head_dim, vocab, parameters;
    bool tied;
  };
  for (const Expected& e : {Expected{"qwen2.5-0.5b", 896, 4864, 24, 14, 2, 64, 151936, 494032768, true},
                            Expected{"qwen2.5-1.5b", 1536, 8960, 28, 12, 2, 128, 151936, 1543714304, true},
                            Expected{"qwen2.5-7b", 3584, 18944, 28, 28, 4, 128, 152064, 7615616512, false}}) {
    ModelConfig c = ModelConfig::from_json(preset_config("qwen2", e.name, 300), e.name);
    EXPECT_EQ(c.hidden_size, e.hidden) << e.name;
    EXPECT_EQ(c.intermediate_size, e.intermediate) << e.name;
    EXPECT_EQ(c.num_hidden_layers, e.layers) << e.name;
    EXPECT_EQ(c.num_attention_heads, e.heads) << e.name;
    EXPECT_EQ(c.num_key_value_heads, e.kv_heads) << e.name;
    EXPECT_EQ(c.vocab_size, e.vocab) << e.name;
    EXPECT_EQ(c.head_dim, e.head_dim) << e.name;
    EXPECT_DOUBLE_EQ(c.rope_theta, 1000000.0) << e.name;
    EXPECT_EQ(c.tie_word_embeddings, e.tied) << e.name;
    // Parameters from the shapes, as the published model cards count them.
    const int64_t H = c.hidden_size, kv = c.num_key_value_heads * c.head_dim;
    const int64_t layer = (H * H + H) + 2 * (H * kv + kv) + H * H + 3 * H * c.intermediate_size + 2 * H;
    const int64_t embeddings = (e.tied ? 1 : 2) * c.vocab_size * H;  // with the lm_head when it is its own
    EXPECT_EQ(embeddings + c.num_hidden_layers * layer + H, e.parameters) << e.name;
  }
  EXPECT_EQ(preset_config("qwen2", "qwen2.5-0.5b", 200000)["vocab_size"], 200000);  // a larger tokenizer wins
}
