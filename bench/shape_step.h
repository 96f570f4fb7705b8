// The GRPO step at a real model's shape (random weights of its config), ours
// and a peer's taken in the same run: `bench_step --shape NAME`.
#pragma once

#include <filesystem>
#include <string>

namespace grpo::bench {

struct ShapeStep {
  std::string shape;                 // an init-model preset: qwen2.5-0.5b, qwen2.5-1.5b, qwen2.5-7b
  std::string dtype = "float32";     // float32 | bfloat16
  std::string device = "cpu";        // cpu | cuda
  std::string train_type = "full";   // full | lora (rank lora_rank on every linear layer, alpha 32)
  int prompts = 2, generations = 8, new_tokens = 64, lora_rank = 8, steps = 6, threads = 2;
  double beta = 0;                   // > 0: the reference's log-probs too (LoRA: adapters disabled)
  bool gradient_checkpointing = false, offload_optimizer = false;
  bool peer = true;                  // also the peer's step (the matmul peak is measured either way)
};

// Prints the step's phases, tokens/s, the training half's MFU against the
// matmul rate measured in the same run, and peak memory; returns the exit status.
int shape_step(const ShapeStep& s, const std::filesystem::path& work);

}  // namespace grpo::bench
