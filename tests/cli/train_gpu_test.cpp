// grpo-host train on CUDA (label `gpu`; skipped without a GPU): the same run
// as on the CPU in float32 (async_generate too), bfloat16 full and LoRA runs
// that learn, device memory that does not grow from step to step, each
// phase's peak logged, and what the offload and sleep flags save.
//
// The reward is the test fixture's (a completion's length in bytes), which a
// tiny random model learns to raise within 20 steps: measured on the CPU in
// bfloat16 with these settings, the mean of the last 5 steps' rewards was
// 3-7 bytes above that of the first 5 for three seeds, full and LoRA.
#include <cmath>
#include <filesystem>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/cuda.h>
#include <torch/torch.h>

#include "cli/cli_util.h"
#include "dist/launcher.h"
#include "model/checkpoint_files.h"
#include "model/weights.h"
#include "plugin_paths.h"
#include "trainer/checkpoint.h"
#include "trainer/offload.h"

using namespace grpo::testing;

namespace {

std::string flags(const std::string& dir, const std::string& out) {
  return "train --model " + dir + "/model --dataset " + dir + "/rows.jsonl --plugins " FIXTURE_OK +
         " --reward_funcs fixture --num_generations 8 --per_device_train_batch_size 8 --max_completion_length 16 "
         "--logging_steps 1 --report_to none --log_completions true --output_dir " + dir + "/" + out + " ";
}

// Two runs' logs of `steps` steps agree on loss, KL, gradient norm and reward within `tolerance`.
void expect_same_logs(const std::string& a_dir, const std::string& b_dir, size_t steps, double tolerance) {
  const auto a = read_jsonl(a_dir + "/logging.jsonl"), b = read_jsonl(b_dir + "/logging.jsonl");
  ASSERT_EQ(a.size(), steps);
  ASSERT_EQ(b.size(), steps);
  for (size_t i = 0; i < steps; ++i)
    for (const char* key : {"loss", "kl", "grad_norm", "reward"})
      EXPECT_NEAR(a[i][key].get<double>(), b[i][key].get<double>(), tolerance) << key << " at step " << i + 1;
}

// Two runs sampled the same completions, in the same order.
void expect_same_completions(const std::string& a_dir, const std::string& b_dir) {
  const auto a = read_jsonl(a_dir + "/completions.jsonl"), b = read_jsonl(b_dir + "/completions.jsonl");
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i]["completion"], b[i]["completion"]) << "completion " << i;
}

double mean_reward(const std::vector<nlohmann::json>& log, size_t begin, size_t end) {
  double sum = 0;
  for (size_t i = begin; i < end; ++i) sum += log.at(i)["reward"].get<double>();
  return sum / static_cast<double>(end - begin);
}

}  // namespace

// Sampled, not greedy: a greedy group has one completion G times, no
// advantage and so no policy gradient to compare. The engine draws each
// completion from its own seeded generator on either device (gpu_test checks
// the sampled ids), so both runs sample the same completions from logits
// that agree to float32's rounding.
TEST(TrainGpu, FiveFloat32StepsOnTheGpuEqualTheCpusRun) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const std::string dir = tiny_run_dir("train_gpu_f32");
  const std::string common = "--train_type full --torch_dtype float32 --learning_rate 1e-3 --max_steps 5 --beta 0.04 ";
  CommandResult cpu = run_host(flags(dir, "cpu") + common + "--use_cpu true");
  ASSERT_EQ(cpu.exit_code, 0) << cpu.output;
  CommandResult gpu = run_host(flags(dir, "gpu") + common);
  ASSERT_EQ(gpu.exit_code, 0) << gpu.output;
  EXPECT_NE(gpu.output.find(" on cuda:0 in float32 for 5 steps"), std::string::npos) << gpu.output;
  EXPECT_NE(gpu.output.find("native sampler ready: "), std::string::npos) << gpu.output;

  expect_same_completions(dir + "/cpu", dir + "/gpu");
  expect_same_logs(dir + "/cpu", dir + "/gpu", 5, 1e-4);

  namespace m = grpo::model;
  const auto a = m::CheckpointFiles::open(dir + "/cpu/checkpoint-5");
  const auto b = m::CheckpointFiles::open(dir + "/gpu/checkpoint-5");
  const auto start = m::CheckpointFiles::open(dir + "/model");
  double moved = 0;
  for (const auto& name : a.names()) {
    const at::Tensor x = m::tensor_view(a.require(name)), y = m::tensor_view(b.require(name));
    EXPECT_LE((x - y).abs().max().item<double>(), 1e-4) << name;
    moved = std::max(moved, (x - m::tensor_view(start.require(name))).abs().max().item<double>());
  }
  EXPECT_GT(moved, 1e-3) << "the runs trained: the comparison is not of two unchanged models";
}

// async_generate on a GPU samples the next batch on a stream of its own
// while this one trains (model/side_stream.h): what it samples, from the
// sampler's copy of the weights of one step before, and what the steps
// compute are the CPU's async run's. (A check of the results the streams
// give; where each kernel runs is SideStream.*'s.)
TEST(TrainGpu, AsyncGenerationOnItsOwnStreamTrainsAsTheCpusAsyncRun) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const std::string dir = tiny_run_dir("train_gpu_async");
  const std::string common = "--train_type full --torch_dtype float32 --learning_rate 1e-3 --max_steps 4 --beta 0.04 "
                             "--async_generate true ";
  CommandResult cpu = run_host(flags(dir, "cpu") + common + "--use_cpu true");
  ASSERT_EQ(cpu.exit_code, 0) << cpu.output;
  CommandResult gpu = run_host(flags(dir, "gpu") + common);
  ASSERT_EQ(gpu.exit_code, 0) << gpu.output;
  expect_same_completions(dir + "/cpu", dir + "/gpu");
  expect_same_logs(dir + "/cpu", dir + "/gpu", 4, 1e-4);
}

TEST(TrainGpu, Bfloat16FullAndLoraRunsKeepAFiniteLossAndRaiseTheReward) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const std::string dir = tiny_run_dir("train_gpu_bf16");
  for (const std::string type : {"full", "lora"}) {
    CommandResult r = run_host(flags(dir, type) + "--train_type " + type + " --torch_dtype bfloat16 --beta 0 "
                               "--max_steps 20 --learning_rate " + (type == "full" ? "5e-3" : "5e-2"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find(" on cuda:0 in bfloat16 for 20 steps"), std::string::npos) << r.output;
    const auto log = read_jsonl(dir + "/" + type + "/logging.jsonl");
    ASSERT_EQ(log.size(), 20u);
    for (const auto& line : log) {
      EXPECT_TRUE(std::isfinite(line["loss"].get<double>())) << type << ": " << line;
      EXPECT_TRUE(std::isfinite(line["grad_norm"].get<double>())) << type << ": " << line;
    }
    EXPECT_GT(mean_reward(log, 15, 20), mean_reward(log, 0, 5) + 1.0) << type << ": the reward did not rise";
  }
}

// Everything a step allocates is freed or reused by the next: the tensors
// held after step 3 are the tensors held after step 10. Each phase's peak is
// logged, and generation, log-probs and backward each hold more than the
// weights alone.
TEST(TrainGpu, MemoryAfterStepThreeEqualsMemoryAfterStepTenAndEachPhasesPeakIsLogged) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const std::string dir = tiny_run_dir("train_gpu_memory");
  CommandResult r = run_host(flags(dir, "out") + "--train_type full --torch_dtype bfloat16 --max_steps 10");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto log = read_jsonl(dir + "/out/logging.jsonl");
  ASSERT_EQ(log.size(), 10u);
  EXPECT_EQ(log[2]["memory/allocated_gb"], log[9]["memory/allocated_gb"]) << log[2] << "\n" << log[9];
  for (const char* phase : {"generation", "logprob", "backward", "optimizer"}) {
    const std::string key = std::string("memory/") + phase + "_peak_gb";
    ASSERT_TRUE(log[9].contains(key)) << key;
    EXPECT_GT(log[9][key].get<double>(), 0.0) << key;
  }
  EXPECT_GT(log[9]["memory/backward_peak_gb"].get<double>(), log[9]["memory/allocated_gb"].get<double>());
}

// trainer/offload.h on CUDA: host copies are pinned, and an optimizer whose
// moments go to host memory and back between its steps trains bit-identically
// to one whose moments stay; a module and gradients come back unchanged.
TEST(TrainGpu, OffloadRoundTripsThroughPinnedMemoryChangeNothing) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  namespace t = grpo::trainer;
  const at::Device cuda("cuda:0");
  auto make = [&] {
    at::manual_seed(5);
    return std::vector<at::Tensor>{at::randn({1000}, cuda).requires_grad_(), at::randn({64, 33}, cuda).requires_grad_()};
  };
  std::vector<at::Tensor> still = make(), moved = make();
  t::OptimizerSettings settings;
  auto a = t::make_adamw(settings, still), b = t::make_adamw(settings, moved);
  for (int step = 0; step < 3; ++step) {
    for (auto* ps : {&still, &moved})
      for (at::Tensor& p : *ps) p.mutable_grad() = at::full_like(p, 0.01 * (step + 1));
    a->step();
    b->step();
    EXPECT_EQ(t::optimizer_state_to(*b, at::kCPU), int64_t{2 * (1000 + 64 * 33) * 4});
    for (const auto& [key, state] : b->state()) {
      const auto& adam = static_cast<const torch::optim::AdamWParamState&>(*state);
      EXPECT_TRUE(adam.exp_avg().is_cpu() && adam.exp_avg().is_pinned());
      EXPECT_TRUE(adam.exp_avg_sq().is_cpu() && adam.exp_avg_sq().is_pinned());
    }
    EXPECT_EQ(t::optimizer_state_to_devices(*b), int64_t{2 * (1000 + 64 * 33) * 4});
  }
  for (size_t i = 0; i < still.size(); ++i) EXPECT_TRUE(at::equal(still[i], moved[i])) << "parameter " << i;

  torch::nn::Linear layer(16, 8);
  layer->to(cuda);
  const at::Tensor x = at::randn({4, 16}, cuda), y = layer->forward(x);
  EXPECT_EQ(t::move_module(*layer, at::kCPU), int64_t{(16 * 8 + 8) * 4});
  EXPECT_TRUE(layer->weight.is_cpu() && layer->weight.is_pinned());
  t::move_module(*layer, cuda);
  EXPECT_TRUE(at::equal(layer->forward(x), y));

  const at::Tensor g = at::randn({1000}, cuda);
  still[0].mutable_grad() = g.clone();
  t::ParkedGradients parked({still[0]}, /*all_zero=*/false);
  EXPECT_FALSE(still[0].grad().defined());
  parked.restore();
  EXPECT_TRUE(at::equal(still[0].grad(), g));
}

// What each memory flag saves, in the run's own metrics: --offload_model and
// --offload_optimizer take the reference, the gradients and AdamW's moments
// off the GPU while it samples (memory/offloaded_gb says how much), so the
// generation peak falls by at least that much; --sleep_level 1 frees the
// sampler's KV cache after generating, so the backward peak falls. Neither
// changes what is trained.
TEST(TrainGpu, OffloadAndSleepFlagsLowerTheMeasuredPeaks) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const std::string dir = tiny_run_dir("train_gpu_offload");
  const std::string common = "--train_type full --torch_dtype bfloat16 --beta 0.04 --max_steps 3 ";
  CommandResult base = run_host(flags(dir, "base") + common);
  ASSERT_EQ(base.exit_code, 0) << base.output;
  CommandResult off = run_host(flags(dir, "offload") + common +
                               "--offload_model true --offload_optimizer true --gc_collect_after_offload true");
  ASSERT_EQ(off.exit_code, 0) << off.output;
  CommandResult sleep = run_host(flags(dir, "sleep") + common + "--sleep_level 1");
  ASSERT_EQ(sleep.exit_code, 0) << sleep.output;
  const auto b = read_jsonl(dir + "/base/logging.jsonl"), o = read_jsonl(dir + "/offload/logging.jsonl"),
             s = read_jsonl(dir + "/sleep/logging.jsonl");
  ASSERT_EQ(b.size(), 3u);
  ASSERT_EQ(o.size(), 3u);
  ASSERT_EQ(s.size(), 3u);
  expect_same_logs(dir + "/base", dir + "/offload", 3, 1e-5);
  expect_same_logs(dir + "/base", dir + "/sleep", 3, 1e-5);
  const double offloaded = o[2]["memory/offloaded_gb"].get<double>();
  EXPECT_GT(offloaded, 0.0);
  // The pinned host memory is taken once and reused: it does not grow step to step, nor exceed what
  // moved by more than the arenas' first chunks (1 MiB each).
  EXPECT_EQ(o[2]["memory/offload_host_gb"].get<double>(), o[1]["memory/offload_host_gb"].get<double>());
  EXPECT_LE(o[2]["memory/offload_host_gb"].get<double>(), offloaded + 0.01);
  const double fell = b[2]["memory/generation_peak_gb"].get<double>() - o[2]["memory/generation_peak_gb"].get<double>();
  EXPECT_GE(fell, 0.9 * offloaded) << "generation peak " << b[2]["memory/generation_peak_gb"] << " -> "
                                   << o[2]["memory/generation_peak_gb"] << ", " << offloaded << " GiB offloaded";
  EXPECT_LT(s[2]["memory/backward_peak_gb"].get<double>(), b[2]["memory/backward_peak_gb"].get<double>());
}

// Two ranks on the one GPU — two "nodes" of one process each on this machine,
// both on cuda:0 — cannot form an NCCL group (one rank per GPU): they
// exchange their CUDA tensors over Gloo and train as one rank with their
// whole batch does.
TEST(TrainGpu, TwoRanksSharingTheGpuTrainOverGlooAsOneRankWithTheirBatch) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const std::string dir = tiny_run_dir("train_gpu_two_ranks");
  // One generation batch of 16 completions (2 prompts x G 8) per step: one
  // rank takes 8 per micro-batch, each of two ranks 4.
  auto run = [&](const std::string& out, int per_device) {
    return "train --model " + dir + "/model --dataset " + dir + "/rows.jsonl --plugins " FIXTURE_OK +
           " --reward_funcs fixture --num_generations 8 --gradient_accumulation_steps 2 --max_completion_length 16 "
           "--train_type full --torch_dtype float32 --learning_rate 1e-3 --max_steps 3 --beta 0.04 --logging_steps 1 "
           "--report_to none --per_device_train_batch_size " + std::to_string(per_device) + " --output_dir " + dir +
           "/" + out;
  };
  CommandResult one = run_host(run("one", 8));
  ASSERT_EQ(one.exit_code, 0) << one.output;
  // Two nodes of one rank each on this machine: node 1 in the background, its output in a log.
  auto two_nodes = [&](const std::string& out, const std::string& extra) {
    const std::string node = "NNODES=2 NPROC_PER_NODE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=" +
                             std::to_string(grpo::dist::free_port("127.0.0.1"));
    // A bounded --ddp_timeout: a node that fails before the two meet leaves the other waiting that long.
    const std::string host = " '" GRPO_HOST_EXE "' " + run(out, 4) + " --ddp_timeout 120" + extra;
    // Node 0's log (stderr) into the output the test reads: run_shell's own 2>&1 reaches only the last command.
    return run_shell(node + " NODE_RANK=1" + host + " > " + dir + "/" + out + "-node1.log 2>&1 & " + node +
                     " NODE_RANK=0" + host + " 2>&1; first=$?; wait $!; exit $((first + $?))");
  };
  CommandResult two = two_nodes("two", "");
  ASSERT_EQ(two.exit_code, 0) << two.output << read_file(dir + "/two-node1.log");
  EXPECT_NE(two.output.find("share one GPU"), std::string::npos) << two.output;
  // Asked for NCCL, the same ranks stop at the start, saying why.
  CommandResult nccl = two_nodes("nccl", " --ddp_backend nccl");
  EXPECT_NE(nccl.exit_code, 0);
  EXPECT_NE(nccl.output.find("--ddp_backend nccl: ranks 0 and 1 share one GPU"), std::string::npos) << nccl.output;
  expect_same_logs(dir + "/one", dir + "/two", 3, 1e-4);
}

// torchrun --nproc_per_node 1 on the GPU: a group of one, over NCCL (asked
// for, so a fall back to Gloo would fail the run), through the real training
// loop — the gradients' all-reduce, the metrics' sums — and the same training
// as the plain run.
TEST(TrainGpu, AWorldOfOneOnTheGpuTrainsOverNcclAsAPlainRun) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const std::string dir = tiny_run_dir("train_gpu_world_of_one");
  const std::string run = "--train_type full --torch_dtype float32 --learning_rate 1e-3 --max_steps 3 --beta 0.04 ";
  CommandResult plain = run_host(flags(dir, "plain") + run);
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  const std::string port = std::to_string(grpo::dist::free_port("127.0.0.1"));
  CommandResult group = run_host(flags(dir, "group") + run + "--ddp_backend nccl --ddp_timeout 120",
                                 "RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + port);
  ASSERT_EQ(group.exit_code, 0) << group.output;
  EXPECT_NE(group.output.find("data parallel over 1 process (a group of one)"), std::string::npos) << group.output;
  EXPECT_NE(group.output.find("shards go over NCCL between the GPUs of 1 rank(s)"), std::string::npos) << group.output;
  expect_same_logs(dir + "/plain", dir + "/group", 3, 1e-5);
}

// LoRA dropout on a GPU draws from the GPU's generator: a run resumed from
// checkpoint-2 continues that generator's sequence (rng_state_cuda.pt) and
// so the straight run's steps 3 and 4. Restarted from the seed instead, its
// dropout masks would repeat step 1's and the logs would part.
TEST(TrainGpu, AResumedLoraRunWithDropoutContinuesTheStraightRun) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const std::string dir = tiny_run_dir("train_gpu_resume");
  const std::string base = "train --model " + dir + "/model --dataset " + dir + "/rows.jsonl --plugins " FIXTURE_OK +
                           " --reward_funcs fixture --num_generations 8 --per_device_train_batch_size 8 "
                           "--max_completion_length 16 --logging_steps 1 --report_to none --train_type lora "
                           "--lora_rank 4 --lora_dropout 0.3 --torch_dtype float32 --learning_rate 1e-2 --beta 0.04 "
                           "--max_steps 4 --save_steps 2 ";
  auto [straight, resumed] = run_straight_and_resumed(base, dir);
  ASSERT_EQ(straight.size(), 4u);
  ASSERT_EQ(resumed.size(), 2u);
  EXPECT_TRUE(std::filesystem::exists(dir + "/straight/checkpoint-2/rng_state_cuda.pt"));
  for (size_t i = 0; i < 2; ++i)
    for (const char* key : {"loss", "kl", "grad_norm", "reward"})
      EXPECT_NEAR(resumed[i][key].get<double>(), straight[i + 2][key].get<double>(), 1e-5) << key << " at step " << i + 3;
}
