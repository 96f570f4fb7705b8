// A sampler plugin instance as the trainer uses it: generation requests in,
// completions out, new weights pushed after optimizer steps.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <grpo/sampler.h>
#include <nlohmann/json.hpp>

#include "plugins/host_services.h"
#include "plugins/plugin_registry.h"
#include "plugins/sample.h"

namespace grpo::plugins {

struct SampleRequest {
  std::vector<int32_t> prompt_ids;
  std::string prompt_text;
  std::string messages_json;
  uint32_t n = 1;
  uint64_t seed = 0;
  std::vector<int32_t> stop_ids;
  int32_t max_new_tokens = 0;      // below SampleOptions::max_new_tokens: this request's own budget; 0: none
  const Prompt* prompt = nullptr;  // handed on to its samples
  uint32_t first_copy = 0;         // these are copies first_copy.. of their group: the samples' `index`
};

struct SampleOptions {
  double temperature = 1.0, top_p = 1.0, min_p = 0.0, repetition_penalty = 1.0;
  int32_t top_k = 0;
  int32_t max_new_tokens = 16;
  std::vector<std::string> stop_strings;
  bool return_logprobs = true;
};

class SamplerClient {
 public:
  // Throws PluginError with the plugin's message when create() fails.
  static std::unique_ptr<SamplerClient> create(const ResolvedPlugin& plugin, const nlohmann::json& options,
                                               std::shared_ptr<MetricsSink> metrics, const std::string& run_config_json,
                                               TextServices text = {});
  ~SamplerClient();
  SamplerClient(const SamplerClient&) = delete;
  SamplerClient& operator=(const SamplerClient&) = delete;

  // Samples in request order, copies in index order, each pointing at its
  // request's prompt. Throws PluginError naming the plugin when it fails,
  // leaves a completion out or reports an unknown finish reason.
  // `prefix_flags`: GRPO_PREFIX_CONTINUES / GRPO_PREFIX_KEEP (grpo/sampler.h), set by multi-turn rollouts.
  std::vector<Sample> generate(const std::vector<SampleRequest>& requests, const SampleOptions& options,
                               uint64_t prefix_flags = 0);

  // New weights by Hugging Face parameter name; `flags` as in grpo/sampler.h.
  void load_weights(const std::vector<grpo_named_tensor>& tensors, uint32_t flags);

  bool in_process() const;
  const std::string& name() const { return plugin_.info.name; }

 private:
  SamplerClient() = default;
  ResolvedPlugin plugin_;
  std::unique_ptr<HostServices> services_;
  grpo_sampler_api api_{};  // zero-filled beyond what the plugin provides
  grpo_sampler_instance* instance_ = nullptr;
};

}  // namespace grpo::plugins
