// `grpo-host train --train_type lora`: only the adapters train, the KL
// reference is the policy with its adapters disabled, checkpoints are PEFT
// adapter files (and a merged model on request), and resuming is exact.
#include <filesystem>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/cli_util.h"

using namespace grpo::testing;

namespace {

std::string setup(const std::string& name) {
  return tiny_run_dir(name, false);
}

std::string lora_flags(const std::string& dir) {
  return "train --model " + dir + "/model --dataset " + dir + "/rows.jsonl --train_type lora --lora_rank 4 "
         "--lora_alpha 8 --reward_funcs repetition --repetition_n_grams 1 "
         "--plugin_args '{\"repetition\": {\"unit\": \"token\"}}' --num_generations 4 "
         "--per_device_train_batch_size 2 --gradient_accumulation_steps 2 --max_completion_length 12 "
         "--logging_steps 1 --learning_rate 1e-2 --warmup_ratio 0 --beta 0.1 --report_to none ";
}

}  // namespace

TEST(TrainLora, TrainsAdaptersAgainstTheAdaptersDisabledReferenceAndSavesPeftFiles) {
  std::string dir = setup("train_lora");
  CommandResult r = run_host(lora_flags(dir) + "--max_steps 3 --save_steps 1000 --merge_lora true --output_dir " +
                             dir + "/out");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto lines = read_jsonl(dir + "/out/logging.jsonl");
  ASSERT_EQ(lines.size(), 3u);
  // Fresh adapters (B = 0) leave the policy equal to its reference: KL 0;
  // after updates the adapters move it away.
  EXPECT_EQ(lines[0]["kl"].get<double>(), 0.0);
  EXPECT_GT(lines[2]["kl"].get<double>(), 0.0);
  const std::string ckpt = dir + "/out/checkpoint-3";
  for (const char* f : {"adapter_model.safetensors", "adapter_config.json", "tokenizer.json", "trainer_state.json",
                        "merged/model.safetensors", "merged/config.json"})
    EXPECT_TRUE(std::filesystem::exists(ckpt + "/" + f)) << f;
  EXPECT_FALSE(std::filesystem::exists(ckpt + "/model.safetensors")) << "the base is not copied into a LoRA checkpoint";
  nlohmann::json config = nlohmann::json::parse(read_file(ckpt + "/adapter_config.json"));
  EXPECT_EQ(config["peft_type"], "LORA");
  EXPECT_EQ(config["r"], 4);
  EXPECT_NE(read_file(ckpt + "/merged/model.safetensors"), read_file(dir + "/model/model.safetensors"));
  r = run_host("generate --model " + ckpt + "/merged --prompt '2+1=?' --max_completion_length 4 --top_k 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // The adapter checkpoint itself: the base it names plus the adapters, the same greedy text as merged.
  CommandResult adapter = run_host("generate --model " + ckpt + " --prompt '2+1=?' --max_completion_length 4 --top_k 1");
  ASSERT_EQ(adapter.exit_code, 0) << adapter.output;
  const auto completion = [](const std::string& out) { return out.substr(out.find("--- completion 0")); };
  EXPECT_EQ(completion(adapter.output), completion(r.output));
  r = run_host("evaluate --model " + ckpt + " --dataset " + dir + "/rows.jsonl --reward_funcs format");
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

TEST(TrainLora, ResumingFromAnAdapterCheckpointContinuesExactly) {
  std::string dir = setup("train_lora_resume");
  const std::string base = lora_flags(dir) + "--max_steps 4 --save_steps 2 ";
  auto [straight, resumed] = run_straight_and_resumed(base, dir);
  ASSERT_EQ(straight.size(), 4u);
  ASSERT_EQ(resumed.size(), 2u);
  for (size_t i = 0; i < 2; ++i)
    for (const char* key : {"loss", "reward", "kl", "grad_norm"})
      EXPECT_EQ(resumed[i][key], straight[i + 2][key]) << key;
  EXPECT_EQ(read_file(dir + "/resumed/checkpoint-4/adapter_model.safetensors"),
            read_file(dir + "/straight/checkpoint-4/adapter_model.safetensors"));
  CommandResult other = run_host(base + "--target_modules q_proj v_proj --output_dir " + dir + "/other --resume_from_checkpoint " +
                                 dir + "/straight/checkpoint-2");
  EXPECT_NE(other.exit_code, 0);
  EXPECT_NE(other.output.find("adapter"), std::string::npos) << other.output;
}

TEST(SftLora, WarmStartsAdaptersOnly) {
  std::string dir = setup("sft_lora");
  write_file(dir + "/sft.jsonl", "{\"query\": \"1+1\", \"response\": \"2\"}\n{\"query\": \"2+1\", \"response\": \"3\"}\n");
  CommandResult r = run_host("sft --model " + dir + "/model --dataset " + dir + "/sft.jsonl --train_type lora " +
                             "--max_steps 2 --per_device_train_batch_size 2 --report_to none --output_dir " + dir +
                             "/out");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(std::filesystem::exists(dir + "/out/checkpoint-2/adapter_model.safetensors"));
  r = run_host("sft --model " + dir + "/model --dataset " + dir + "/sft.jsonl --resume_from_checkpoint " + dir +
               "/out/checkpoint-2");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("sft does not resume"), std::string::npos) << r.output;
}
