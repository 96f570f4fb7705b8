// Hugging Face transformers and peft, run at test time on the project's Python
// (tests/oracles/hf_models.py), as oracles for the model code: logits of their
// checkpoints against ours, and ours loaded by them.
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "model/transformer.h"

namespace grpo::test {

// The architectures hf_models.py builds, by the name of its folder.
inline const std::vector<std::string> kHfArchitectures = {"qwen2", "qwen2.5", "qwen3", "llama3"};

// A fresh empty folder under the system's temporary directory.
std::string fresh_dir(const std::string& name);

// Runs hf_models.py with `args` (each shell-quoted here). A failure (no
// Python, transformers missing, a traceback) fails the calling test with the
// script's output, which names scripts/setup.sh when a library is missing.
void run_hf_oracle(const std::string& args, const std::string& log_dir);

// An oracle.safetensors: inputs and the reference library's logits.
struct HfLogits {
  at::Tensor input_ids, attention_mask, logits;  // [B, T], [B, T], [B, T, V]
};
HfLogits read_hf_logits(const std::string& path);

// max |ours - theirs| over the tokens (mask 1) of `want`'s inputs, `model`
// run on the same inputs (positions counted from the mask, as the oracle
// passes them). Infinity when the shapes differ.
double max_logit_difference(model::CausalLMImpl& model, const HfLogits& want);

// How far our logits may lie from the reference library's: float32 sums over
// 70 positions taken in other orders (its attention kernels against our
// matmuls) differ by up to 1.8e-5 on logits up to 7 in magnitude, while a
// wrong weight, mask or position moves them by 0.1 or more.
constexpr double kLogitTolerance = 3e-5;

// Every parameter drawn (seeded): matrices N(0, 0.2), biases N(0, 0.5), norm
// weights 1 + N(0, 0.2), so that a term left out or misplaced shows in the logits.
void randomize_all(model::CausalLMImpl& model, uint64_t seed);

}  // namespace grpo::test
