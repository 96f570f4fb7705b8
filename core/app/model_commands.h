// `grpo-host init-model` and `grpo-host generate`.
#pragma once

#include <string>
#include <vector>

namespace grpo::app {

// init-model --arch qwen2 --preset small --out DIR [--tokenizer PATH] [--seed N]
int run_init_model_command(const std::vector<std::string>& args);

// generate --model DIR --prompt TEXT [--n K] [--raw] [sampling flags: temperature top_p top_k min_p
// repetition_penalty max_completion_length stop_words seed]
int run_generate_command(const std::vector<std::string>& args);

}  // namespace grpo::app
