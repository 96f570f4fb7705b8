// The external_server and native sampler plugins side by side, for tests
// that compare a rollout server's completions with the in-process engine's.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/transformer.h"
#include "plugins/sampler_client.h"

namespace grpo::testing {

// A sampler plugin from the build's plugin directory.
std::unique_ptr<plugins::SamplerClient> make_sampler(const std::string& name, const nlohmann::json& options);

// The external_server sampler for `base_url`, decoding with tiny_model_dir()'s
// tokenizer, on a free weight-transfer port; `extra` options override.
std::unique_ptr<plugins::SamplerClient> external_sampler(const std::string& base_url,
                                                         const nlohmann::json& extra = nlohmann::json::object());

// Views of every parameter of `model`, as the trainer hands them over.
struct ParameterViews {
  std::vector<grpo_named_tensor> tensors;
  std::vector<std::string> names;
  std::vector<std::vector<int64_t>> shapes;
  explicit ParameterViews(model::CausalLMImpl& model);
};

}  // namespace grpo::testing
