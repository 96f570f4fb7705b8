// `grpo-host train` options beyond the plain on-policy step: reusing a
// generation batch (num_iterations, steps_per_generation), dynamic_sample,
// evaluation, and skipping unusable dataset rows.
#include <filesystem>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/cli_util.h"

using namespace grpo::testing;

namespace {

std::string setup(const std::string& name, const std::string& extra_rows = "") {
  return tiny_run_dir(name, true, extra_rows);
}

std::string base_flags(const std::string& dir) {
  return "train --model " + dir + "/model --dataset " + dir + "/rows.jsonl --train_type full "
         "--reward_funcs repetition --repetition_n_grams 1 --plugin_args '{\"repetition\": {\"unit\": \"token\"}}' "
         "--num_generations 4 --per_device_train_batch_size 2 --gradient_accumulation_steps 2 "
         "--max_completion_length 12 --logging_steps 1 "
         "--save_steps 1000 --report_to none --gradient_checkpointing false --output_dir " + dir + "/out ";
}

}  // namespace

TEST(TrainFeatures, NumIterationsReusesABatchWithOldLogprobs) {
  std::string dir = setup("train_iterations");
  // GA 2 = steps_per_generation: one generation batch per step, used twice.
  CommandResult r = run_host(base_flags(dir) + "--num_iterations 2 --max_steps 4 "
                             "--learning_rate 1e-2 --warmup_ratio 0 --epsilon 0.01 --beta 0 --log_completions true");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto lines = read_jsonl(dir + "/out/logging.jsonl");
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(read_jsonl(dir + "/out/completions.jsonl").size(), 8u) << "two generation batches of 4 for 4 steps";
  // Pass 1: old log-probs are those of the same weights, ratio exactly 1.
  // Pass 2: the policy has moved, so some ratios leave [0.99, 1.01].
  EXPECT_EQ(lines[0]["clip_ratio/region_mean"].get<double>(), 0.0);
  EXPECT_GT(lines[1]["clip_ratio/region_mean"].get<double>(), 0.0);
  EXPECT_TRUE(lines[0].contains("reward"));
  EXPECT_FALSE(lines[1].contains("reward")) << "no generation in the second pass";
}

TEST(TrainFeatures, StepsPerGenerationSpreadsABatchOverOptimizerSteps) {
  std::string dir = setup("train_spg");
  // 8 completions per generation batch, 2 per micro-batch, GA 2: 2 steps per batch.
  CommandResult r = run_host(base_flags(dir) + "--steps_per_generation 4 --max_steps 2 --log_completions true");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(read_jsonl(dir + "/out/logging.jsonl").size(), 2u);
  EXPECT_EQ(read_jsonl(dir + "/out/completions.jsonl").size(), 8u) << "one generation batch of 2 prompts x 4";
}

TEST(TrainFeatures, DynamicSampleResamplesGroupsWithoutVarianceAndSaysSo) {
  std::string dir = setup("train_dynamic");
  // `format` gives an untrained model 0 on every completion: no group varies.
  std::string flags = base_flags(dir);
  flags.replace(flags.find("--reward_funcs repetition"), 25, "--reward_funcs format");
  CommandResult r = run_host(flags + "--dynamic_sample true --max_resample_times 2 --max_steps 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("still have equal rewards after 2 resamples"), std::string::npos) << r.output;
  auto lines = read_jsonl(dir + "/out/logging.jsonl");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0]["dynamic_sample/resample_count"], 2.0);
  EXPECT_EQ(lines[0]["frac_reward_zero_std"], 1.0);
}

TEST(TrainFeatures, DynamicSampleStopsAsSoonAsTheBatchIsFull) {
  std::string dir = setup("train_dynamic_full");
  // repetition over tokens varies within nearly every group of random text.
  CommandResult r = run_host(base_flags(dir) + "--dynamic_sample true --max_steps 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const auto& l : read_jsonl(dir + "/out/logging.jsonl")) EXPECT_EQ(l["dynamic_sample/resample_count"], 0.0);
}

TEST(TrainFeatures, EvaluatesTheHeldOutSplitEveryEvalSteps) {
  std::string dir = setup("train_eval");
  CommandResult r = run_host(base_flags(dir) + "--split_dataset_ratio 0.25 --eval_steps 2 --max_steps 4 "
                             "--per_device_eval_batch_size 4");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("2 validation rows"), std::string::npos) << r.output;
  std::vector<int> eval_steps;
  for (const auto& l : read_jsonl(dir + "/out/logging.jsonl")) {
    if (!l.contains("eval_reward")) continue;
    eval_steps.push_back(l["global_step"].get<int>());
    for (const char* key : {"eval_reward_std", "eval_rewards/repetition/mean", "eval_completions/mean_length",
                            "eval_frac_reward_zero_std", "eval_runtime"})
      EXPECT_TRUE(l.contains(key)) << key;
    EXPECT_FALSE(l.contains("loss")) << "evaluation trains nothing";
  }
  EXPECT_EQ(eval_steps, (std::vector<int>{2, 4}));
}

TEST(TrainFeatures, BadRowsStopTheRunUnlessSkippingIsAskedFor) {
  std::string dir = setup("train_bad_rows", "{\"problem\": \"9+1=?\"\n{\"solution\": \"no prompt\"}\n");
  CommandResult r = run_host(base_flags(dir) + "--max_steps 1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("rows.jsonl:9"), std::string::npos) << r.output;
  r = run_host(base_flags(dir) + "--max_steps 1 --skip_bad_rows true");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("skipped 2 unusable dataset rows"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rows.jsonl:9"), std::string::npos) << "the first skipped row is named";
}

TEST(TrainFeatures, AsyncGenerateSamplesTheNextBatchWithTheWeightsOfOneStepBefore) {
  std::string dir = setup("train_async");
  CommandResult r = run_host(base_flags(dir) + "--async_generate true --max_steps 3 --learning_rate 1e-2 "
                             "--warmup_ratio 0 --log_completions true");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto lines = read_jsonl(dir + "/out/logging.jsonl");
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(read_jsonl(dir + "/out/completions.jsonl").size(), 12u) << "3 batches, none sampled for nothing";
  for (const char* key : {"sampling/importance_sampling_ratio/mean", "sampling/sampling_logp_difference/max",
                          "time/generate_wait", "time/weight_sync"})
    EXPECT_TRUE(lines[1].contains(key)) << key;
  // Batch 1 was sampled by the weights that train on it; batch 2 by the
  // weights before the first update, so the trainer's log-probs differ.
  const double first = lines[0]["sampling/sampling_logp_difference/mean"].get<double>();
  const double second = lines[1]["sampling/sampling_logp_difference/mean"].get<double>();
  EXPECT_LT(first, 1e-4);
  EXPECT_GT(second, 10 * first + 1e-4);
}

TEST(TrainFeatures, SyncRefModelMovesTheReferenceToThePolicy) {
  std::string dir = setup("train_sync_ref");
  const std::string flags = base_flags(dir) + "--max_steps 3 --beta 0.1 --learning_rate 1e-2 --warmup_ratio 0 ";
  // alpha 1 every step: the reference becomes the policy, so the KL of the next step is exactly 0.
  CommandResult r = run_host(flags + "--sync_ref_model true --ref_model_sync_steps 1 --ref_model_mixup_alpha 1.0");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const auto& l : read_jsonl(dir + "/out/logging.jsonl")) EXPECT_EQ(l["kl"].get<double>(), 0.0);
  std::filesystem::remove_all(dir + "/out");
  r = run_host(flags);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_GT(read_jsonl(dir + "/out/logging.jsonl")[2]["kl"].get<double>(), 0.0) << "without the sync it drifts";
  std::string lora = flags + "--sync_ref_model true";
  lora.replace(lora.find("--train_type full"), 17, "--train_type lora");
  r = run_host(lora);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("--sync_ref_model with --train_type lora"), std::string::npos) << r.output;
}

// A reward's options are flags too, as ms-swift's are: --unit token is
// plugin_args.repetition.unit; a flag that neither the table nor a plugin of
// the run knows is refused with a did-you-mean.
TEST(TrainFeatures, PluginOptionsAreFlagsToo) {
  std::string dir = setup("train_plugin_flags");
  const std::string with_args = base_flags(dir) + "--max_steps 1 --log_completions true";
  CommandResult a = run_host(with_args);
  ASSERT_EQ(a.exit_code, 0) << a.output;
  const auto want = read_jsonl(dir + "/out/completions.jsonl");
  std::filesystem::remove_all(dir + "/out");
  std::string as_flag = with_args;
  const std::string section = "--plugin_args '{\"repetition\": {\"unit\": \"token\"}}' ";
  as_flag.replace(as_flag.find(section), section.size(), "--unit token ");
  CommandResult b = run_host(as_flag);
  ASSERT_EQ(b.exit_code, 0) << b.output;
  const auto got = read_jsonl(dir + "/out/completions.jsonl");
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i]["rewards"], want[i]["rewards"]) << i;

  std::string typo = as_flag;
  typo.replace(typo.find("--unit token"), 12, "--unti token");
  CommandResult c = run_host(typo);
  EXPECT_EQ(c.exit_code, 2) << c.output;
  EXPECT_NE(c.output.find("unknown flag --unti — did you mean --unit?"), std::string::npos) << c.output;
  std::string no_value = as_flag;
  no_value.replace(no_value.find("--unit token"), 12, "--unit");
  CommandResult d = run_host(no_value);
  EXPECT_EQ(d.exit_code, 2) << d.output;
  EXPECT_NE(d.output.find("--unit (an option of plugin 'repetition', type string) takes one value"), std::string::npos)
      << d.output;
}

// ... and top-level YAML keys, where the command line wins as for every flag;
// args.yaml keeps them, so the run loads again from it.
TEST(TrainFeatures, PluginOptionsAreTopLevelYamlKeysToo) {
  std::string dir = setup("train_plugin_yaml_keys");
  const std::string with_args = base_flags(dir) + "--max_steps 1 --log_completions true";
  CommandResult a = run_host(with_args);
  ASSERT_EQ(a.exit_code, 0) << a.output;
  const auto want = read_jsonl(dir + "/out/completions.jsonl");
  std::filesystem::remove_all(dir + "/out");
  std::string from_yaml = with_args;
  const std::string section = "--plugin_args '{\"repetition\": {\"unit\": \"token\"}}' ";
  from_yaml.replace(from_yaml.find(section), section.size(), "--config " + dir + "/keys.yaml ");
  write_file(dir + "/keys.yaml", "unit: token\n");
  CommandResult b = run_host(from_yaml);
  ASSERT_EQ(b.exit_code, 0) << b.output;
  const auto got = read_jsonl(dir + "/out/completions.jsonl");
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i]["rewards"], want[i]["rewards"]) << i;
  const std::string args = read_file(dir + "/out/args.yaml");
  EXPECT_NE(args.find("unit: \"token\"  # option 'unit' in " + dir + "/keys.yaml:1"), std::string::npos) << args;

  std::filesystem::remove_all(dir + "/out");
  CommandResult c = run_host(from_yaml + " --unit word");  // the command line wins
  ASSERT_EQ(c.exit_code, 0) << c.output;
  EXPECT_NE(read_file(dir + "/out/args.yaml").find("unit: \"word\"  # --unit"), std::string::npos);

  write_file(dir + "/keys.yaml", "unti: token\n");
  CommandResult d = run_host(from_yaml);
  EXPECT_EQ(d.exit_code, 2) << d.output;
  EXPECT_NE(d.output.find("unknown option 'unti' in " + dir + "/keys.yaml:1 — did you mean 'unit'?"),
            std::string::npos)
      << d.output;
}
