// Data parallel training on this machine, measured in one run:
//  1. all_reduce over two ranks (two processes, Gloo on 127.0.0.1) in ms per
//     MB, next to a memory copy of the same buffer: what a gradient bucket
//     costs against the cheapest thing one could do with it;
//  2. the GRPO step with the quickstart's settings on one process with two
//     threads against two processes (NPROC_PER_NODE=2) with one thread each,
//     the same generation batch, and the time the second spends exchanging
//     samples and averaging gradients; the two processes once with 25 MB
//     buckets (the model's 12.8 MB of gradients are one bucket, reduced
//     after backward) and once with 1 MB buckets (16, each started from
//     backward as soon as its gradients are final).
//   bench_distributed [--model DIR] [--steps 6]
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "dist/launcher.h"
#include "dist/world.h"
#include "train_runs.h"

namespace fs = std::filesystem;

namespace {

using grpo::bench::run;

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Rank `rank` of two: all_reduce of each size `reps` times; rank 0 prints.
void all_reduce_rank(int rank, int port) {
  grpo::dist::RankEnv env;
  env.rank = rank;
  env.world_size = 2;
  env.local_rank = rank;
  env.local_world_size = 2;
  env.master_port = port;
  auto world = grpo::dist::World::join(env, std::chrono::milliseconds(60000));
  if (rank == 0) std::printf("\nall_reduce over 2 processes (Gloo, 127.0.0.1) vs a memory copy, float32\n%-8s %12s %12s %8s\n",
                             "MB", "all_reduce", "copy", "ratio");
  for (int mb : {1, 4, 16, 64}) {
    const int64_t n = int64_t{mb} << 18;  // floats
    std::vector<at::Tensor> t{at::ones({n})};
    at::Tensor dst = at::empty({n});
    const int reps = mb >= 16 ? 5 : 20;
    world->all_reduce_sum(t, grpo::dist::Channel::Train, "warm-up");
    dst.copy_(t[0]);
    double t0 = now_s();
    for (int i = 0; i < reps; ++i) world->all_reduce_sum(t, grpo::dist::Channel::Train, "bench");
    const double reduce_s = (now_s() - t0) / reps;
    t0 = now_s();
    for (int i = 0; i < reps; ++i) dst.copy_(t[0]);
    const double copy_s = (now_s() - t0) / reps;
    if (rank == 0)
      std::printf("%-8d %9.3f ms/MB %7.4f ms/MB %7.0fx\n", mb, reduce_s * 1e3 / mb, copy_s * 1e3 / mb, reduce_s / copy_s);
  }
  world->barrier(grpo::dist::Channel::Train, "the end");
}

// Per-step means over the steps after the first.
std::map<std::string, double> step_means(const std::string& out) {
  int n = 0;
  std::map<std::string, double> sums = grpo::bench::sums_after_first_step(out, n);
  for (auto& [k, v] : sums) v /= std::max(1, n);
  return sums;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model;
  int steps = 6;
  for (int i = 1; i + 1 < argc; ++i) {
    std::string a = argv[i];
    if (a == "--model") model = argv[++i];
    else if (a == "--steps") steps = std::atoi(argv[++i]);
  }
  // 1. all_reduce: this process is rank 0, a fork of it rank 1 (before any
  // thread pool exists, so the fork is clean).
  const int port = grpo::dist::free_port("127.0.0.1");
  const pid_t child = fork();
  if (child == 0) {
    all_reduce_rank(1, port);
    _exit(0);
  }
  all_reduce_rank(0, port);
  waitpid(child, nullptr, 0);

  // 2. The step, both ways.
  const fs::path work = fs::temp_directory_path() / ("grpo_bench_distributed_" + std::to_string(getpid()));
  fs::create_directories(work);
  const std::string host = GRPO_HOST_EXE;
  if (model.empty()) {
    model = (work / "model").string();
    if (run(host + " init-model --arch qwen2 --preset small --out " + model + " --seed 1") != 0) return 1;
  }
  const std::string train = host + " train --config " + GRPO_SOURCE_DIR + "/configs/quickstart/grpo.yaml --model " +
                            model + " --dataset " + GRPO_SOURCE_DIR + "/configs/quickstart/train.jsonl --max_steps " +
                            std::to_string(steps) + " --logging_steps 1 --save_strategy no --log_completions false "
                            "--report_to none";
  const std::string one = (work / "one").string(), two = (work / "two").string(), small = (work / "small").string();
  const std::string two_procs = "NPROC_PER_NODE=2 " + train + " --num_threads 1 --per_device_train_batch_size 8 ";
  if (run(train + " --num_threads 2 --per_device_train_batch_size 16 --output_dir " + one) != 0 ||
      run(two_procs + "--output_dir " + two) != 0 || run(two_procs + "--ddp_bucket_cap_mb 1 --output_dir " + small) != 0) {
    std::fprintf(stderr, "grpo-host train failed; rerun the command above to see why\n");
    return 1;
  }
  auto a = step_means(one), b = step_means(two), c = step_means(small);
  std::printf("\nGRPO step, quickstart settings (32 completions per step), %d steps after the first\n", steps - 1);
  std::printf("%-40s %8s %9s %9s %9s %10s %12s\n", "", "s/step", "generate", "backward", "samples", "gradients",
              "bwd + grads");
  std::printf("%-40s %8.3f %9.3f %9.3f %9s %10s %12.3f\n", "1 process x 2 threads", a["step_time"],
              a["time/generate"], a["time/backward"], "-", "-", a["time/backward"]);
  for (auto& [name, m] : {std::pair<const char*, std::map<std::string, double>&>{"2 processes x 1 thread, 25 MB buckets", b},
                          {"2 processes x 1 thread, 1 MB buckets", c}})
    std::printf("%-40s %8.3f %9.3f %9.3f %9.4f %10.4f %12.3f\n", name, m["step_time"], m["time/generate"],
                m["time/backward"], m["time/gather"], m["time/grad_sync"], m["time/backward"] + m["time/grad_sync"]);
  std::printf("2 processes / 1 process step time: %.2fx (25 MB buckets), %.2fx (1 MB)\n", b["step_time"] / a["step_time"],
              c["step_time"] / a["step_time"]);
  fs::remove_all(work);
  return 0;
}
