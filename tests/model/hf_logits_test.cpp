// Checkpoints that Hugging Face transformers writes (tiny, random, float32)
// load here and give transformers' logits: one per supported architecture,
// with the features its released models use (tests/oracles/hf_models.py);
// saved again here, transformers reads back the same model.
#include <gtest/gtest.h>
#include <torch/utils.h>

#include <cstdio>

#include "hf_oracle.h"
#include "hf_our_models.h"
#include "model/weights.h"

using namespace grpo::model;
using grpo::test::HfLogits;

namespace {

// What each oracle checkpoint must turn on here, or the comparison would not
// test that feature.
void expect_features(const std::string& arch, const ModelConfig& c) {
  if (arch == "qwen2") {
    EXPECT_TRUE(c.tie_word_embeddings);
    EXPECT_TRUE(c.attention_bias);
    EXPECT_EQ(c.rope_theta, 1e6) << "transformers 5 writes it inside rope_parameters";
  } else if (arch == "qwen2.5") {
    EXPECT_FALSE(c.tie_word_embeddings);
    EXPECT_TRUE(c.attention_bias);
    EXPECT_EQ(c.rope_theta, 1e6);
  } else if (arch == "qwen3") {
    EXPECT_TRUE(c.qk_norm);
    EXPECT_EQ(c.head_dim, 32) << "wider than hidden_size / heads";
    EXPECT_EQ(c.rope_theta, 1e6);
  } else if (arch == "llama3") {
    EXPECT_FALSE(c.tie_word_embeddings);
    ASSERT_TRUE(c.rope_scaling.has_value()) << "llama3 rope scaling, inside rope_parameters";
    EXPECT_EQ(c.rope_scaling->type, "llama3");
    EXPECT_EQ(c.rope_scaling->original_max_position_embeddings, 64);
    EXPECT_EQ(c.rope_theta, 500000.0);
    EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{2, 3}));
  } else if (arch == "llama-bias") {
    EXPECT_TRUE(c.attention_bias);
    EXPECT_TRUE(c.o_proj_bias);
  }
  EXPECT_LT(c.num_key_value_heads, c.num_attention_heads) << "grouped-query attention";
}

class HfLogitsTest : public ::testing::TestWithParam<std::string> {};

}  // namespace

TEST_P(HfLogitsTest, TransformersCheckpointGivesTransformersLogits) {
  const std::string arch = GetParam();
  const std::string dir = grpo::test::fresh_dir("logits_" + arch);
  ASSERT_NO_FATAL_FAILURE(grpo::test::run_hf_oracle("make '" + dir + "' '" + arch + "'", dir));
  CausalLM lm = load_model(dir + "/" + arch);
  lm->eval();
  expect_features(arch, lm->config());
  const HfLogits want = grpo::test::read_hf_logits(dir + "/" + arch + "/oracle.safetensors");
  const double diff = grpo::test::max_logit_difference(*lm, want);
  std::printf("%s: max |logit - transformers| = %.3g over logits of magnitude up to %.3g\n", arch.c_str(), diff,
              want.logits.abs().max().item<double>());
  EXPECT_LE(diff, grpo::test::kLogitTolerance) << arch;

  // Saved again here (config.json written back from what was read), transformers reads the same model.
  save_model(*lm, dir + "/resaved");
  ASSERT_NO_FATAL_FAILURE(
      grpo::test::run_hf_oracle("logits '" + dir + "/resaved' '" + dir + "/resaved.safetensors'", dir));
  const HfLogits again = grpo::test::read_hf_logits(dir + "/resaved.safetensors");
  const double resaved = grpo::test::max_logit_difference(*lm, again);
  std::printf("%s: max |ours - transformers loading it saved here| = %.3g\n", arch.c_str(), resaved);
  EXPECT_LE(resaved, grpo::test::kLogitTolerance) << arch << " saved by save_model";
}

INSTANTIATE_TEST_SUITE_P(Architectures, HfLogitsTest, ::testing::ValuesIn(grpo::test::kHfArchitectures),
                         grpo::test::arch_test_name);
// A configuration the code supports beyond the released models (tests/oracles/hf_models.py).
INSTANTIATE_TEST_SUITE_P(AttentionBias, HfLogitsTest, ::testing::Values(std::string("llama-bias")),
                         grpo::test::arch_test_name);
