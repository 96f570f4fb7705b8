// grpo-host started as ms-swift users start it: a model and a Parquet dataset
// by repository name, found in a Hugging Face or ModelScope cache laid out as
// those libraries lay it out; a model whose chat template only Jinja renders.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/cli_util.h"
#include "datasets/fake_hub.h"

using namespace grpo::testing;

namespace {

namespace fs = std::filesystem;

const std::string kCommit = "3f2a9c1e5b7d4f6a8c0e2b4d6f8a0c2e4b6d8f0a";
const std::string kShards = GRPO_TEST_DATA_DIR "/parquet/hub/";

std::map<std::string, std::string> files_of(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : fs::directory_iterator(dir)) files[e.path().filename().string()] = e.path().string();
  return files;
}

std::map<std::string, std::string> arithmetic_shards() {
  return {{"data/train-00000-of-00002.parquet", kShards + "train-00000-of-00002.parquet"},
          {"data/train-00001-of-00002.parquet", kShards + "train-00001-of-00002.parquet"},
          {"data/test-00000-of-00001.parquet", kShards + "test-00000-of-00001.parquet"}};
}

const std::string kTrainFlags =
    " --train_type full --reward_funcs accuracy format --num_generations 4 --per_device_train_batch_size 4"
    " --max_completion_length 8 --max_steps 2 --logging_steps 1 --log_completions true --dataset_shuffle false";

TEST(TrainHub, ModelAndParquetDatasetByNameFromTheHuggingFaceCache) {
  const std::string dir = tiny_run_dir("train_hub_hf");
  const std::string cache = dir + "/hf";
  add_hf_repo(cache, "models", "Org/Tiny-Qwen2.5", kCommit, files_of(dir + "/model"));
  add_hf_repo(cache, "datasets", "Org/Arith", kCommit, arithmetic_shards());
  CommandResult r = run_host("train --model Org/Tiny-Qwen2.5 --dataset Org/Arith#8 --use_hf true --output_dir " +
                                 dir + "/out" + kTrainFlags,
                             "HF_HUB_CACHE=" + cache);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("--model Org/Tiny-Qwen2.5: Hugging Face cache, " + cache + "/models--Org--Tiny-Qwen2.5/snapshots/" + kCommit),
            std::string::npos) << r.output;
  EXPECT_EQ(read_jsonl(dir + "/out/logging.jsonl").size(), 2u);
  // The prompts are the first rows of the train shards, in order (no shuffle).
  const auto completions = read_jsonl(dir + "/out/completions.jsonl");
  ASSERT_FALSE(completions.empty());
  EXPECT_NE(completions[0].dump().find("0 + 0 ="), std::string::npos) << completions[0].dump();
}

TEST(TrainHub, ModelScopeCacheByDefaultAndAClearErrorWhenNeitherHasIt) {
  const std::string dir = tiny_run_dir("train_hub_ms");
  const std::string cache = dir + "/ms";
  add_modelscope_repo(cache, "models", "Org/Tiny-Qwen2.5", files_of(dir + "/model"));
  add_modelscope_repo(cache, "datasets", "Org/Arith", arithmetic_shards());
  const std::string env = "MODELSCOPE_CACHE=" + cache + " HF_HUB_CACHE=" + dir + "/empty";
  CommandResult r = run_host("train --model Org/Tiny-Qwen2.5 --dataset Org/Arith#8 --output_dir " + dir + "/out" +
                                 kTrainFlags,
                             env);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("ModelScope cache, " + cache + "/models/Org/Tiny-Qwen2___5"), std::string::npos) << r.output;

  r = run_host("train --model Org/Missing --dataset Org/Arith --output_dir " + dir + "/out2" + kTrainFlags, env);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  for (const std::string& want : {cache + "/models/Org/Missing", dir + "/empty/models--Org--Missing",
                                  std::string("modelscope download --model Org/Missing"),
                                  std::string("huggingface-cli download Org/Missing")})
    EXPECT_NE(r.output.find(want), std::string::npos) << want << " not in:\n" << r.output;
}

}  // namespace

namespace {

TEST(TrainTemplates, AModelWhoseChatTemplateNoNativeFormatRendersTrainsWithItsOwnJinjaTemplate) {
  // A Mistral Nemo chat template ([INST] ... [/INST]) on the tiny model.
  const std::string dir = tiny_run_dir("train_jinja_template");
  std::ifstream in(GRPO_TEST_DATA_DIR "/chat_templates/mistral_nemo.json");
  const nlohmann::json source = nlohmann::json::parse(in);
  std::ifstream config_in(dir + "/model/tokenizer_config.json");
  nlohmann::json config = nlohmann::json::parse(config_in);
  config["chat_template"] = source["chat_template"];
  write_file(dir + "/model/tokenizer_config.json", config.dump());
  CommandResult r = run_host("train --model " + dir + "/model --dataset " + dir + "/rows.jsonl --output_dir " + dir +
                             "/out" + kTrainFlags);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(read_jsonl(dir + "/out/logging.jsonl").size(), 2u);
  // --template picks a native format instead; an unknown name lists the choices, jinja among them.
  r = run_host("train --model " + dir + "/model --dataset " + dir + "/rows.jsonl --template mistral --output_dir " +
               dir + "/out2" + kTrainFlags);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("jinja"), std::string::npos) << r.output;
}

}  // namespace
