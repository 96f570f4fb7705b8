// Where a GRPO step's time goes on the quickstart's model and settings:
// generate, reward, logprob, backward, optimizer, weight sync, and
// everything else (the step's own bookkeeping), each as a fraction of the
// measured step time, from one run of `grpo-host train`; then the same run
// with --async_generate (the next batch sampled while this one trains) and
// the ratio of their step times.
//   bench_step [--model DIR] [--steps 6] [--threads 2]
// Without --model a fresh `small` preset model is created (untrained, so its
// completions run to max_completion_length: a generation-heavy step).
//   bench_step --shape qwen2.5-0.5b [--steps 3] [--dtype float32|bfloat16] [--device cpu|cuda]
//              [--prompts 2] [--generations 8] [--new_tokens 64] [--train_type full|lora] [--lora_rank 8]
//              [--beta 0] [--gradient_checkpointing false] [--offload_optimizer false] [--peer true]
// times a GRPO step at a real model's shape (random weights, the Qwen3
// tokenizer of tests/data): by default 2 prompts x G 8, 64 new tokens,
// full-vocabulary sampling, beta 0, every weight trained in that dtype;
// the seed's single-GPU shape is --shape qwen2.5-7b --train_type lora
// --prompts 1 --generations 4 --new_tokens 1024 --beta 0.04
// --gradient_checkpointing true. The same step is taken in the same run by a
// peer on the torch wheel LibTorch came from: on the CPU the plain PyTorch
// peer (bench/peer/qwen2_peer.py step, full training only), on a GPU Hugging
// Face transformers' own model class, its generate, peft's LoRA and TRL's
// clipped loss (bench/peer/hf_grpo_step.py) — shape_step.cpp.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <algorithm>
#include <map>
#include <unistd.h>
#include <string>

#include <nlohmann/json.hpp>

#include "shape_step.h"
#include "train_runs.h"

namespace fs = std::filesystem;

namespace {

using grpo::bench::run;

// Runs one training command and sums each metric over the steps after the first.
bool run_and_sum(const std::string& cmd, const std::string& out, std::map<std::string, double>& sums, int& n) {
  if (run(cmd) != 0) {
    std::fprintf(stderr, "grpo-host train failed; rerun the command above to see why\n");
    return false;
  }
  sums = grpo::bench::sums_after_first_step(out, n);
  if (n < 1) std::fprintf(stderr, "need at least 2 steps\n");
  return n >= 1;
}

}  // namespace

int main(int argc, char** argv) {
  // Line by line into a file too: a deadline's SIGTERM loses no finished line.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  std::string model;
  grpo::bench::ShapeStep shape;
  int& steps = shape.steps;
  int& threads = shape.threads;
  const auto flag = [](const char* v) {
    if (std::string(v) != "true" && std::string(v) != "false") {
      std::fprintf(stderr, "bench_step: a boolean option takes true or false, not '%s'\n", v);
      std::exit(2);
    }
    return std::string(v) == "true";
  };
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (i + 1 == argc) {
      std::fprintf(stderr, "bench_step: %s needs a value\n", a.c_str());
      return 2;
    }
    const char* v = argv[++i];
    if (a == "--model") model = v;
    else if (a == "--steps") steps = std::atoi(v);
    else if (a == "--threads") threads = std::atoi(v);
    else if (a == "--shape") shape.shape = v;
    else if (a == "--dtype") shape.dtype = v;
    else if (a == "--device") shape.device = v;
    else if (a == "--prompts") shape.prompts = std::atoi(v);
    else if (a == "--generations") shape.generations = std::atoi(v);
    else if (a == "--new_tokens") shape.new_tokens = std::atoi(v);
    else if (a == "--train_type") shape.train_type = v;
    else if (a == "--lora_rank") shape.lora_rank = std::atoi(v);
    else if (a == "--beta") shape.beta = std::atof(v);
    else if (a == "--gradient_checkpointing") shape.gradient_checkpointing = flag(v);
    else if (a == "--offload_optimizer") shape.offload_optimizer = flag(v);
    else if (a == "--peer") shape.peer = flag(v);
    else {
      std::fprintf(stderr, "bench_step: unknown option %s (see the comment atop bench/step_breakdown.cpp)\n", a.c_str());
      return 2;
    }
  }
  const fs::path work = fs::temp_directory_path() / ("grpo_bench_step_" + std::to_string(getpid()));
  fs::create_directories(work);
  if (!shape.shape.empty()) {
    const int status = grpo::bench::shape_step(shape, work);
    fs::remove_all(work);
    return status;
  }
  const std::string host = GRPO_HOST_EXE;
  if (model.empty()) {
    model = (work / "model").string();
    if (run(host + " init-model --arch qwen2 --preset small --out " + model + " --seed 1") != 0) return 1;
  }
  // The quickstart's GRPO settings; one log line per step, nothing else written.
  const std::string train = host + " train --config " + GRPO_SOURCE_DIR + "/configs/quickstart/grpo.yaml --model " +
                            model + " --dataset " + GRPO_SOURCE_DIR + "/configs/quickstart/train.jsonl --max_steps " +
                            std::to_string(steps) +
                            " --logging_steps 1 --save_strategy no --log_completions false --report_to none "
                            "--num_threads " + std::to_string(threads);
  std::map<std::string, double> sync, async;
  int n = 0;
  if (!run_and_sum(train + " --output_dir " + (work / "sync").string(), (work / "sync").string(), sync, n) ||
      !run_and_sum(train + " --async_generate true --output_dir " + (work / "async").string(),
                   (work / "async").string(), async, n))
    return 1;
  const double step = sync["step_time"];
  double parts = 0;
  std::printf("\nGRPO step breakdown, quickstart settings, %d steps after the first, %d threads\n", n, threads);
  std::printf("%-18s %10s %10s\n", "phase", "s/step", "fraction");
  for (const char* k : {"time/generate", "time/reward", "time/logprob", "time/backward", "time/optimizer",
                        "time/weight_sync"}) {
    parts += sync[k];
    std::printf("%-18s %10.4f %10.3f\n", k, sync[k] / n, sync[k] / step);
  }
  std::printf("%-18s %10.3f %10.3f\n", "everything else", (step - parts) / n, (step - parts) / step);
  std::printf("%-18s %10.3f %10s   (%.0f completion tokens/s)\n", "step", step / n, "1.000",
              sync["num_tokens"] / step);
  std::printf("\nasync_generate: %.3f s/step (waiting for generation %.3f s/step, weight sync %.4f s/step): "
              "%.2fx the synchronous step time\n",
              async["step_time"] / n, async["time/generate_wait"] / n, async["time/weight_sync"] / n,
              async["step_time"] / step);
  fs::remove_all(work);
  return 0;
}
