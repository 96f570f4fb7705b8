// `grpo-host train` end to end on a tiny model: sampling through the native
// sampler plugin, rewards from plugins, updates, logging.jsonl, checkpoints.
#include <cstdio>
#include <filesystem>
#include <limits>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/cli_util.h"
#include "model/weights.h"  // a reference model with NaN weights
#include "plugin_paths.h"

using namespace grpo::testing;

namespace {

std::string setup_run(const std::string& name) {
  std::string dir = tiny_run_dir(name);
  write_file(dir + "/run.yaml",
             "model: " + dir + "/model\n"
             "dataset: [" + dir + "/rows.jsonl]\n"
             "train_type: full\n"
             "reward_funcs: [repetition, format]\n"
             "reward_weights: [1.0, 0.5]\n"
             "repetition_n_grams: 1\n"
             "plugin_args: {repetition: {unit: token}}\n"
             "num_generations: 4\n"
             "per_device_train_batch_size: 2\n"
             "gradient_accumulation_steps: 2\n"
             "max_completion_length: 12\n"
             "max_steps: 4\n"
             "logging_steps: 1\n"
             "save_steps: 2\n"
             "save_total_limit: 1\n"
             "learning_rate: 1.0e-3\n"
             "log_completions: true\n"
             "output_dir: " + dir + "/out\n");
  return dir;
}

}  // namespace

TEST(TrainCommand, TrainsLogsAndWritesLoadableCheckpoints) {
  std::string dir = setup_run("train_run");
  CommandResult r = run_host("train --config " + dir + "/run.yaml");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // The device is chosen once and the sampler told it: without a GPU, the
  // CPU, in float32 (torch_dtype unset), the native sampler beside the policy,
  // built around its tensors (nothing of the checkpoint read a second time).
  EXPECT_NE(r.output.find(" on cpu in float32 for 4 steps"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("native sampler ready: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" on cpu, with the trainer's weights\n"), std::string::npos) << r.output;
  auto lines = read_jsonl(dir + "/out/logging.jsonl");
  ASSERT_EQ(lines.size(), 4u);
  for (const char* key : {"loss", "grad_norm", "learning_rate", "epoch", "global_step", "reward", "reward_std",
                          "rewards/repetition/mean", "rewards/format/std", "frac_reward_zero_std", "kl", "entropy",
                          "clip_ratio/low_mean", "clip_ratio/high_max", "clip_ratio/region_mean",
                          "completions/mean_length", "completions/clipped_ratio", "num_tokens", "step_time",
                          "time/generate", "time/reward", "time/logprob", "time/backward", "time/optimizer",
                          "memory/rss_gb"})
    EXPECT_TRUE(lines[3].contains(key)) << key;
  EXPECT_EQ(lines[3]["global_step"], 4);
  double grad_norm = 0;
  for (const auto& l : lines) grad_norm += l["grad_norm"].get<double>();
  EXPECT_GT(grad_norm, 0.0) << "rewards with variance must move the policy";
  // save_total_limit 1: only the last checkpoint stays, complete and loadable.
  EXPECT_FALSE(std::filesystem::exists(dir + "/out/checkpoint-2"));
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.json", "trainer_state.json"})
    EXPECT_TRUE(std::filesystem::exists(dir + "/out/checkpoint-4/" + f)) << f;
  EXPECT_TRUE(std::filesystem::exists(dir + "/out/args.yaml"));
  bool event_file = false;  // report_to defaults to tensorboard, as in ms-swift
  for (const auto& e : std::filesystem::directory_iterator(dir + "/out/runs"))
    event_file |= e.path().filename().string().rfind("events.out.tfevents.", 0) == 0;
  EXPECT_TRUE(event_file);
  EXPECT_NE(read_file(dir + "/out/checkpoint-4/model.safetensors"), read_file(dir + "/model/model.safetensors"));
  auto completions = read_jsonl(dir + "/out/completions.jsonl");
  ASSERT_EQ(completions.size(), 16u);  // 4 steps x 1 prompt x G=4
  for (const char* key : {"step", "prompt", "completion", "completion_tokens", "finish_reason", "rewards", "reward",
                          "advantage"})
    EXPECT_TRUE(completions[0].contains(key)) << key;
  EXPECT_EQ(completions[15]["step"], 4);
  EXPECT_TRUE(completions[0]["rewards"].contains("repetition"));
  r = run_host("generate --model " + dir + "/out/checkpoint-4 --prompt '2+1=?' --max_completion_length 4");
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

// Hugging Face's --save_strategy no: a run that writes no checkpoint (a
// benchmark's, a smoke test's), not even at its end; its log is all it keeps.
TEST(TrainCommand, SaveStrategyNoWritesNoCheckpoint) {
  std::string dir = setup_run("train_save_strategy");
  CommandResult r = run_host("train --config " + dir + "/run.yaml --max_steps 2 --save_steps 1 --save_strategy no");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(read_jsonl(dir + "/out/logging.jsonl").size(), 2u);
  for (const auto& e : std::filesystem::directory_iterator(dir + "/out"))
    EXPECT_NE(e.path().filename().string().rfind("checkpoint-", 0), 0u) << e.path();
  r = run_host("train --config " + dir + "/run.yaml --save_strategy epoch");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("save_strategy"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("steps"), std::string::npos) << r.output;
}

TEST(TrainCommand, UnsupportedCombinationsAreRefusedWithWhatToDo) {
  std::string dir = setup_run("train_refused");
  CommandResult r = run_host("train --config " + dir + "/run.yaml --async_generate true --dynamic_sample true");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("--async_generate with --dynamic_sample is not supported"), std::string::npos) << r.output;
  r = run_host("train --config " + dir + "/run.yaml --async_generate true --offload_model true");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("--offload_model with --async_generate"), std::string::npos) << r.output;
  r = run_host("train --config " + dir + "/run.yaml --async_generate true --gc_collect_after_offload true");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("--gc_collect_after_offload with --async_generate"), std::string::npos) << r.output;
  r = run_host("train --config " + dir + "/run.yaml --use_cpu true --ddp_backend nccl");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("--ddp_backend nccl needs the ranks on GPUs, and this run trains on cpu"), std::string::npos)
      << r.output;
  r = run_host("train --config " + dir + "/run.yaml --ddp_backend mpi");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("ddp_backend"), std::string::npos) << r.output;
}

// ms-swift's memory flags are accepted everywhere; on the CPU everything is
// in host memory already, and the run says so (train_gpu_test measures them).
TEST(TrainCommand, OffloadFlagsOnTheCpuMoveNothingAndSaySo) {
  const std::string dir = tiny_run_dir("train_offload_cpu");
  CommandResult r = run_host("train --model " + dir + "/model --dataset " + dir + "/rows.jsonl --reward_funcs "
                             "repetition --num_generations 4 --per_device_train_batch_size 4 --max_completion_length 8 "
                             "--max_steps 1 --report_to none --output_dir " + dir + "/out --offload_model true "
                             "--offload_optimizer true --gc_collect_after_offload true");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("--offload_model / --offload_optimizer move nothing on cpu"), std::string::npos) << r.output;
}

TEST(SftCommand, LearnsTheAnswersAndSavesACheckpoint) {
  std::string dir = temp_dir("sft_run");
  ASSERT_EQ(run_host("init-model --arch qwen2 --preset tiny --out " + dir + "/model").exit_code, 0);
  std::string rows;
  for (int i = 1; i <= 4; ++i)
    rows += "{\"messages\": [{\"role\": \"user\", \"content\": \"" + std::to_string(i) +
            "+1\"}, {\"role\": \"assistant\", \"content\": \"" + std::to_string(i + 1) + "\"}]}\n";
  rows += "{\"query\": \"9+1\", \"response\": \"10\"}\n";
  write_file(dir + "/sft.jsonl", rows);
  CommandResult r = run_host("sft --model " + dir + "/model --dataset " + dir + "/sft.jsonl --train_type full " +
                             "--per_device_train_batch_size 5 --max_steps 30 --learning_rate 3e-3 --warmup_ratio 0 " +
                             "--lr_scheduler_type constant --logging_steps 1 --output_dir " + dir + "/out");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto lines = read_jsonl(dir + "/out/logging.jsonl");
  ASSERT_EQ(lines.size(), 30u);
  EXPECT_LT(lines.back()["loss"].get<double>(), 0.5 * lines.front()["loss"].get<double>())
      << "the loss must fall on five memorisable examples";
  EXPECT_TRUE(std::filesystem::exists(dir + "/out/checkpoint-30/model.safetensors"));
  write_file(dir + "/bad.jsonl", "{\"problem\": \"no answer here\"}\n");
  r = run_host("sft --model " + dir + "/model --dataset " + dir + "/bad.jsonl --train_type full");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("bad.jsonl:1"), std::string::npos) << r.output;
}

TEST(TrainCommand, SigtermSavesACheckpointAndExitsCleanly) {
  std::string dir = setup_run("train_sigterm");
  // Many steps; stop it as soon as the first step is logged.
  std::string cmd = "'" GRPO_HOST_EXE "' train --config " + dir + "/run.yaml --max_steps 100000 --save_steps 100000 > " +
                    dir + "/log.txt 2>&1 & pid=$!; "
                    "for i in $(seq 1 600); do [ -s " + dir + "/out/logging.jsonl ] && break; sleep 0.1; done; "
                    "kill -TERM $pid; wait $pid; echo exit=$?";
  const std::string out = run_shell(cmd).output;
  EXPECT_NE(out.find("exit=0"), std::string::npos) << out << read_file(dir + "/log.txt");
  EXPECT_NE(read_file(dir + "/log.txt").find("stopped by a signal"), std::string::npos);
  bool saved = false;
  for (const auto& e : std::filesystem::directory_iterator(dir + "/out"))
    saved |= e.path().filename().string().rfind("checkpoint-", 0) == 0 &&
             std::filesystem::exists(e.path() / "model.safetensors");
  EXPECT_TRUE(saved);
}

TEST(TrainCommand, FourStepsStraightEqualTwoResumeTwo) {
  std::string dir = setup_run("train_resume");
  const std::string base = "train --config " + dir + "/run.yaml --save_total_limit 10 --log_completions false ";
  auto [straight, resumed] = run_straight_and_resumed(base, dir);
  ASSERT_EQ(straight.size(), 4u);
  ASSERT_EQ(resumed.size(), 2u);  // steps 3 and 4
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(resumed[i]["global_step"], straight[i + 2]["global_step"]);
    for (const char* key : {"loss", "reward", "grad_norm", "kl", "learning_rate", "completions/mean_length"})
      EXPECT_EQ(resumed[i][key], straight[i + 2][key]) << key << " at step " << straight[i + 2]["global_step"];
  }
  EXPECT_EQ(read_file(dir + "/resumed/checkpoint-4/model.safetensors"),
            read_file(dir + "/straight/checkpoint-4/model.safetensors"));
  CommandResult bad = run_host(base + "--output_dir " + dir + "/bad --resume_from_checkpoint " + dir + "/model");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.output.find("not a training checkpoint"), std::string::npos) << bad.output;
}

// A reference model whose weights hold NaN makes the KL, the loss and every
// gradient NaN. Such an update is skipped (the policy stays finite), and
// after three in a row the run stops saying what to check, keeping the last
// step's checkpoint, whose weights are the finite ones it started from.
TEST(TrainCommand, NonFiniteGradientsAreSkippedAndThreeInARowStopTheRun) {
  std::string dir = setup_run("train_nonfinite");
  {
    grpo::model::CausalLM ref = grpo::model::load_model(dir + "/model");
    at::NoGradGuard no_grad;
    ref->parameters().back().fill_(std::numeric_limits<float>::quiet_NaN());
    grpo::model::save_model(*ref, dir + "/ref", dir + "/model");
  }
  CommandResult r = run_host("train --config " + dir + "/run.yaml --ref_model " + dir + "/ref --max_steps 6");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  for (const char* part : {"step 1: the gradient norm is NaN", "its update is skipped",
                           "the gradients of the last 3 steps were not finite", "--torch_dtype float32",
                           "training stopped at step 3/6"})
    EXPECT_NE(r.output.find(part), std::string::npos) << part << " in:\n" << r.output;
  ASSERT_TRUE(std::filesystem::exists(dir + "/out/checkpoint-3/model.safetensors")) << r.output;
  const auto saved = grpo::model::CheckpointFiles::open(dir + "/out/checkpoint-3");
  const auto start = grpo::model::CheckpointFiles::open(dir + "/model");
  for (const auto& name : start.names())
    EXPECT_TRUE(at::equal(grpo::model::tensor_view(saved.require(name)), grpo::model::tensor_view(start.require(name))))
        << name << ": an update was applied";
}

