// A LoRA checkpoint loaded for inference: the base its adapter_config.json
// names, plus its adapters — what generate and evaluate run.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/lora.h"
#include "model/lora_files.h"
#include "model/safetensors.h"
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

// peft saves target_modules="all-linear" as qualified module names
// ("model.layers.0.self_attn.q_proj"); they name the projections of the layers,
// and a file whose tensors cover only some layers is refused.
TEST(LoraLoad, QualifiedTargetModulesAsPeftSavesAllLinear) {
  const auto dir = std::filesystem::temp_directory_path() / "grpo_lora_load_qualified";
  std::filesystem::remove_all(dir);
  CausalLM model = load_model(GRPO_TEST_DATA_DIR "/tiny-qwen2");
  LoraOptions options;
  options.rank = 2;
  apply_lora(*model, options);
  save_peft_adapter(*model, options, dir.string(), "base");
  const auto config_path = dir / kAdapterConfigName;
  nlohmann::json config = nlohmann::json::parse(std::ifstream(config_path));
  nlohmann::json qualified = nlohmann::json::array();
  for (auto& [name, proj] : projections(*model)) qualified.push_back(name);
  config["target_modules"] = qualified;
  std::ofstream(config_path) << config.dump();
  CausalLM fresh = load_model(GRPO_TEST_DATA_DIR "/tiny-qwen2");
  const LoraOptions read = load_peft_adapter(*fresh, dir.string());
  EXPECT_EQ(resolve_target_modules(read.target_modules), resolve_target_modules({"all-linear"}));
  EXPECT_EQ(projections(*fresh).size(), projections(*model).size());

  // Only layer 0's tensors, as an adapter of some layers would hold.
  auto file = SafetensorsFile::open((dir / kAdapterWeightsName).string());
  std::vector<TensorView> layer0;
  for (const TensorView& v : file->tensors())
    if (v.name.find(".layers.0.") != std::string::npos) layer0.push_back(v);
  write_safetensors((dir / "layer0.safetensors").string(), layer0);
  file.reset();
  std::filesystem::rename(dir / "layer0.safetensors", dir / kAdapterWeightsName);
  CausalLM other = load_model(GRPO_TEST_DATA_DIR "/tiny-qwen2");
  EXPECT_THROW(load_peft_adapter(*other, dir.string()), AdapterFileError);
}
