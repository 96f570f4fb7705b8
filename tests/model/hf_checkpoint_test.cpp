// Checkpoints this project writes — save_checkpoint, what `grpo-host train`
// leaves in output_dir/checkpoint-N (save_model under it) — load in Hugging
// Face transformers, whose logits equal ours. The models differ from the
// oracle script's own (three layers, another vocabulary, our initialisation).
#include <gtest/gtest.h>
#include <torch/utils.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "hf_oracle.h"
#include "hf_our_models.h"
#include "model/weights.h"
#include "trainer/checkpoint.h"

using namespace grpo::model;
using grpo::test::HfLogits;

namespace {

class HfCheckpointTest : public ::testing::TestWithParam<std::string> {};

}  // namespace

TEST_P(HfCheckpointTest, OurCheckpointLoadsInTransformersWithOurLogits) {
  const std::string arch = GetParam();
  const std::string dir = grpo::test::fresh_dir("checkpoint_" + arch);
  CausalLM lm = grpo::test::our_model(arch, 21);
  lm->eval();
  grpo::trainer::CheckpointSettings settings;
  settings.output_dir = dir + "/output";
  const std::string tokenizer = dir + "/tokenizer";  // none: an empty folder
  std::filesystem::create_directories(tokenizer);
  const std::string checkpoint = grpo::trainer::save_checkpoint(*lm, settings, 1, tokenizer, {{"global_step", 1}});

  ASSERT_NO_FATAL_FAILURE(
      grpo::test::run_hf_oracle("logits '" + checkpoint + "' '" + dir + "/transformers.safetensors'", dir));
  const HfLogits want = grpo::test::read_hf_logits(dir + "/transformers.safetensors");
  const double diff = grpo::test::max_logit_difference(*lm, want);
  std::printf("%s: max |ours - transformers loading our checkpoint| = %.3g\n", arch.c_str(), diff);
  EXPECT_LE(diff, grpo::test::kLogitTolerance) << arch << ": " << checkpoint;
}

INSTANTIATE_TEST_SUITE_P(Architectures, HfCheckpointTest, ::testing::ValuesIn(grpo::test::kHfArchitectures),
                         grpo::test::arch_test_name);
