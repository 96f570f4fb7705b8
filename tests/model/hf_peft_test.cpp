// LoRA adapters between this project and Hugging Face peft, both ways: a
// LoRA checkpoint written here (PEFT's adapter files, and merged/) loads in
// peft and transformers with our logits; an adapter peft saves loads here
// with peft's logits. Factors are drawn non-zero, so the adapter shows.
#include <gtest/gtest.h>
#include <torch/utils.h>

#include <ATen/CPUGeneratorImpl.h>

#include <cstdio>
#include <filesystem>

#include "hf_oracle.h"
#include "hf_our_models.h"
#include "model/lora.h"
#include "model/lora_files.h"
#include "model/weights.h"
#include "trainer/checkpoint.h"

using namespace grpo::model;
using grpo::test::HfLogits;

namespace {

class HfPeftTest : public ::testing::TestWithParam<std::string> {};

// The logits the adapter moves, at least: a test of an adapter that changes
// nothing would pass with the adapter ignored.
double adapter_effect(CausalLMImpl& lm, const HfLogits& want) {
  AdaptersDisabled base(lm);
  return grpo::test::max_logit_difference(lm, want);
}

}  // namespace

TEST_P(HfPeftTest, OurLoraCheckpointLoadsInPeftAndMergedInTransformers) {
  const std::string arch = GetParam();
  const std::string dir = grpo::test::fresh_dir("our_lora_" + arch);
  CausalLM lm = grpo::test::our_model(arch, 31);
  save_model(*lm, dir + "/base");
  LoraOptions lora;
  lora.rank = 4;
  lora.alpha = 8;  // scaling 2: a scaling left out or inverted shows
  lora.dropout = 0.0;
  apply_lora(*lm, lora);
  {
    torch::NoGradGuard no_grad;
    at::Generator gen = at::detail::createCPUGenerator(5);  // B non-zero (PEFT starts it at zero)
    for (at::Tensor& p : adapter_parameters(*lm)) p.copy_(0.1 * at::normal(0.0, 1.0, p.sizes(), gen, p.options()));
  }
  lm->eval();
  grpo::trainer::CheckpointSettings settings;
  settings.output_dir = dir + "/output";
  settings.base_model = dir + "/base";
  settings.lora_options = lora;
  settings.merge_lora = true;
  const std::string tokenizer = dir + "/tokenizer";  // none: an empty folder
  std::filesystem::create_directories(tokenizer);
  const std::string checkpoint = grpo::trainer::save_checkpoint(*lm, settings, 1, tokenizer, {{"global_step", 1}});

  // One process for both: importing transformers takes most of a call's time.
  const std::string peft_call =
      "logits '" + dir + "/base' '" + dir + "/peft.safetensors' --adapter '" + checkpoint + "'";
  const std::string merged_call = "logits '" + checkpoint + "/merged' '" + dir + "/merged.safetensors'";
  ASSERT_NO_FATAL_FAILURE(grpo::test::run_hf_oracle(peft_call + " + " + merged_call, dir));
  const HfLogits peft = grpo::test::read_hf_logits(dir + "/peft.safetensors");
  const double diff = grpo::test::max_logit_difference(*lm, peft);
  const double effect = adapter_effect(*lm, peft);
  std::printf("%s: max |ours - peft loading our adapter| = %.3g (the adapter moves logits by %.3g)\n", arch.c_str(),
              diff, effect);
  EXPECT_LE(diff, grpo::test::kLogitTolerance) << checkpoint;
  EXPECT_GT(effect, 0.1) << "the adapter must change the logits for the comparison to test it";

  // merged/ holds W + scaling B A, rounded once more than the adapter's two products: the same
  // model as the adapted one to float32 rounding, and exactly the file transformers reads.
  CausalLM merged = load_model(checkpoint + "/merged");
  const HfLogits merged_hf = grpo::test::read_hf_logits(dir + "/merged.safetensors");
  const double merged_diff = grpo::test::max_logit_difference(*merged, merged_hf);
  const double merging = grpo::test::max_logit_difference(*lm, merged_hf);
  std::printf("%s: max |ours - transformers| on merged/ = %.3g; merged vs adapted = %.3g\n", arch.c_str(),
              merged_diff, merging);
  EXPECT_LE(merged_diff, grpo::test::kLogitTolerance) << checkpoint << "/merged";
  EXPECT_LE(merging, 1e-4) << checkpoint << "/merged is not the adapted model";
}

TEST_P(HfPeftTest, PeftSavedAdapterLoadsHereWithPeftLogits) {
  const std::string arch = GetParam();
  const std::string dir = grpo::test::fresh_dir("peft_lora_" + arch);
  const std::string base = dir + "/" + arch, adapter = dir + "/adapter";
  ASSERT_NO_FATAL_FAILURE(
      grpo::test::run_hf_oracle("make '" + dir + "' '" + arch + "' + peft '" + base + "' '" + adapter + "'", dir));
  // The adapter directory names its local base, as a LoRA checkpoint does.
  CausalLM lm = load_model_or_adapter(adapter);
  ASSERT_TRUE(has_adapters(*lm));
  const HfLogits want = grpo::test::read_hf_logits(adapter + "/oracle.safetensors");
  const double diff = grpo::test::max_logit_difference(*lm, want);
  const double effect = adapter_effect(*lm, want);
  std::printf("%s: max |ours - peft| with peft's adapter = %.3g (the adapter moves logits by %.3g)\n", arch.c_str(),
              diff, effect);
  EXPECT_LE(diff, grpo::test::kLogitTolerance) << adapter;
  EXPECT_GT(effect, 0.1) << "the adapter must change the logits for the comparison to test it";
}

INSTANTIATE_TEST_SUITE_P(Architectures, HfPeftTest, ::testing::ValuesIn(grpo::test::kHfArchitectures),
                         grpo::test::arch_test_name);
