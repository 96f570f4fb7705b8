#include "shape_step.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <vector>

#include <nlohmann/json.hpp>

#include "peer_process.h"
#include "train_runs.h"

namespace fs = std::filesystem;

namespace grpo::bench {

namespace {

// About the chat-formatted quickstart prompts' length in the Qwen3 tokenizer:
// the peer's prompt length, and the prompt part of the FLOPs counted.
constexpr int kPromptTokens = 17;

// Model FLOPs of one forward pass over a row of `prompt` + `completion`
// tokens: every linear layer's matmuls on each token, the lm_head on the
// completion's (the log-probs need no other), and causal attention's two
// products (QK^T and PV, half the square each).
double forward_flops(const nlohmann::json& c, double prompt, double completion) {
  const double H = c["hidden_size"], I = c["intermediate_size"], L = c["num_hidden_layers"],
               heads = c["num_attention_heads"], kv = c["num_key_value_heads"], V = c["vocab_size"];
  const double D = c.contains("head_dim") && c["head_dim"].is_number() ? c["head_dim"].get<double>() : H / heads;
  const double linear = L * (2 * H * heads * D + 2 * H * kv * D + 3 * H * I), S = prompt + completion;
  return 2 * linear * S + 2 * V * H * completion + 2 * L * heads * D * S * S;
}

// Passes over the batch the training half needs: the reference's forward
// (beta > 0), the policy's forward and its backward, which is two forwards'
// worth for full training (gradients of activations and of weights) and one
// under LoRA (of activations only; the adapters' own are negligible).
// Recomputation under gradient checkpointing is not counted (model FLOPs).
double training_flops(const ShapeStep& s, const nlohmann::json& config, double completion_tokens_per_row) {
  const double passes = (s.beta > 0 ? 1 : 0) + 1 + (s.train_type == "lora" ? 1 : 2);
  return passes * s.prompts * s.generations * forward_flops(config, kPromptTokens, completion_tokens_per_row);
}

struct StepTimes {  // per step, seconds
  double step = 0, generate = 0, logprob = 0, backward = 0, optimizer = 0, tokens = 0, peak_gb = 0;
  double train() const { return logprob + backward + optimizer; }
};

void print_row(const char* who, const StepTimes& t, double flops, double peak_flops) {
  std::printf("%-10s %9.2f %11.2f %12.2f %11.2f %12.2f %10.0f %9.1f%%\n", who, t.step, t.generate, t.logprob,
              t.backward, t.optimizer, t.tokens / t.step, 100 * flops / t.train() / peak_flops);
}

std::string train_command(const ShapeStep& s, const fs::path& model, const std::string& out) {
  const std::string src = GRPO_SOURCE_DIR;
  std::string cmd = std::string(GRPO_HOST_EXE) + " train --model " + model.string() + " --dataset " + src +
                    "/configs/quickstart/train.jsonl --torch_dtype " + s.dtype + " --reward_funcs format" +
                    " --num_generations " + std::to_string(s.generations) + " --per_device_train_batch_size " +
                    std::to_string(s.prompts * s.generations) + " --gradient_accumulation_steps 1" +
                    " --max_completion_length " + std::to_string(s.new_tokens) +
                    " --temperature 1 --top_k 0 --top_p 1 --beta " + std::to_string(s.beta) +
                    " --learning_rate 1e-6 --gradient_checkpointing " + (s.gradient_checkpointing ? "true" : "false") +
                    " --train_type " + s.train_type + " --max_steps " + std::to_string(s.steps) +
                    " --logging_steps 1 --save_strategy no --log_completions false --report_to none --num_threads " +
                    std::to_string(s.threads) + " --output_dir " + out;
  if (s.train_type == "lora")
    cmd += " --lora_rank " + std::to_string(s.lora_rank) + " --lora_alpha 32 --target_modules all-linear";
  if (s.offload_optimizer) cmd += " --offload_optimizer true";
  if (s.device == "cpu") cmd += " --use_cpu true";
  return cmd;
}

}  // namespace

int shape_step(const ShapeStep& s, const fs::path& work) {
  const bool gpu = s.device != "cpu";
  if (!gpu && s.peer && (s.train_type != "full" || s.beta > 0 || s.gradient_checkpointing)) {
    std::fprintf(stderr, "the CPU peer (bench/peer/qwen2_peer.py) trains every weight with beta 0 and no gradient "
                         "checkpointing: give those, or --peer false\n");
    return 2;
  }
  const std::string host = GRPO_HOST_EXE, src = GRPO_SOURCE_DIR;
  const fs::path tokenizer = work / "tokenizer", model = work / "model";
  fs::create_directories(tokenizer);
  fs::copy_file(src + "/tests/data/qwen3-tokenizer.json", tokenizer / "tokenizer.json");
  fs::copy_file(src + "/tests/data/qwen3-tokenizer_config.json", tokenizer / "tokenizer_config.json");
  // Written in the run's dtype and drawn on its device: 7B's draws on the CPU would take minutes.
  if (run(host + " init-model --arch qwen2 --preset " + s.shape + " --tokenizer " + tokenizer.string() + " --out " +
          model.string() + " --seed 1 --torch_dtype " + s.dtype + " --device " + s.device) != 0)
    return 1;
  const nlohmann::json config = nlohmann::json::parse(std::ifstream(model / "config.json"));
  const std::string out = (work / "run").string();
  if (run(train_command(s, model, out)) != 0) {
    std::fprintf(stderr, "grpo-host train failed; rerun the command above to see why\n");
    return 1;
  }
  int n = 0;
  std::map<std::string, double> sums = sums_after_first_step(out, n);
  if (n < 1) {
    std::fprintf(stderr, "need at least 2 steps (--steps)\n");
    return 1;
  }
  if (gpu && !sums.count("memory/allocated_gb")) {  // logged on a GPU only
    std::fprintf(stderr, "grpo-host trained on the CPU: this process sees no GPU\n");
    return 2;
  }
  StepTimes ours{sums["step_time"] / n, sums["time/generate"] / n, sums["time/logprob"] / n, sums["time/backward"] / n,
                 (sums["time/optimizer"] + sums["time/grad_sync"]) / n, sums["num_tokens"] / n, 0};
  for (const char* k : {"memory/generation_peak_gb", "memory/logprob_peak_gb", "memory/backward_peak_gb",
                        "memory/optimizer_peak_gb"})
    for (double v : per_step(out, k)) ours.peak_gb = std::max(ours.peak_gb, v);
  // Ours on a line of its own before the peer runs: a deadline that cuts the peer short still leaves it.
  std::printf("grpo, %d step(s) after the first: step %.3f s (generate %.3f, log-probs %.3f, backward %.3f, "
              "optimizer %.3f), %.0f completion tokens/s, peak %.2f GiB\n",
              n, ours.step, ours.generate, ours.logprob, ours.backward, ours.optimizer, ours.tokens / ours.step,
              ours.peak_gb);
  std::fflush(stdout);

  const std::string python = GRPO_TORCH_PYTHON;
  const std::string peer_script = src + (gpu ? "/bench/peer/hf_grpo_step.py" : "/bench/peer/qwen2_peer.py");
  // The matmul rate this device reaches in the run's dtype, the denominator of MFU.
  double peak_flops = 0;
  for (const nlohmann::json& j : peer_lines(python + " " + src + "/bench/peer/hf_grpo_step.py --matmul_peak --dtype " +
                                            s.dtype + " --device " + s.device + " --threads " + std::to_string(s.threads)))
    peak_flops = j.value("matmul_tflops", 0.0) * 1e12;
  if (peak_flops <= 0) {
    std::fprintf(stderr, "the matmul peak was not measured (bench/peer/hf_grpo_step.py --matmul_peak); "
                         "rerun its command above to see why\n");
    return 1;
  }
  StepTimes peer;
  std::vector<double> peer_steps;
  if (s.peer) {
    std::string cmd = python + " " + peer_script + (gpu ? " --device " + s.device : std::string(" step")) +
                      " --config " + (model / "config.json").string() + " --prompts " + std::to_string(s.prompts) +
                      " --generations " + std::to_string(s.generations) + " --prompt " + std::to_string(kPromptTokens) +
                      " --new_tokens " + std::to_string(s.new_tokens) + " --runs " + std::to_string(n) +
                      " --threads " + std::to_string(s.threads) + " --dtype " + s.dtype;
    if (gpu) {  // the options of the seed's shapes, which the CPU peer does not take
      if (s.train_type == "lora") cmd += " --lora_rank " + std::to_string(s.lora_rank);
      if (s.beta > 0) cmd += " --beta " + std::to_string(s.beta);
      if (s.gradient_checkpointing) cmd += " --gradient_checkpointing";
    }
    for (const nlohmann::json& j : peer_lines(cmd)) {
      if (!j.contains("step_s")) continue;
      peer_steps.push_back(j["step_s"].get<double>());
      peer.step += j["step_s"].get<double>();
      peer.generate += j["generate_s"].get<double>();
      peer.logprob += j["forward_s"].get<double>();
      peer.backward += j["backward_s"].get<double>();
      peer.optimizer += j["optimizer_s"].get<double>();
      peer.tokens += j.value("completion_tokens", 0.0);
      peer.peak_gb = std::max(peer.peak_gb, j.value("peak_gb", 0.0));
    }
    const auto runs = static_cast<double>(peer_steps.size());
    for (double* v : {&peer.step, &peer.generate, &peer.logprob, &peer.backward, &peer.optimizer, &peer.tokens})
      *v /= std::max(1.0, runs);
  }

  std::printf("\nGRPO step at %s's shape (%d prompt(s) x G %d, %d new tokens, %s, %s%s, beta %g%s) on %s, "
              "%d step(s) after the first\n",
              s.shape.c_str(), s.prompts, s.generations, s.new_tokens, s.dtype.c_str(), s.train_type.c_str(),
              s.train_type == "lora" ? (" rank " + std::to_string(s.lora_rank) + " on every linear layer").c_str() : "",
              s.beta, s.gradient_checkpointing ? ", gradient checkpointing" : "", s.device.c_str(), n);
  std::printf("%-10s %9s %11s %12s %11s %12s %10s %10s\n", "", "step s", "generate s", "log-probs s", "backward s",
              "optimizer s", "tokens/s", "train MFU");
  print_row("grpo", ours, training_flops(s, config, ours.tokens / (s.prompts * s.generations)), peak_flops);
  if (!peer_steps.empty()) {
    print_row("peer", peer, training_flops(s, config, peer.tokens / (s.prompts * s.generations)), peak_flops);
    std::printf("%-10s %8.2fx %10.2fx %11.2fx %10.2fx %11.2fx   (training half %.2fx)\n", "peer/grpo",
                peer.step / ours.step, peer.generate / ours.generate, peer.logprob / ours.logprob,
                peer.backward / ours.backward, peer.optimizer / ours.optimizer, peer.train() / ours.train());
  } else if (s.peer) {
    std::fprintf(stderr, "the peer did not run (it runs on the torch wheel LibTorch came from); rerun its command "
                         "above to see why\n");
    return 1;
  }
  std::printf("tokens/s: completion tokens per step time. train MFU: model FLOPs of the training half (%.3g per step: "
              "%s) over its time (log-probs + backward + optimizer) and the %s matmul rate measured in this run, "
              "%.1f TFLOP/s\n",
              training_flops(s, config, ours.tokens / (s.prompts * s.generations)),
              s.beta > 0 ? "reference forward, policy forward and backward" : "policy forward and backward",
              s.dtype.c_str(), peak_flops / 1e12);
  if (gpu)
    std::printf("peak device memory, GiB: grpo %.2f (the largest phase peak), peer %.2f\n", ours.peak_gb, peer.peak_gb);
  // Ours settles after the second step: the first allocates AdamW's state.
  std::printf("each step, s: grpo");
  for (double t : per_step(out, "step_time")) std::printf(" %.2f", t);
  std::printf(" (the first included)");
  if (!peer_steps.empty()) {
    std::printf("; peer");
    for (double t : peer_steps) std::printf(" %.2f", t);
    std::printf(" (after its warm-up step)");
  }
  std::printf("\n");
  return 0;
}

}  // namespace grpo::bench
