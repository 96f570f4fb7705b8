// A LoRA checkpoint loaded for inference: the base its adapter_config.json
// names, plus its adapters — what generate and evaluate run.
#include <filesystem>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/lora.h"
#include "model/lora_files.h"
#include "model/weights.h"

using namespace grpo::model;

TEST(LoraLoad, AnAdapterDirectoryLoadsOnItsBaseWithTheAdapters) {
  const std::string base = GRPO_TEST_DATA_DIR "/tiny-qwen2";
  const auto dir = std::filesystem::temp_directory_path() / "grpo_lora_load";
  std::filesystem::remove_all(dir);
  CausalLM trained = load_model(base);
  LoraOptions options;
  options.rank = 4;
  options.dropout = 0.0;
  apply_lora(*trained, options);
  {
    torch::NoGradGuard no_grad;  // as if trained: B away from its zero start
    for (auto& [name, proj] : projections(*trained)) proj->lora_B.normal_(0.0, 0.05);
  }
  save_peft_adapter(*trained, options, dir.string(), base);

  at::Tensor ids = torch::randint(0, 100, {1, 8}, torch::kLong);
  torch::NoGradGuard no_grad;
  trained->eval();
  CausalLM loaded = load_model_or_adapter(dir.string());
  const at::Tensor want = trained->forward(ids), got = loaded->forward(ids);
  EXPECT_TRUE(torch::allclose(got, want, 1e-5, 1e-6));
  EXPECT_FALSE(torch::allclose(load_model(base)->forward(ids), want, 1e-3, 1e-3)) << "the adapters must matter";
  EXPECT_TRUE(torch::allclose(load_model_or_adapter(base)->forward(ids), load_model(base)->forward(ids)))
      << "a model directory loads as itself";
}

TEST(LoraLoad, AnAdapterWhoseBaseIsNotLocalSaysWhatToDo) {
  const auto dir = std::filesystem::temp_directory_path() / "grpo_lora_load_remote";
  std::filesystem::remove_all(dir);
  CausalLM model = load_model(GRPO_TEST_DATA_DIR "/tiny-qwen2");
  LoraOptions options;
  apply_lora(*model, options);
  save_peft_adapter(*model, options, dir.string(), "Qwen/Qwen2.5-7B");
  try {
    load_model_or_adapter(dir.string());
    FAIL() << "expected an error";
  } catch (const AdapterFileError& e) {
    EXPECT_NE(std::string(e.what()).find("Qwen/Qwen2.5-7B"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("merged/"), std::string::npos) << e.what();
  }
}
