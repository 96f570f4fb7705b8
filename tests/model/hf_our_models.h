// Models built here (not read from the oracle script) for the oracle tests,
// one per name of kHfArchitectures, with the same features switched on.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "model/transformer.h"

namespace grpo::test {

// `arch` (qwen2, qwen2.5, qwen3, llama3): three layers, vocabulary 257, every
// parameter drawn from `seed` (randomize_all).
model::CausalLM our_model(const std::string& arch, uint64_t seed);

// Test names from parameters: "qwen2.5" -> "qwen2_5", "llama-bias" -> "llama_bias".
std::string arch_test_name(const ::testing::TestParamInfo<std::string>& info);

}  // namespace grpo::test
