// The external_server and native sampler plugins side by side, for tests
// that compare a rollout server's completions with the in-process engine's.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "plugins/sampler_client.h"

namespace grpo::testing {

// The external_server sampler for `base_url`, decoding with tiny_model_dir()'s
// tokenizer, on a free weight-transfer port; `extra` options override.
std::unique_ptr<plugins::SamplerClient> external_sampler(const std::string& base_url,
                                                         const nlohmann::json& extra = nlohmann::json::object());

}  // namespace grpo::testing
