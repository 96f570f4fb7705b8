// The ids a completion stops at, one rule for every sampler and command: the
// tokenizer's eos token, and the eos_token_id(s) of config.json and
// generation_config.json, as transformers' generate and vLLM stop.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/model_config.h"
#include "tokenizer/tokenizer.h"

namespace grpo::model {

// `model_dir` is where generation_config.json may be (none: only the other
// two sources). Ids come once each, the tokenizer's first. Throws
// ModelConfigError naming the file when generation_config.json is malformed.
std::vector<int32_t> stop_token_ids(const tok::Tokenizer& tokenizer, const ModelConfig& config,
                                    const std::string& model_dir);

}  // namespace grpo::model
