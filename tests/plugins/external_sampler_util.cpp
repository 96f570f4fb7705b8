#include "plugins/external_sampler_util.h"

#include "plugins/builtin_plugins.h"
#include "rollout/rollout_process.h"

namespace grpo::testing {

std::unique_ptr<plugins::SamplerClient> external_sampler(const std::string& base_url, const nlohmann::json& extra) {
  nlohmann::json o = {{"base_url", base_url},
                      {"model", tiny_model_dir()},
                      {"group_port", free_port()},
                      {"timeout_s", 10},
                      {"request_timeout_s", 60},
                      {"comm_timeout_s", 30}};
  for (const auto& [k, v] : extra.items()) o[k] = v;
  return builtin_sampler("external_server", o);
}

}  // namespace grpo::testing
