// grpo-host train on several processes, as users start it: NPROC_PER_NODE
// (the host starts its ranks), torchrun-style RANK/WORLD_SIZE, and two
// "nodes" on this machine — real processes over Gloo on 127.0.0.1. Data
// parallel must give what one process with the whole batch gives, and a
// dead or stalled rank must stop the run within --ddp_timeout with the
// last finished step saved.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <thread>

#include <gtest/gtest.h>

#include "cli/cli_util.h"
#include "dist/launcher.h"
#include "model/safetensors.h"
#include "model/weights.h"
#include "plugin_paths.h"

using namespace grpo::testing;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

// A run of `steps` steps in two micro-batches per generation batch of
// per_device_train_batch_size x processes x 2 completions (G 4).
void write_run(const std::string& dir, const std::string& loss_type, int steps) {
  write_file(dir + "/run.yaml",
             "model: " + dir + "/model\n"
             "dataset: [" + dir + "/rows.jsonl]\n"
             "train_type: full\n"
             "reward_funcs: [repetition, format]\n"
             "reward_weights: [1.0, 0.5]\n"
             "repetition_n_grams: 1\n"
             "plugin_args: {repetition: {unit: token}}\n"
             "warmup_ratio: 0\n"
             "num_generations: 4\n"
             "gradient_accumulation_steps: 2\n"
             "max_completion_length: 12\n"
             "loss_type: " + loss_type + "\n"
             "max_steps: " + std::to_string(steps) + "\n"
             "logging_steps: 1\n"
             "learning_rate: 2.0e-3\n"
             "log_completions: true\n"
             "report_to: [none]\n"
             "seed: 11\n");
}

// Every tensor of two model.safetensors: the largest absolute difference.
double max_weight_difference(const std::string& a, const std::string& b) {
  auto fa = grpo::model::SafetensorsFile::open(a), fb = grpo::model::SafetensorsFile::open(b);
  double worst = 0;
  EXPECT_EQ(fa->tensors().size(), fb->tensors().size());
  for (const auto& t : fa->tensors()) {
    const auto* u = fb->find(t.name);
    if (!u) {
      ADD_FAILURE() << t.name << " missing from " << b;
      continue;
    }
    at::Tensor x = grpo::model::tensor_view(t).to(at::kDouble), y = grpo::model::tensor_view(*u).to(at::kDouble);
    worst = std::max(worst, (x - y).abs().max().item<double>());
  }
  return worst;
}

// Two runs logged the same `count` completions, with the same advantages.
void expect_same_completions(const std::string& one, const std::string& two, size_t count) {
  auto c1 = read_jsonl(one + "/completions.jsonl"), c2 = read_jsonl(two + "/completions.jsonl");
  ASSERT_EQ(c1.size(), count);
  ASSERT_EQ(c1.size(), c2.size());
  for (size_t i = 0; i < c1.size(); ++i) {
    EXPECT_EQ(c1[i]["completion"], c2[i]["completion"]) << "completion " << i;
    EXPECT_NEAR(c1[i]["advantage"].get<double>(), c2[i]["advantage"].get<double>(), 1e-5) << i;
  }
}

// Completions and losses of two runs' logs agree; their final weights too.
void expect_same_training(const std::string& one, const std::string& two, int steps, int per_step) {
  expect_same_completions(one, two, static_cast<size_t>(steps * per_step));
  auto l1 = read_jsonl(one + "/logging.jsonl"), l2 = read_jsonl(two + "/logging.jsonl");
  ASSERT_EQ(l1.size(), static_cast<size_t>(steps));
  ASSERT_EQ(l2.size(), l1.size());
  for (size_t s = 0; s < l1.size(); ++s)
    for (const char* key : {"loss", "grad_norm", "reward", "reward_std", "kl", "entropy", "num_tokens"})
      EXPECT_NEAR(l1[s][key].get<double>(), l2[s][key].get<double>(), 1e-5) << key << " at step " << s + 1;
  const std::string ckpt = "/checkpoint-" + std::to_string(steps) + "/model.safetensors";
  // Summation orders differ between one batch and two halves; AdamW divides
  // each gradient by its own running scale, so for a parameter whose gradient
  // is near zero that rounding moves the update by a visible fraction of the
  // learning rate (2e-3 here): up to 1.8e-5 on AVX-512 machines.
  EXPECT_LT(max_weight_difference(one + ckpt, two + ckpt), 5e-5);
  EXPECT_GT(max_weight_difference(one + ckpt, one + "/../model/model.safetensors"), 1e-3) << "the run must train";
  for (const auto& line : l1) EXPECT_GT(line["reward_std"].get<double>(), 0.0) << "rewards must differ within groups";
}

// `train` with `flags` into dir/one on one process (per-device batch 6)
// and into dir/two on two (batch 3 each): the same generation batches.
// Returns the two-process run's output; a failed run fails the test.
std::string train_one_and_two(const std::string& dir, const std::string& flags, const std::string& config = "") {
  const std::string base =
      "train --config " + (config.empty() ? dir + "/run.yaml" : config) + " " + flags + " --output_dir " + dir;
  CommandResult one = run_host(base + "/one --per_device_train_batch_size 6");
  EXPECT_EQ(one.exit_code, 0) << one.output;
  CommandResult two = run_host(base + "/two --per_device_train_batch_size 3", "NPROC_PER_NODE=2");
  EXPECT_EQ(two.exit_code, 0) << two.output;
  return two.output;
}

// grpo-host `args` in the background with `env` added, output to `log`.
pid_t spawn_host(const std::string& args, const std::vector<std::string>& env, const std::string& log) {
  const pid_t pid = fork();
  if (pid == 0) {
    for (const std::string& kv : env) putenv(const_cast<char*>(kv.c_str()));
    const std::string cmd = "exec '" GRPO_HOST_EXE "' " + args + " > '" + log + "' 2>&1";
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

// Its exit status (128 + signal when killed), or nullopt after `seconds`.
std::optional<int> wait_exit(pid_t pid, double seconds) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
  while (Clock::now() < deadline) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return std::nullopt;
}

// Waits until `path` holds at least `lines` JSON lines (the steps logged).
bool wait_for_lines(const std::string& path, size_t lines, double seconds) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
  while (Clock::now() < deadline) {
    if (fs::exists(path) && read_jsonl(path).size() >= lines) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

// The child of `parent` whose environment holds RANK=rank.
pid_t rank_child(pid_t parent, int rank) {
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string stat = read_file(e.path() / "stat");
    const size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    int ppid = 0;
    std::sscanf(stat.c_str() + close + 2, "%*c %d", &ppid);
    if (ppid != parent) continue;
    const std::string env = read_file(e.path() / "environ");
    if (env.find(std::string("\0RANK=", 6) + std::to_string(rank) + '\0') != std::string::npos ||
        env.rfind("RANK=" + std::to_string(rank) + '\0', 0) == 0)
      return static_cast<pid_t>(std::stoi(name));
  }
  return -1;
}

}  // namespace

TEST(TrainDistributed, TwoProcessesTrainExactlyAsOneProcessWithTwiceTheBatch) {
  // 3 prompts x G 4 per generation batch: the middle group is split, copies
  // 0-1 sampled by rank 0 and 2-3 by rank 1.
  const std::string dir = tiny_run_dir("dist_equivalence");
  write_run(dir, "grpo", 3);
  const std::string two = train_one_and_two(dir, "");
  EXPECT_NE(two.find("starting 2 ranks"), std::string::npos) << two;
  EXPECT_NE(two.find("data parallel over 2 processes"), std::string::npos) << two;
  EXPECT_NE(two.find("[rank 0]"), std::string::npos) << two;
  expect_same_training(dir + "/one", dir + "/two", 3, 12);
}

// torchrun --nproc_per_node 1 (RANK 0, WORLD_SIZE 1, MASTER_ADDR and
// MASTER_PORT): a group of one, as DDP forms it; the gradients' all-reduce,
// the samples' gather and the metrics' sums run through it and change nothing.
// ZeRO over one rank shards nothing: the checkpoint is a plain run's.
// On a GPU the same run goes over NCCL (TrainGpu.AWorldOfOneOnTheGpuTrainsOverNccl).
TEST(TrainDistributed, AWorldOfOneStartedByALauncherTrainsThroughItsGroupAsAPlainRun) {
  const std::string dir = tiny_run_dir("dist_world_of_one");
  write_run(dir, "grpo", 2);
  const std::string base = "train --config " + dir + "/run.yaml --per_device_train_batch_size 4 --output_dir " + dir;
  CommandResult plain = run_host(base + "/one");
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  EXPECT_EQ(plain.output.find("data parallel"), std::string::npos) << plain.output;
  const std::string port = std::to_string(grpo::dist::free_port("127.0.0.1"));
  CommandResult one = run_host(base + "/group --deepspeed zero2",
                               "RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + port);
  ASSERT_EQ(one.exit_code, 0) << one.output;
  EXPECT_NE(one.output.find("data parallel over 1 process (a group of one)"), std::string::npos) << one.output;
  expect_same_training(dir + "/one", dir + "/group", 2, 8);
  EXPECT_TRUE(fs::exists(dir + "/group/checkpoint-2/optimizer.pt")) << "one rank keeps its whole optimizer state";
}

TEST(TrainDistributed, AsyncGenerateTrainsAsOneProcess) {
  // async_generate samples on a background thread, with its own process group.
  const std::string dir = tiny_run_dir("dist_async");
  write_run(dir, "grpo", 3);
  train_one_and_two(dir, "--async_generate true");
  expect_same_training(dir + "/one", dir + "/two", 3, 12);
}

TEST(TrainDistributed, DynamicSampleResamplesAsOneProcessDoes) {
  // A random model never answers correctly: every group has equal rewards,
  // so every step resamples up to the limit, deciding on the gathered rewards.
  const std::string dir = tiny_run_dir("dist_dynamic");
  write_run(dir, "grpo", 2);
  train_one_and_two(dir, "--reward_funcs accuracy --reward_weights 1 --dynamic_sample true --max_resample_times 2");
  expect_same_completions(dir + "/one", dir + "/two", 24);
  auto l1 = read_jsonl(dir + "/one/logging.jsonl"), l2 = read_jsonl(dir + "/two/logging.jsonl");
  ASSERT_EQ(l2.size(), 2u);
  for (size_t s = 0; s < 2; ++s) {
    EXPECT_EQ(l1[s]["dynamic_sample/resample_count"], 2.0);
    EXPECT_EQ(l2[s]["dynamic_sample/resample_count"], 2.0);
  }
}

TEST(TrainDistributed, MultiTurnConversationsContinueAsInOneProcess) {
  // ms-swift's multi-turn example (math_tip_trick hints) at small scale: a
  // conversation's later turns keep their seeds whichever rank runs them.
  const std::string dir = tiny_run_dir("dist_multi_turn");
  train_one_and_two(dir,
                    "--model " + dir + "/model --dataset " + dir + "/rows.jsonl --torch_dtype float32 "
                    "--num_generations 4 --gradient_accumulation_steps 2 --max_completion_length 12 --max_steps 2 "
                    "--logging_steps 1 --stop_words a e i o u 1 2 3 --report_to none --log_completions true",
                    GRPO_SOURCE_DIR "/configs/multi_turn.yaml");
  expect_same_completions(dir + "/one", dir + "/two", 24);
  auto l1 = read_jsonl(dir + "/one/logging.jsonl"), l2 = read_jsonl(dir + "/two/logging.jsonl");
  ASSERT_EQ(l2.size(), 2u);
  for (size_t s = 0; s < 2; ++s) {
    EXPECT_GT(l1[s]["turns/mean"].get<double>(), 1.0) << "hints must follow some turns";
    for (const char* key : {"loss", "turns/mean", "turns/max", "num_tokens"})
      EXPECT_NEAR(l1[s][key].get<double>(), l2[s][key].get<double>(), 1e-5) << key << " at step " << s + 1;
  }
}

TEST(TrainDistributed, TwoNodesOfOneProcessTrainAsOneProcessWithTheirBatch) {
  // dapo: its normaliser is the whole batch's active tokens, over every rank.
  const std::string dir = tiny_run_dir("dist_two_nodes");
  write_run(dir, "dapo", 2);
  CommandResult one = run_host("train --config " + dir + "/run.yaml --per_device_train_batch_size 4 --output_dir " +
                               dir + "/one");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const std::string port = std::to_string(grpo::dist::free_port("127.0.0.1"));
  const std::string args = "train --config " + dir + "/run.yaml --per_device_train_batch_size 2 --output_dir " + dir + "/nodes";
  const std::vector<std::string> node = {"NNODES=2", "NPROC_PER_NODE=1", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + port};
  std::vector<std::string> env1 = node, env0 = node;
  env1.push_back("NODE_RANK=1");
  env0.push_back("NODE_RANK=0");
  const pid_t second = spawn_host(args, env1, dir + "/node1.log");
  const pid_t first = spawn_host(args, env0, dir + "/node0.log");
  ASSERT_EQ(wait_exit(first, 240), 0) << read_file(dir + "/node0.log");
  ASSERT_EQ(wait_exit(second, 60), 0) << read_file(dir + "/node1.log");
  EXPECT_NE(read_file(dir + "/node1.log").find("node 1 of 2"), std::string::npos) << read_file(dir + "/node1.log");
  expect_same_training(dir + "/one", dir + "/nodes", 2, 8);
}

TEST(TrainDistributed, AKilledRankStopsTheRunAndRankZeroKeepsTheLastFinishedStep) {
  const std::string dir = tiny_run_dir("dist_killed");
  write_run(dir, "grpo", 500);
  const pid_t launcher = spawn_host("train --config " + dir + "/run.yaml --per_device_train_batch_size 2 --ddp_timeout 30 "
                                    "--output_dir " + dir + "/out",
                                    {"NPROC_PER_NODE=2"}, dir + "/run.log");
  ASSERT_TRUE(wait_for_lines(dir + "/out/logging.jsonl", 2, 120)) << read_file(dir + "/run.log");
  const pid_t rank1 = rank_child(launcher, 1);
  ASSERT_GT(rank1, 0) << "rank 1 of launcher " << launcher << " not found";
  const auto killed_at = Clock::now();
  kill(rank1, SIGKILL);
  std::optional<int> code = wait_exit(launcher, 60);
  const double took = std::chrono::duration<double>(Clock::now() - killed_at).count();
  if (!code) kill(launcher, SIGKILL);
  ASSERT_TRUE(code.has_value()) << read_file(dir + "/run.log");
  const std::string log = read_file(dir + "/run.log");
  EXPECT_NE(*code, 0) << log;
  EXPECT_LT(took, 30.0) << "the survivors must stop within --ddp_timeout";
  EXPECT_NE(log.find("rank 1 (pid " + std::to_string(rank1) + ") was killed by signal 9"), std::string::npos) << log;
  EXPECT_NE(log.find("the training processes lost each other"), std::string::npos) << log;
  // Rank 0 saved the last step it finished: the last step it logged, or the
  // one after it when rank 1 died between that step's update and the
  // exchange of its metrics (the update, all-reduced, is whole either way).
  const auto lines = read_jsonl(dir + "/out/logging.jsonl");
  const int logged = lines.back()["global_step"].get<int>();
  int saved = 0;
  for (const auto& e : fs::directory_iterator(dir + "/out"))
    if (e.path().filename().string().rfind("checkpoint-", 0) == 0)
      saved = std::max(saved, std::stoi(e.path().filename().string().substr(11)));
  EXPECT_TRUE(saved == logged || saved == logged + 1) << "logged " << logged << ", saved " << saved << "\n" << log;
  const std::string ckpt = dir + "/out/checkpoint-" + std::to_string(saved);
  ASSERT_TRUE(fs::exists(ckpt + "/model.safetensors")) << log;
  EXPECT_EQ(nlohmann::json::parse(read_file(ckpt + "/trainer_state.json"))["global_step"], saved);
}

TEST(TrainDistributed, SigtermToTheLauncherStopsEveryRankAfterTheSameStepWithACheckpoint) {
  const std::string dir = tiny_run_dir("dist_sigterm");
  write_run(dir, "grpo", 500);
  const pid_t launcher = spawn_host("train --config " + dir + "/run.yaml --per_device_train_batch_size 2 --output_dir " +
                                        dir + "/out",
                                    {"NPROC_PER_NODE=2"}, dir + "/run.log");
  ASSERT_TRUE(wait_for_lines(dir + "/out/logging.jsonl", 2, 120)) << read_file(dir + "/run.log");
  kill(launcher, SIGTERM);
  std::optional<int> code = wait_exit(launcher, 60);
  if (!code) kill(launcher, SIGKILL);
  const std::string log = read_file(dir + "/run.log");
  ASSERT_TRUE(code.has_value()) << log;
  EXPECT_EQ(*code, 0) << "a requested stop is a clean end: " << log;
  EXPECT_NE(log.find("stopped by a signal"), std::string::npos) << log;
  const int last = read_jsonl(dir + "/out/logging.jsonl").back()["global_step"].get<int>();
  EXPECT_LT(last, 500);
  EXPECT_TRUE(fs::exists(dir + "/out/checkpoint-" + std::to_string(last) + "/model.safetensors")) << log;
}

// The signal reaches both ranks while one rank's sampler call hangs and the
// other waits for it in a collective: the hung rank gives its call up after
// the grace and says so in the store, and the other, losing it on the same
// signal, stops as cleanly: exit status 0, the last finished step saved.
// Rank 0 hung: it saves, and rank 1 finds the store gone with it.
TEST(TrainDistributed, SigtermWhileOneRanksSamplerHangsStopsEveryRankCleanly) {
  for (int stalled : {1, 0}) {
    SCOPED_TRACE("the sampler of rank " + std::to_string(stalled) + " hangs");
    const std::string dir = tiny_run_dir("dist_sigterm_stalled_sampler_" + std::to_string(stalled));
    write_run(dir, "grpo", 500);
    const std::string sampler = "--plugins " FIXTURE_SAMPLER " --sampler fixture_sampler --sampler_args "
                                "'{\"stall_rank\": " + std::to_string(stalled) + "}' ";
    const pid_t launcher = spawn_host("train --config " + dir + "/run.yaml --per_device_train_batch_size 2 "
                                      "--ddp_timeout 120 " + sampler + "--output_dir " + dir + "/out",
                                      {"NPROC_PER_NODE=2"}, dir + "/run.log");
    ASSERT_TRUE(wait_for_lines(dir + "/out/logging.jsonl", 1, 120)) << read_file(dir + "/run.log");
    std::this_thread::sleep_for(std::chrono::seconds(1));  // one rank now waits for the other in step 2
    ASSERT_FALSE(wait_exit(launcher, 0.1).has_value()) << read_file(dir + "/run.log");
    const auto signalled = Clock::now();
    kill(launcher, SIGTERM);
    std::optional<int> code = wait_exit(launcher, 60);
    const double took = std::chrono::duration<double>(Clock::now() - signalled).count();
    if (!code) kill(launcher, SIGKILL);
    const std::string log = read_file(dir + "/run.log");
    ASSERT_TRUE(code.has_value()) << log;
    EXPECT_EQ(*code, 0) << "a requested stop is a clean end: " << log;
    EXPECT_LT(took, 15.0) << log;
    EXPECT_NE(log.find("another rank left on the same signal"), std::string::npos) << log;
    EXPECT_EQ(log.find("lost each other"), std::string::npos) << log;
    EXPECT_EQ(read_jsonl(dir + "/out/logging.jsonl").size(), 1u) << log;
    EXPECT_TRUE(fs::exists(dir + "/out/checkpoint-1/model.safetensors")) << log;
  }
}

TEST(TrainDistributed, AStalledRankMakesTheOthersExitWithinTheTimeoutNamingIt) {
  // Started as torchrun starts ranks: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT.
  const std::string dir = tiny_run_dir("dist_stalled");
  write_run(dir, "grpo", 500);
  const std::string port = std::to_string(grpo::dist::free_port("127.0.0.1"));
  const std::string args = "train --config " + dir + "/run.yaml --per_device_train_batch_size 2 --ddp_timeout 12 "
                           "--output_dir " + dir + "/out";
  std::vector<pid_t> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.push_back(spawn_host(args,
                               {"RANK=" + std::to_string(r), "WORLD_SIZE=2", "LOCAL_RANK=" + std::to_string(r),
                                "LOCAL_WORLD_SIZE=2", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + port},
                               dir + "/rank" + std::to_string(r) + ".log"));
  ASSERT_TRUE(wait_for_lines(dir + "/out/logging.jsonl", 2, 120)) << read_file(dir + "/rank0.log");
  const auto stalled_at = Clock::now();
  kill(ranks[1], SIGSTOP);
  std::optional<int> code = wait_exit(ranks[0], 30);
  const double took = std::chrono::duration<double>(Clock::now() - stalled_at).count();
  kill(ranks[1], SIGKILL);
  wait_exit(ranks[1], 10);
  if (!code) kill(ranks[0], SIGKILL);
  const std::string log = read_file(dir + "/rank0.log");
  ASSERT_TRUE(code.has_value()) << "rank 0 did not stop: " << log;
  EXPECT_NE(*code, 0);
  // A rank silent for half the timeout is named (6 s here); the rest leaves
  // room for the step rank 0 was in and the checkpoint on a loaded machine.
  EXPECT_LT(took, 12.0) << "within --ddp_timeout 12, the checkpoint saved";
  EXPECT_NE(log.find("rank 1 stopped answering"), std::string::npos) << log;
  EXPECT_NE(log.find("--ddp_timeout 12 s"), std::string::npos) << log;
  // The checkpoint of the last step every rank updated: the last one logged, or the one after it where
  // the stall came between that step's update and its log line (the gather of its metrics).
  const int last = read_jsonl(dir + "/out/logging.jsonl").back()["global_step"].get<int>();
  auto saved = [&](int step) {
    return fs::exists(dir + "/out/checkpoint-" + std::to_string(step) + "/model.safetensors");
  };
  EXPECT_TRUE(saved(last) || saved(last + 1)) << log;
}

TEST(TrainDistributed, AConfigurationErrorIsReportedOnceBeforeAnyRankStarts) {
  const std::string dir = tiny_run_dir("dist_refused");
  write_run(dir, "grpo", 1);
  CommandResult r = run_host("train --config " + dir + "/run.yaml --per_device_train_batch_size 2 --output_dir " + dir +
                                 "/out --deepspeed zero3",
                             "NPROC_PER_NODE=2");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  const size_t at = r.output.find("ZeRO-3 shards the weights themselves");
  EXPECT_NE(at, std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("ZeRO-3 shards the weights themselves", at + 1), std::string::npos) << "said once: " << r.output;
  EXPECT_EQ(r.output.find("starting 2 ranks"), std::string::npos) << r.output;
}

namespace {

double last(const std::string& out, const char* key) { return read_jsonl(out + "/logging.jsonl").back()[key].get<double>(); }

}  // namespace

TEST(TrainDistributed, ZeroOneAndTwoShardTheOptimizerStateAndTrainAsUnsharded) {
  const std::string dir = tiny_run_dir("dist_zero");
  write_run(dir, "grpo", 3);
  const std::string base = "train --config " + dir + "/run.yaml --output_dir " + dir;
  CommandResult one = run_host(base + "/one --per_device_train_batch_size 6");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  CommandResult z1 = run_host(base + "/zero1 --per_device_train_batch_size 3 --deepspeed zero1", "NPROC_PER_NODE=2");
  ASSERT_EQ(z1.exit_code, 0) << z1.output;
  CommandResult z2 = run_host(base + "/zero2 --per_device_train_batch_size 3 --zero_stage 2", "NPROC_PER_NODE=2");
  ASSERT_EQ(z2.exit_code, 0) << z2.output;
  expect_same_training(dir + "/one", dir + "/zero1", 3, 12);
  expect_same_training(dir + "/one", dir + "/zero2", 3, 12);
  // AdamW's moments per rank: about half of one process's (the mean over the ranks is logged).
  const double whole = last(dir + "/one", "memory/optimizer_state_mb");
  EXPECT_GT(whole, 0.1);
  for (const char* run : {"/zero1", "/zero2"}) {
    EXPECT_NEAR(last(dir + run, "memory/optimizer_state_mb") / whole, 0.5, 0.05) << run;
  }
}

TEST(TrainDistributed, AZeroCheckpointHoldsEveryShardAndResumesOnTheSameProcessesOnly) {
  const std::string dir = tiny_run_dir("dist_zero_resume");
  write_run(dir, "grpo", 3);
  const std::string base = "train --config " + dir + "/run.yaml --per_device_train_batch_size 3 --deepspeed zero2 "
                           "--save_steps 2 --output_dir " + dir;
  CommandResult straight = run_host(base + "/straight", "NPROC_PER_NODE=2");
  ASSERT_EQ(straight.exit_code, 0) << straight.output;
  for (const char* f : {"optimizer_zero_rank0_of_2.pt", "optimizer_zero_rank1_of_2.pt"})
    EXPECT_TRUE(fs::exists(dir + "/straight/checkpoint-2/" + f)) << f;
  EXPECT_FALSE(fs::exists(dir + "/straight/checkpoint-2/optimizer.pt"));
  CommandResult resumed =
      run_host(base + "/resumed --resume_from_checkpoint " + dir + "/straight/checkpoint-2", "NPROC_PER_NODE=2");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_LT(max_weight_difference(dir + "/straight/checkpoint-3/model.safetensors",
                                  dir + "/resumed/checkpoint-3/model.safetensors"),
            1e-6);
  // One process cannot take the shards of two.
  CommandResult alone = run_host("train --config " + dir + "/run.yaml --per_device_train_batch_size 6 --output_dir " +
                                 dir + "/alone --resume_from_checkpoint " + dir + "/straight/checkpoint-2");
  EXPECT_EQ(alone.exit_code, 2) << alone.output;
  EXPECT_NE(alone.output.find("sharded by ZeRO stage 2 over 2 processes"), std::string::npos) << alone.output;
}

TEST(TrainDistributed, MsSwiftsMultiGpuExampleRunsWithZero2OnTwoProcesses) {
  // configs/grpo.yaml is ms-swift's full_vllm.sh (--deepspeed zero2, 7 training GPUs), here at small scale.
  const std::string dir = tiny_run_dir("dist_swift_example");
  CommandResult r = run_host("train --config " GRPO_SOURCE_DIR "/configs/grpo.yaml --model " + dir +
                                 "/model --dataset " + dir + "/rows.jsonl --torch_dtype float32 --max_completion_length 8 "
                                 "--num_generations 4 --per_device_train_batch_size 2 --max_steps 2 --logging_steps 1 "
                                 "--output_dir " + dir + "/out",
                             "NPROC_PER_NODE=2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("data parallel over 2 processes"), std::string::npos) << r.output;
  auto lines = read_jsonl(dir + "/out/logging.jsonl");
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_TRUE(lines[1].contains("rewards/accuracy/mean"));
  EXPECT_TRUE(fs::exists(dir + "/out/checkpoint-2/optimizer_zero_rank1_of_2.pt"));
}

TEST(TrainDistributed, ZeroThreeAndOffloadAreRefusedWithWhatToUseInstead) {
  const std::string dir = tiny_run_dir("dist_zero3");
  write_run(dir, "grpo", 1);
  write_file(dir + "/ds.json", R"({"zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}}})");
  for (const std::string& flag : std::vector<std::string>{"--deepspeed zero3", "--zero_stage 3", "--deepspeed zero2_offload",
                                                          "--deepspeed " + dir + "/ds.json"}) {
    CommandResult r = run_host("config --config " + dir + "/run.yaml --per_device_train_batch_size 4 " + flag);
    EXPECT_EQ(r.exit_code, 2) << flag << ": " << r.output;
    EXPECT_NE(r.output.find("--deepspeed zero2"), std::string::npos) << flag << ": " << r.output;
  }
  write_file(dir + "/ds.json", R"({"zero_optimization": {"stage": 1}})");
  CommandResult ok =
      run_host("config --config " + dir + "/run.yaml --per_device_train_batch_size 4 --deepspeed " + dir + "/ds.json");
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_NE(ok.output.find("deepspeed: zero1"), std::string::npos) << ok.output;
}
