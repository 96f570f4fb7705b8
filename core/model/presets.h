// Models created from scratch: config presets sized for a 2-core machine
// (tests, demos, benchmarks) and transformers' weight initialisation.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/transformer.h"

namespace grpo::model {

// config.json for `arch` (qwen2 | llama | qwen3) at size `preset`; throws
// std::invalid_argument listing the valid names.
nlohmann::json preset_config(const std::string& arch, const std::string& preset, int64_t vocab_size);
std::vector<std::string> preset_names();

// Normal(0, 0.02) matrices and embeddings, zero biases, unit norms — as
// transformers initialises these models. Drawn on the device the model is on:
// a seed gives other values on a GPU than on the CPU.
void init_weights(CausalLMImpl& model, uint64_t seed, double std = 0.02);

}  // namespace grpo::model
