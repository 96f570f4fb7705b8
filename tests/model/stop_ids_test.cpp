// The one rule for the ids a completion stops at, shared by the trainer,
// evaluate, generate and grpo-rollout.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "model/stop_ids.h"
#include "tokenizer/byte_tokenizer.h"

using namespace grpo;
namespace fs = std::filesystem;

namespace {

fs::path fresh_dir(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / (name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  tok::write_byte_level_tokenizer(dir.string());  // eos <|im_end|> = 258
  return dir;
}

}  // namespace

TEST(StopIds, TokenizerEosThenConfigThenGenerationConfigEachOnce) {
  const fs::path dir = fresh_dir("grpo_stop_ids");
  std::ofstream(dir / "generation_config.json") << R"({"eos_token_id": [5, 258, 7], "do_sample": true})";
  tok::Tokenizer tokenizer = tok::Tokenizer::from_dir(dir.string());
  model::ModelConfig config;
  config.eos_token_ids = {7, 256};
  EXPECT_EQ(model::stop_token_ids(tokenizer, config, dir.string()), (std::vector<int32_t>{258, 7, 256, 5}));
  std::ofstream(dir / "generation_config.json") << R"({"eos_token_id": 3})";
  EXPECT_EQ(model::stop_token_ids(tokenizer, config, dir.string()), (std::vector<int32_t>{258, 7, 256, 3}));
  fs::remove(dir / "generation_config.json");
  EXPECT_EQ(model::stop_token_ids(tokenizer, config, dir.string()), (std::vector<int32_t>{258, 7, 256}));
}

TEST(StopIds, AMalformedGenerationConfigIsNamed) {
  const fs::path dir = fresh_dir("grpo_stop_ids_bad");
  tok::Tokenizer tokenizer = tok::Tokenizer::from_dir(dir.string());
  for (const char* text : {"not json", R"({"eos_token_id": "x"})", R"({"eos_token_id": [1, -2]})"}) {
    std::ofstream(dir / "generation_config.json") << text;
    try {
      model::stop_token_ids(tokenizer, {}, dir.string());
      ADD_FAILURE() << "no error for " << text;
    } catch (const model::ModelConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("generation_config.json"), std::string::npos) << e.what();
    }
  }
}
