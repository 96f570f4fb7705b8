// `grpo-host train` with generation on a rollout server: the same YAML runs
// with the native sampler or the external_server one by configuration alone,
// greedy runs give the same completions either way, the server gets every
// update, and a server that is missing or goes away stops the run clearly.
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <regex>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/cli_util.h"
#include "model/engine.h"
#include "model/weights.h"
#include "plugin_paths.h"
#include "rollout/rollout_process.h"
#include "tokenizer/tokenizer.h"

using namespace grpo::testing;
namespace fs = std::filesystem;

namespace {

// A tiny model, eight prompts and a greedy run whose updates are large
// enough to change what the model generates.
std::string setup_run(const std::string& name, int max_steps) {
  std::string dir = temp_dir(name);
  CommandResult r = run_host("init-model --arch qwen2 --preset tiny --out " + dir + "/model --seed 3");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  std::string rows;
  for (int i = 1; i <= 8; ++i)
    rows += "{\"problem\": \"" + std::to_string(i) + "+1=?\", \"solution\": \"" + std::to_string(i + 1) + "\"}\n";
  write_file(dir + "/rows.jsonl", rows);
  write_file(dir + "/run.yaml",
             "model: " + dir + "/model\n"
             "dataset: [" + dir + "/rows.jsonl]\n"
             "train_type: full\n"
             "reward_funcs: [repetition, format]\n"
             "repetition_n_grams: 1\n"
             "plugin_args: {repetition: {unit: token}}\n"
             "num_generations: 4\n"
             "per_device_train_batch_size: 2\n"
             "gradient_accumulation_steps: 2\n"
             "max_completion_length: 10\n"
             "top_k: 1\n"
             "max_steps: " + std::to_string(max_steps) + "\n"
             "logging_steps: 1\n"
             "learning_rate: 5.0e-2\n"
             "log_completions: true\n"
             "report_to: []\n");
  return dir;
}

std::string external_args(const RolloutProcess& server) {
  return " --sampler external_server --sampler_args '{\"base_url\": \"" + server.base_url() +
         "\", \"group_port\": " + std::to_string(free_port()) + ", \"comm_timeout_s\": 20}'";
}

// The log-probabilities of the greedy completion of `prompt`, as the server
// computes them and as the engine does with `model_dir`'s weights: unlike
// the ids of a tiny random model's completion, they move with every update.
std::vector<float> server_logprobs(const RolloutProcess& server, const std::vector<int32_t>& prompt) {
  auto r = server.post("/generate/", {{"prompts", {prompt}}, {"temperature", 0.0}, {"max_tokens", 10}, {"logprobs", 0}});
  EXPECT_EQ(r.status, 200) << r.raw;
  std::vector<float> out;
  for (const auto& position : r.body["logprobs"][0]) out.push_back(position[0].get<float>());
  return out;
}
std::vector<float> engine_logprobs(const std::string& model_dir, const std::vector<int32_t>& prompt) {
  grpo::model::Engine engine(grpo::model::load_model(model_dir));
  grpo::model::SamplingParams p;
  p.top_k = 1;
  p.max_new_tokens = 10;
  const int32_t eos = *grpo::tok::Tokenizer::from_dir(model_dir).eos_id();
  return engine.generate({{prompt, 1, 0, {eos}}}, p)[0].logprobs;
}

double max_difference(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return 1e9;
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, static_cast<double>(std::abs(a[i] - b[i])));
  return d;
}

}  // namespace

TEST(TrainExternal, TheSameYamlGivesTheSameGreedyRunWithEitherSampler) {
  const std::string dir = setup_run("train_external_same", 2);
  CommandResult native = run_host("train --config " + dir + "/run.yaml --output_dir " + dir + "/native");
  ASSERT_EQ(native.exit_code, 0) << native.output;
  RolloutProcess server(dir + "/model");
  ASSERT_NE(server.port(), 0);
  CommandResult ext =
      run_host("train --config " + dir + "/run.yaml --output_dir " + dir + "/external" + external_args(server));
  ASSERT_EQ(ext.exit_code, 0) << ext.output;

  auto want = read_jsonl(dir + "/native/completions.jsonl"), got = read_jsonl(dir + "/external/completions.jsonl");
  ASSERT_EQ(got.size(), 8u);  // 2 steps x 1 prompt x G=4
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    for (const char* key : {"step", "prompt", "completion", "completion_tokens", "finish_reason", "reward"})
      EXPECT_EQ(got[i][key], want[i][key]) << "completion " << i << " " << key;
  auto log_want = read_jsonl(dir + "/native/logging.jsonl"), log_got = read_jsonl(dir + "/external/logging.jsonl");
  ASSERT_EQ(log_got.size(), 2u);
  ASSERT_EQ(log_want.size(), 2u);
  for (size_t s = 0; s < 2; ++s) {
    EXPECT_NEAR(log_got[s]["loss"].get<double>(), log_want[s]["loss"].get<double>(), 1e-5) << s;
    EXPECT_GT(log_got[s]["time/weight_sync"].get<double>(), 0.0) << "the update is pushed after every step";
    EXPECT_EQ(log_want[s]["time/weight_sync"].get<double>(), 0.0) << "the native sampler aliases the weights";
    std::printf("step %zu: weight push %.3f s\n", s + 1, log_got[s]["time/weight_sync"].get<double>());
  }
  // The server now holds the last update: it scores as the final checkpoint does, not as the initial model.
  const std::vector<int32_t> probe = {49, 43, 49, 61, 63};
  const auto final_lp = engine_logprobs(dir + "/external/checkpoint-2", probe);
  ASSERT_GT(max_difference(final_lp, engine_logprobs(dir + "/model", probe)), 1e-3) << "the updates must matter";
  EXPECT_LT(max_difference(server_logprobs(server, probe), final_lp), 1e-4);
  EXPECT_GT(server.get("/health/").body.value("tensors_received", 0), 0);
}

TEST(TrainExternal, TwoTrainingProcessesShareOneServerAndTrainAsOneProcess) {
  // NPROC_PER_NODE=2 against one server: both ranks sample their share on it,
  // rank 0 alone pushes each update, and the run equals one process with the
  // whole batch against its own server.
  const std::string dir = setup_run("train_external_two", 2);
  RolloutProcess one_server(dir + "/model"), shared(dir + "/model");
  ASSERT_NE(one_server.port(), 0);
  ASSERT_NE(shared.port(), 0);
  CommandResult one = run_host("train --config " + dir + "/run.yaml --per_device_train_batch_size 4 --output_dir " +
                               dir + "/one" + external_args(one_server));
  ASSERT_EQ(one.exit_code, 0) << one.output;
  CommandResult two = run_host("train --config " + dir + "/run.yaml --per_device_train_batch_size 2 --output_dir " +
                                   dir + "/two" + external_args(shared),
                               "NPROC_PER_NODE=2");
  ASSERT_EQ(two.exit_code, 0) << two.output;
  auto want = read_jsonl(dir + "/one/completions.jsonl"), got = read_jsonl(dir + "/two/completions.jsonl");
  ASSERT_EQ(got.size(), 16u);  // 2 steps x 2 prompts x G=4
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i]["completion"], want[i]["completion"]) << i;
  auto log_want = read_jsonl(dir + "/one/logging.jsonl"), log_got = read_jsonl(dir + "/two/logging.jsonl");
  ASSERT_EQ(log_got.size(), 2u);
  for (size_t s = 0; s < 2; ++s) EXPECT_NEAR(log_got[s]["loss"].get<double>(), log_want[s]["loss"].get<double>(), 1e-5);
  // Both servers got the same pushes (the first weights and one per step) and hold the same weights.
  EXPECT_EQ(shared.get("/health/").body.value("tensors_received", 0),
            one_server.get("/health/").body.value("tensors_received", 0));
  const std::vector<int32_t> probe = {49, 43, 49, 61, 63};
  EXPECT_LT(max_difference(server_logprobs(shared, probe), server_logprobs(one_server, probe)), 1e-5);
}

TEST(TrainExternal, UseVllmServerFlagsSelectTheExternalSampler) {
  const std::string dir = setup_run("train_external_flags", 1);
  RolloutProcess server(dir + "/model");
  ASSERT_NE(server.port(), 0);
  CommandResult r = run_host("train --config " + dir + "/run.yaml --output_dir " + dir +
                             "/out --use_vllm true --vllm_mode server --vllm_server_host 127.0.0.1 "
                             "--vllm_server_port " + std::to_string(server.port()) +
                             " --sampler_args '{\"group_port\": " + std::to_string(free_port()) + "}'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("rollout server at " + server.base_url() + " is up"), std::string::npos) << r.output;
  EXPECT_NE(read_file(dir + "/out/args.yaml").find("sampler: external_server"), std::string::npos);
  EXPECT_EQ(server.get("/health/").body.value("requests", 0), 1) << "step 1 sampled on the server";
}

TEST(TrainExternal, NoServerFailsAfterTheTimeoutNamingTheUrl) {
  const std::string dir = setup_run("train_external_none", 1);
  const int port = free_port();
  const auto t0 = std::chrono::steady_clock::now();
  CommandResult r = run_host("train --config " + dir + "/run.yaml --output_dir " + dir +
                             "/out --use_vllm true --vllm_mode server --vllm_server_host 127.0.0.1 "
                             "--vllm_server_port " + std::to_string(port) + " --vllm_server_timeout 2");
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("http://127.0.0.1:" + std::to_string(port) + "/health/ within 2 s"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("--vllm_server_timeout"), std::string::npos) << r.output;
  EXPECT_LT(took, 60.0);
}

TEST(TrainExternal, AServerKilledMidRunStopsTheRunWithACheckpoint) {
  const std::string dir = setup_run("train_external_killed", 500);
  auto server = std::make_unique<RolloutProcess>(dir + "/model");
  ASSERT_NE(server->port(), 0);
  const std::string url = server->base_url();
  CommandResult r;
  std::atomic<bool> finished{false};
  std::thread run([&] {  // `timeout`: a hang fails the test instead of stalling it
    r = run_host("train --config " + dir + "/run.yaml --output_dir " + dir + "/out" + external_args(*server),
                 "timeout 240");
    finished = true;
  });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < deadline && !finished &&
         (!fs::exists(dir + "/out/logging.jsonl") || read_jsonl(dir + "/out/logging.jsonl").size() < 2))
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  server.reset();  // SIGTERM: the server exits while the trainer is mid-run
  const auto killed = std::chrono::steady_clock::now();
  run.join();
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_LT(took, 60.0) << "no hang after the server is gone";
  EXPECT_NE(r.output.find(url), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("training stopped at step"), std::string::npos) << r.output;
  int64_t step = -1;
  ASSERT_TRUE(fs::exists(dir + "/out")) << r.output;
  for (const auto& e : fs::directory_iterator(dir + "/out"))
    if (e.path().filename().string().rfind("checkpoint-", 0) == 0)
      step = std::stoll(e.path().filename().string().substr(11));
  ASSERT_GE(step, 2) << r.output;
  EXPECT_LT(step, 500);
  auto state = nlohmann::json::parse(read_file(dir + "/out/checkpoint-" + std::to_string(step) + "/trainer_state.json"));
  EXPECT_EQ(state["global_step"], step);
  EXPECT_NE(r.output.find("checkpoint-" + std::to_string(step)), std::string::npos) << r.output;
}

TEST(TrainExternal, LoraPushesTheMergedWeights) {
  const std::string dir = setup_run("train_external_lora", 2);
  RolloutProcess server(dir + "/model");
  ASSERT_NE(server.port(), 0);
  CommandResult ext = run_host("train --config " + dir + "/run.yaml --train_type lora --lora_rank 4 " +
                               "--merge_lora true --warmup_ratio 0 --top_k 0 --temperature 1.0 --output_dir " + dir +
                               "/lora" + external_args(server));
  ASSERT_EQ(ext.exit_code, 0) << ext.output;
  // Sampled (not greedy), so groups differ and the adapters move. The server
  // holds W + scaling * B A after the last step: the merged checkpoint's weights.
  const std::vector<int32_t> probe = {49, 43, 49, 61, 63};
  const auto merged = engine_logprobs(dir + "/lora/checkpoint-2/merged", probe);
  ASSERT_GT(max_difference(merged, engine_logprobs(dir + "/model", probe)), 1e-4) << "the adapters must matter";
  EXPECT_LT(max_difference(server_logprobs(server, probe), merged), 1e-4);
}

TEST(TrainExternal, AGreedyMultiTurnRunIsTheSameWithEitherSampler) {
  const std::string dir = setup_run("train_external_multi_turn", 2);
  // The tiny model's greedy turns are newlines: a newline stop string ends
  // them, so the tip scheduler answers and conversations go on.
  write_file(dir + "/run.yaml", read_file(dir + "/run.yaml") + "stop_words: [\"\\n\"]\n");
  const std::string multi_turn = " --multi_turn_scheduler math_tip_trick_multi_turn --max_turns 3";
  CommandResult native = run_host("train --config " + dir + "/run.yaml --output_dir " + dir + "/native" + multi_turn);
  ASSERT_EQ(native.exit_code, 0) << native.output;
  RolloutProcess server(dir + "/model");
  ASSERT_NE(server.port(), 0);
  CommandResult ext = run_host("train --config " + dir + "/run.yaml --output_dir " + dir + "/external" +
                               external_args(server) + multi_turn);
  ASSERT_EQ(ext.exit_code, 0) << ext.output;
  auto want = read_jsonl(dir + "/native/completions.jsonl"), got = read_jsonl(dir + "/external/completions.jsonl");
  ASSERT_EQ(got.size(), 8u);
  ASSERT_EQ(got.size(), want.size());
  size_t continued = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    for (const char* key : {"messages", "completion", "turns", "sampled_tokens", "completion_tokens", "reward"})
      EXPECT_EQ(got[i][key], want[i][key]) << "conversation " << i << " " << key;
    continued += want[i]["turns"].get<int>() > 1;
  }
  EXPECT_GT(continued, 0u) << "no conversation had a second turn: the test would compare single turns only";
  // The native engine started each second turn from the first turn's keys
  // and values (the rollout server computed them again): the same conversations.
  for (const auto& step : read_jsonl(dir + "/native/logging.jsonl"))
    EXPECT_GT(step.value("native/prefix_reused_frac", 0.0), 0.1) << step.dump();
}

// A scheduler's SIGTERM while the rollout server has stopped answering: the
// trainer drops the batch in flight, saves its last finished step and exits
// within seconds instead of waiting out the request timeout.
TEST(TrainExternal, SigtermWhileTheServerIsStalledStopsWithinSecondsAndSaves) {
  const std::string dir = setup_run("external_sigterm", 1000);
  RolloutProcess server(dir + "/model");
  ASSERT_NE(server.port(), 0);
  const std::string command = "exec " + std::string(GRPO_HOST_EXE) + " train --config " + dir +
                              "/run.yaml --output_dir " + dir + "/out" + external_args(server) + " > " + dir +
                              "/train.log 2>&1";
  const pid_t trainer = ::fork();
  if (trainer == 0) {
    ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  auto exited = [&](int seconds, int& status) {
    for (int i = 0; i < seconds * 20; ++i) {
      if (::waitpid(trainer, &status, WNOHANG) == trainer) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  };
  int status = 0;
  for (int i = 0; i < 1200 && read_jsonl(dir + "/out/logging.jsonl").size() < 2; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_GE(read_jsonl(dir + "/out/logging.jsonl").size(), 2u) << read_file(dir + "/train.log");
  server.send(SIGSTOP);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // the next call is now waiting on it
  ASSERT_FALSE(exited(0, status)) << read_file(dir + "/train.log");
  const auto signalled = std::chrono::steady_clock::now();
  ::kill(trainer, SIGTERM);
  const bool stopped = exited(30, status);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - signalled).count();
  server.send(SIGCONT);
  if (!stopped) ::kill(trainer, SIGKILL), ::waitpid(trainer, &status, 0);
  const std::string log = read_file(dir + "/train.log");
  ASSERT_TRUE(stopped) << log;
  EXPECT_LT(seconds, 10.0) << log;
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << log;
  EXPECT_NE(log.find("was still running: that batch is dropped"), std::string::npos) << log;
  std::vector<std::string> checkpoints;
  for (const auto& e : fs::directory_iterator(dir + "/out"))
    if (e.path().filename().string().rfind("checkpoint-", 0) == 0) checkpoints.push_back(e.path().string());
  ASSERT_EQ(checkpoints.size(), 1u) << log;
  const auto state = nlohmann::json::parse(read_file(checkpoints[0] + "/trainer_state.json"));
  EXPECT_GE(state["global_step"].get<int64_t>(), 2);
  EXPECT_EQ(checkpoints[0], dir + "/out/checkpoint-" + std::to_string(state["global_step"].get<int64_t>()));
  EXPECT_TRUE(fs::exists(checkpoints[0] + "/model.safetensors"));
}

namespace {

// The completions and losses of two runs of the same settings are the same.
void expect_same_run(const std::string& want_dir, const std::string& got_dir) {
  auto want = read_jsonl(want_dir + "/completions.jsonl"), got = read_jsonl(got_dir + "/completions.jsonl");
  ASSERT_EQ(got.size(), want.size());
  ASSERT_FALSE(got.empty());
  for (size_t i = 0; i < got.size(); ++i)
    for (const char* key : {"step", "prompt", "completion", "reward"})
      EXPECT_EQ(got[i][key], want[i][key]) << "completion " << i << " " << key;
  auto log_want = read_jsonl(want_dir + "/logging.jsonl"), log_got = read_jsonl(got_dir + "/logging.jsonl");
  ASSERT_EQ(log_got.size(), log_want.size());
  for (size_t s = 0; s < log_got.size(); ++s)
    EXPECT_NEAR(log_got[s]["loss"].get<double>(), log_want[s]["loss"].get<double>(), 1e-6) << s;
}

// Sampling at temperature 1, so that the completions depend on each request's seed.
const char* kSampled = " --top_k 0 --temperature 1.0";

std::string group_port_args() {
  return " --sampler_args '{\"group_port\": " + std::to_string(free_port()) + ", \"comm_timeout_s\": 20}'";
}

}  // namespace

// ms-swift's --vllm_server_host h1 h2 --vllm_server_port p1 p2: each
// generation batch is spread over both servers and every update reaches
// both in one group; since each request carries its seed, the run is the
// one a single server gives.
TEST(TrainExternal, TwoServersByHostListTrainAsOneServer) {
  const std::string dir = setup_run("train_external_two_servers", 2);
  RolloutProcess first(dir + "/model"), second(dir + "/model");
  ASSERT_NE(first.port(), 0);
  ASSERT_NE(second.port(), 0);
  CommandResult one = run_host("train --config " + dir + "/run.yaml --output_dir " + dir + "/one" + kSampled +
                               external_args(first));
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const int64_t first_requests = first.get("/health/").body.value("requests", 0);
  CommandResult two = run_host("train --config " + dir + "/run.yaml --output_dir " + dir + "/two" + kSampled +
                               " --use_vllm true --vllm_mode server --vllm_server_host 127.0.0.1 127.0.0.1 "
                               "--vllm_server_port " + std::to_string(first.port()) + " " +
                               std::to_string(second.port()) + group_port_args());
  ASSERT_EQ(two.exit_code, 0) << two.output;
  expect_same_run(dir + "/one", dir + "/two");
  EXPECT_GT(first.get("/health/").body.value("requests", 0), first_requests) << "both servers sample";
  EXPECT_GT(second.get("/health/").body.value("requests", 0), 0) << "both servers sample";
  EXPECT_GT(second.get("/health/").body.value("tensors_received", 0), 0) << "both servers get the updates";
}

// --num_infer_workers 2 with --vllm_mode server and no address: grpo-host
// starts two grpo-rollout servers, samples on them as on servers given by
// address, and stops them when the run ends.
TEST(TrainExternal, NumInferWorkersStartsServersForTheRunAndStopsThem) {
  const std::string dir = setup_run("train_external_infer_workers", 2);
  RolloutProcess server(dir + "/model");
  ASSERT_NE(server.port(), 0);
  CommandResult one = run_host("train --config " + dir + "/run.yaml --output_dir " + dir + "/one" + kSampled +
                               external_args(server));
  ASSERT_EQ(one.exit_code, 0) << one.output;
  CommandResult own = run_host("train --config " + dir + "/run.yaml --output_dir " + dir + "/own" + kSampled +
                               " --use_vllm true --vllm_mode server --num_infer_workers 2" + group_port_args());
  ASSERT_EQ(own.exit_code, 0) << own.output;
  expect_same_run(dir + "/one", dir + "/own");
  for (int i = 0; i < 2; ++i) {
    const std::string log = read_file(dir + "/own/rollout_server_" + std::to_string(i) + ".log");
    std::smatch m;
    ASSERT_TRUE(std::regex_search(log, m, std::regex("on http://127.0.0.1:([0-9]+)/"))) << log;
    EXPECT_NE(log.find("signal 15 received, stopping"), std::string::npos) << "stopped by the trainer: " << log;
    EXPECT_FALSE(port_answers(std::stoi(m[1].str()))) << "server " << i << " is still running";
  }
  // Asked for with a server address as well, it is refused, naming both.
  const auto both = run_host("train --config " + dir + "/run.yaml --output_dir " + dir + "/both" +
                             " --use_vllm true --vllm_mode server --num_infer_workers 2 --vllm_server_host 127.0.0.1");
  EXPECT_EQ(both.exit_code, 2) << both.output;
  EXPECT_NE(both.output.find("num_infer_workers 2 (--num_infer_workers) starts its own rollout servers, and a server "
                             "address is given too"),
            std::string::npos)
      << both.output;
}

// Two training processes with --num_infer_workers 2: rank 0 starts the
// servers and tells rank 1 their ports; the run equals one process with the
// whole batch on one server.
TEST(TrainExternal, TwoTrainingProcessesShareTheServersRankZeroStarts) {
  const std::string dir = setup_run("train_external_workers_two_ranks", 2);
  RolloutProcess server(dir + "/model");
  ASSERT_NE(server.port(), 0);
  CommandResult one = run_host("train --config " + dir + "/run.yaml --per_device_train_batch_size 4 --output_dir " +
                               dir + "/one" + kSampled + external_args(server));
  ASSERT_EQ(one.exit_code, 0) << one.output;
  CommandResult two = run_host("train --config " + dir + "/run.yaml --per_device_train_batch_size 2 --output_dir " +
                                   dir + "/two" + kSampled + " --use_vllm true --vllm_mode server --num_infer_workers 2" +
                                   group_port_args(),
                               "NPROC_PER_NODE=2");
  ASSERT_EQ(two.exit_code, 0) << two.output;
  expect_same_run(dir + "/one", dir + "/two");
  // Rank 0 alone started them: two servers in all, both announced by rank 0.
  const std::regex started(R"(\[rank ([0-9])\] \[info\] rollout server [0-9] of 2 listens at)");
  std::vector<std::string> ranks;
  for (auto it = std::sregex_iterator(two.output.begin(), two.output.end(), started); it != std::sregex_iterator(); ++it)
    ranks.push_back((*it)[1].str());
  EXPECT_EQ(ranks, (std::vector<std::string>{"0", "0"})) << two.output;
}

// A trainer killed with SIGKILL cannot stop its servers: they end with it
// (grpo-rollout asks the kernel for a signal when its parent dies).
TEST(TrainExternal, ServersStartedByATrainerEndWhenItIsKilled) {
  const std::string dir = setup_run("train_external_workers_kill", 1000);
  const std::string command = "exec " + std::string(GRPO_HOST_EXE) + " train --config " + dir +
                              "/run.yaml --output_dir " + dir + "/out --use_vllm true --vllm_mode server "
                              "--num_infer_workers 2" + group_port_args() + " > " + dir + "/train.log 2>&1";
  const pid_t trainer = ::fork();
  if (trainer == 0) {
    ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  for (int i = 0; i < 1200 && read_jsonl(dir + "/out/logging.jsonl").empty(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  std::vector<int> ports;
  for (int i = 0; i < 2; ++i) {
    const std::string log = read_file(dir + "/out/rollout_server_" + std::to_string(i) + ".log");
    std::smatch m;
    if (std::regex_search(log, m, std::regex("on http://127.0.0.1:([0-9]+)/"))) ports.push_back(std::stoi(m[1].str()));
  }
  ::kill(trainer, SIGKILL);
  int status = 0;
  ::waitpid(trainer, &status, 0);
  ASSERT_EQ(ports.size(), 2u) << read_file(dir + "/train.log");
  for (int port : ports) {
    bool answers = true;
    for (int i = 0; i < 200 && answers; ++i) {
      answers = port_answers(port);
      if (answers) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    EXPECT_FALSE(answers) << "the server on port " << port << " outlived its trainer by 10 s";
  }
}
