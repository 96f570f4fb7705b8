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
// times a GRPO step at a real model's shape (random weights, the Qwen3
// tokenizer of tests/data): 2 prompts x G 8, 64 new tokens, full-vocabulary
// sampling, beta 0, every weight trained in that dtype, against the same step
// taken in the same run by a peer on the torch wheel LibTorch came from: on
// the CPU the plain PyTorch peer (bench/peer/qwen2_peer.py step), on a GPU
// Hugging Face transformers' own model class, its generate and TRL's clipped
// loss (bench/peer/hf_grpo_step.py).
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <algorithm>
#include <map>
#include <unistd.h>
#include <string>

#include <nlohmann/json.hpp>

#include "peer_process.h"
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

// The GRPO step at a real shape, ours and the peer's; returns the exit status.
int real_shape_step(const std::string& shape, const std::string& dtype, const std::string& device, int steps,
                    int threads, const fs::path& work) {
  const bool gpu = device != "cpu";
  const std::string host = GRPO_HOST_EXE, src = GRPO_SOURCE_DIR;
  const fs::path tokenizer = work / "tokenizer", model = work / "model";
  fs::create_directories(tokenizer);
  fs::copy_file(src + "/tests/data/qwen3-tokenizer.json", tokenizer / "tokenizer.json");
  fs::copy_file(src + "/tests/data/qwen3-tokenizer_config.json", tokenizer / "tokenizer_config.json");
  if (run(host + " init-model --arch qwen2 --preset " + shape + " --tokenizer " + tokenizer.string() + " --out " +
          model.string() + " --seed 1") != 0)
    return 1;
  const std::string out = (work / "run").string();
  const std::string train = host + " train --model " + model.string() + " --dataset " + src +
                            "/configs/quickstart/train.jsonl --train_type full --torch_dtype " + dtype +
                            " --reward_funcs format --num_generations 8 "
                            "--per_device_train_batch_size 16 "
                            "--gradient_accumulation_steps 1 --max_completion_length 64 --temperature 1 --top_k 0 "
                            "--top_p 1 --beta 0 --learning_rate 1e-6 --gradient_checkpointing false --max_steps " +
                            std::to_string(steps) + " --logging_steps 1 --save_steps 100000 --log_completions false "
                            "--report_to none --num_threads " + std::to_string(threads) + " --output_dir " + out +
                            (gpu ? "" : " --use_cpu true");
  std::map<std::string, double> ours;
  int n = 0;
  if (!run_and_sum(train, out, ours, n)) return 1;
  if (gpu && !ours.count("memory/allocated_gb")) {  // logged on a GPU only
    std::fprintf(stderr, "grpo-host trained on the CPU: this process sees no GPU\n");
    return 2;
  }
  // --prompt 17: about the chat-formatted quickstart prompts' length in the Qwen3 tokenizer.
  const std::string shape_args = " --config " + (model / "config.json").string() +
                                 " --prompts 2 --generations 8 --prompt 17 --new_tokens 64 --runs " + std::to_string(n) +
                                 " --threads " + std::to_string(threads) + " --dtype " + dtype;
  const std::string peer_cmd = std::string(GRPO_TORCH_PYTHON) + " " + src +
                               (gpu ? "/bench/peer/hf_grpo_step.py --device " + device : "/bench/peer/qwen2_peer.py step") +
                               shape_args;
  // The peer's phases under the same names: log-probs and loss, backward, clipping and AdamW.
  std::map<std::string, double> peer;
  std::vector<double> peer_steps;
  int peer_n = 0;
  for (const nlohmann::json& j : grpo::bench::peer_lines(peer_cmd)) {
    if (!j.contains("step_s")) continue;
    peer_steps.push_back(j["step_s"].get<double>());
    peer["step_time"] += j["step_s"].get<double>();
    peer["time/generate"] += j["generate_s"].get<double>();
    peer["time/logprob"] += j["forward_s"].get<double>();
    peer["time/backward"] += j["backward_s"].get<double>();
    peer["time/optimizer"] += j["optimizer_s"].get<double>();
    peer["peak_gb"] = std::max(peer["peak_gb"], j.value("peak_gb", 0.0));
    ++peer_n;
  }
  std::printf("\nGRPO step at %s's shape (2 prompts x G 8, 64 new tokens, %s, beta 0) on %s, %d steps after the first\n",
              shape.c_str(), dtype.c_str(), device.c_str(), n);
  const char* phases[] = {"step_time", "time/generate", "time/logprob", "time/backward", "time/optimizer"};
  std::printf("%-10s %10s %10s %14s %10s %10s\n", "", "step s", "generate s", "log-probs s", "backward s",
              "optimizer s");
  const auto row = [&](const char* who, std::map<std::string, double>& t, int runs) {
    std::printf("%-10s", who);
    for (const char* k : phases) std::printf(" %10.2f", t[k] / runs);
    std::printf("\n");
  };
  row("grpo", ours, n);
  if (peer_n == 0) {
    std::fprintf(stderr, "the peer did not run (it runs on the torch wheel LibTorch came from: scripts/setup.sh installs it); "
                         "rerun its command above to see why\n");
    return 1;
  }
  row("peer", peer, peer_n);
  std::printf("%-10s", "peer/grpo");
  for (const char* k : phases) std::printf(" %9.2fx", (peer[k] / peer_n) / (ours[k] / n));
  std::printf("\n(grpo's optimizer phase includes gradient clipping, as the peer's does)\n");
  if (gpu) {  // each phase's peak as logged, the largest of the run; the peer's over its whole step
    double ours_peak = 0;
    for (const char* k : {"memory/generation_peak_gb", "memory/logprob_peak_gb", "memory/backward_peak_gb",
                          "memory/optimizer_peak_gb"})
      for (double v : grpo::bench::per_step(out, k)) ours_peak = std::max(ours_peak, v);
    std::printf("peak device memory, GiB: grpo %.2f, peer %.2f\n", ours_peak, peer["peak_gb"]);
  }
  // Ours settles after the second step: the first allocates AdamW's state, the
  // second grows the heap to its peak, from then on nothing is faulted in.
  std::printf("each step, s: grpo");
  for (double t : grpo::bench::per_step(out, "step_time")) std::printf(" %.2f", t);
  std::printf(" (the first included); peer");
  for (double t : peer_steps) std::printf(" %.2f", t);
  std::printf(" (after its warm-up step)\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model, shape, dtype = "float32", device = "cpu";
  int steps = 6, threads = 2;
  for (int i = 1; i + 1 < argc; ++i) {
    std::string a = argv[i];
    if (a == "--model") model = argv[++i];
    else if (a == "--steps") steps = std::atoi(argv[++i]);
    else if (a == "--threads") threads = std::atoi(argv[++i]);
    else if (a == "--shape") shape = argv[++i];
    else if (a == "--dtype") dtype = argv[++i];
    else if (a == "--device") device = argv[++i];
  }
  const fs::path work = fs::temp_directory_path() / ("grpo_bench_step_" + std::to_string(getpid()));
  fs::create_directories(work);
  if (!shape.empty()) {
    const int status = real_shape_step(shape, dtype, device, steps, threads, work);
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
                            " --logging_steps 1 --save_steps 100000 --log_completions false --report_to none "
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
