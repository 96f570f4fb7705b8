// What the trainer does with what a sampler hands back: aborted completions,
// the stop ids it asks for, and sampled ids that are embedding rows but no
// token. The sampler is a real plugin (tests/fixtures/fixture_sampler.cpp) or
// the native one.
#include <filesystem>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/cli_util.h"
#include "plugin_paths.h"

using namespace grpo::testing;
namespace fs = std::filesystem;

namespace {

std::string flags(const std::string& dir, const std::string& model) {
  return "train --model " + model + " --dataset " + dir + "/rows.jsonl --train_type full --reward_funcs format "
         "--num_generations 4 --per_device_train_batch_size 4 --gradient_accumulation_steps 1 "
         "--max_completion_length 16 --logging_steps 1 --log_completions true --max_steps 1 "
         "--report_to none --gradient_checkpointing false --output_dir " + dir + "/out ";
}

// The fixture sampler, reporting what the host handed over to dir/report.jsonl.
std::string fixture_sampler(const std::string& dir, nlohmann::json sampler_args = nlohmann::json::object(),
                            const std::string& library = FIXTURE_SAMPLER) {
  sampler_args["report"] = dir + "/report.jsonl";
  return "--plugins " + library + " --sampler fixture_sampler --sampler_args '" + sampler_args.dump() + "' ";
}

}  // namespace

TEST(TrainSamples, AnAbortedCompletionKeepsItsFinishReasonAndCarriesNoLoss) {
  const std::string dir = tiny_run_dir("train_samples_abort");
  CommandResult r = run_host(flags(dir, dir + "/model") + fixture_sampler(dir, {{"abort_every", 2}}));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto completions = read_jsonl(dir + "/out/completions.jsonl");
  ASSERT_EQ(completions.size(), 4u);
  for (size_t k = 0; k < 4; ++k)
    EXPECT_EQ(completions[k]["finish_reason"], k % 2 == 0 ? "abort" : "stop") << completions[k];
  auto log = read_jsonl(dir + "/out/logging.jsonl");
  ASSERT_EQ(log.size(), 1u);
  EXPECT_DOUBLE_EQ(log[0]["completions/aborted_ratio"].get<double>(), 0.5) << log[0];
  EXPECT_NE(r.output.find("aborted 2 of 4 completions"), std::string::npos) << r.output;
}

TEST(TrainSamples, StopIdsComeFromTheTokenizerConfigAndGenerationConfig) {
  const std::string dir = tiny_run_dir("train_samples_stop_ids");
  const std::string model = dir + "/model";
  nlohmann::json config = nlohmann::json::parse(read_file(model + "/config.json"));
  config["eos_token_id"] = 7;
  write_file(model + "/config.json", config.dump());
  write_file(model + "/generation_config.json", R"({"eos_token_id": [5, 7, 9]})");
  const nlohmann::json tokenizer_config = nlohmann::json::parse(read_file(model + "/tokenizer_config.json"));
  CommandResult r = run_host(flags(dir, model) + fixture_sampler(dir));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto reports = read_jsonl(dir + "/report.jsonl");
  ASSERT_FALSE(reports.empty());
  // The byte tokenizer's eos is <|im_end|>, id 258; then config.json's, then generation_config.json's new ones.
  ASSERT_EQ(tokenizer_config["eos_token"], "<|im_end|>");
  EXPECT_EQ(reports[0]["stop_ids"], nlohmann::json({258, 7, 5, 9}));
}

TEST(TrainSamples, TheSamplerGetsThePromptAsTextBesideItsIds) {
  const std::string dir = tiny_run_dir("train_samples_prompt_text");
  CommandResult r = run_host(flags(dir, dir + "/model") + fixture_sampler(dir));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto reports = read_jsonl(dir + "/report.jsonl");
  ASSERT_FALSE(reports.empty());
  const std::string prompt = reports[0]["prompt"];
  EXPECT_EQ(prompt.rfind("<|im_start|>user\n", 0), 0u) << prompt;
  EXPECT_NE(prompt.find("+1=?<|im_end|>\n<|im_start|>assistant\n"), std::string::npos) << prompt;
}

TEST(TrainSamples, RewardsScoreTheSampledIdsNotTheSamplersText) {
  const std::string dir = tiny_run_dir("train_samples_host_text");
  CommandResult r = run_host(flags(dir, dir + "/model") + fixture_sampler(dir));  // ids "Hi", text "SAMPLER TEXT"
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto completions = read_jsonl(dir + "/out/completions.jsonl");
  ASSERT_EQ(completions.size(), 4u);
  for (const auto& c : completions) EXPECT_EQ(c["completion"], "Hi") << c;
}

namespace {

// A run scored by fixture_text, which tokenizes, detokenizes and renders
// through the host; `extra` is appended to the flags.
void expect_text_services_work(const std::string& name, const std::string& extra) {
  const std::string dir = tiny_run_dir(name);
  std::string args = flags(dir, dir + "/model") + fixture_sampler(dir);
  args.replace(args.find("--reward_funcs format"), 21, "--reward_funcs fixture_text");
  args.replace(args.find(FIXTURE_SAMPLER), std::string(FIXTURE_SAMPLER).size(),
               std::string(FIXTURE_SAMPLER) + " " + FIXTURE_HOST_TEXT);
  CommandResult r = run_host(args + extra);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto completions = read_jsonl(dir + "/out/completions.jsonl");
  ASSERT_EQ(completions.size(), 4u);
  // "Hi" is two byte tokens, and detokenize gives it back.
  for (const auto& c : completions) EXPECT_EQ(c["rewards"]["fixture_text"], 2.0) << c;
  auto log = read_jsonl(dir + "/out/logging.jsonl");
  ASSERT_EQ(log.size(), 1u);
  // <|im_start|>user\nx<|im_end|>\n<|im_start|>assistant\n
  EXPECT_EQ(log[0]["fixture_text/rendered_chars"], 51.0) << log[0];
}

}  // namespace

TEST(TrainSamples, RewardsUseTheRunsTokenizerAndChatTemplateThroughTheHost) {
  expect_text_services_work("train_samples_text_services", "");
}

TEST(TrainSamples, AnIsolatedRewardGetsTheSameTextServicesInItsWorker) {
  expect_text_services_work("train_samples_text_services_isolated", " --plugin_isolation process");
}

TEST(TrainSamples, LoraWeightsAreMarkedMergedOnEverySync) {
  const std::string dir = tiny_run_dir("train_samples_lora_flags");
  std::string args = flags(dir, dir + "/model") + fixture_sampler(dir);
  args.replace(args.find("--train_type full"), 17, "--train_type lora");
  args.replace(args.find("--max_steps 1"), 13, "--max_steps 2");
  CommandResult r = run_host(args);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto reports = read_jsonl(dir + "/report.jsonl");
  ASSERT_EQ(reports.size(), 2u);  // one prompt per step
  // Step 1 samples after the weights given at start, step 2 after the first sync:
  // GRPO_WEIGHTS_LAST_BUCKET | GRPO_WEIGHTS_MERGED_LORA both times.
  EXPECT_EQ(reports[0]["weights"], 6);
  EXPECT_EQ(reports[1]["weights"], 6);
}

TEST(TrainSamples, ASamplerBuiltAgainstTheSdk10HeadersTrains) {
  const std::string dir = tiny_run_dir("train_samples_sdk_1_0");
  CommandResult r =
      run_host(flags(dir, dir + "/model") + fixture_sampler(dir, {{"abort_every", 2}}, FIXTURE_SAMPLER_V1_0));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto completions = read_jsonl(dir + "/out/completions.jsonl");
  ASSERT_EQ(completions.size(), 4u);
  for (size_t k = 0; k < 4; ++k)
    EXPECT_EQ(completions[k]["finish_reason"], k % 2 == 0 ? "abort" : "stop") << completions[k];
  EXPECT_EQ(read_jsonl(dir + "/report.jsonl").at(0)["stop_ids"], nlohmann::json({258}));
}

TEST(TrainSamples, SampledIdsThatAreNoTokenDecodeToNothingAndAreCounted) {
  // tiny-qwen2 has 300 embedding rows; the byte tokenizer 259 tokens, so
  // random weights sample ids 259..299 that no tokenizer can decode.
  const std::string dir = tiny_run_dir("train_samples_non_tokens");
  const std::string model = dir + "/wide";
  fs::create_directories(model);
  for (const char* f : {"config.json", "model.safetensors"})
    fs::copy_file(std::string(GRPO_TEST_DATA_DIR) + "/tiny-qwen2/" + f, model + "/" + f);
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"}) fs::copy_file(dir + "/model/" + f, model + "/" + f);
  CommandResult r = run_host(flags(dir, model) + "--temperature 1.0 --top_k 0 --top_p 1.0");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto log = read_jsonl(dir + "/out/logging.jsonl");
  ASSERT_EQ(log.size(), 1u);
  ASSERT_TRUE(log[0].contains("completions/non_token_ids")) << log[0];
  EXPECT_GT(log[0]["completions/non_token_ids"].get<double>(), 0) << log[0];
}
