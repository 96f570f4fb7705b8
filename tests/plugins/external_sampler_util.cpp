#include "plugins/external_sampler_util.h"

#include "plugin_paths.h"
#include "plugins/plugin_registry.h"
#include "rollout/rollout_process.h"

namespace grpo::testing {

std::unique_ptr<plugins::SamplerClient> make_sampler(const std::string& name, const nlohmann::json& options) {
  plugins::PluginSources s;
  s.use_env = false;
  s.builtin_dir = PLUGIN_DIR;
  plugins::PluginRegistry reg = plugins::PluginRegistry::discover(s);
  return plugins::SamplerClient::create(reg.require(name, GRPO_SAMPLER_INTERFACE), options, nullptr, "{}");
}

std::unique_ptr<plugins::SamplerClient> external_sampler(const std::string& base_url, const nlohmann::json& extra) {
  nlohmann::json o = {{"base_url", base_url},
                      {"model", tiny_model_dir()},
                      {"group_port", free_port()},
                      {"timeout_s", 10},
                      {"request_timeout_s", 60},
                      {"comm_timeout_s", 30}};
  for (const auto& [k, v] : extra.items()) o[k] = v;
  return make_sampler("external_server", o);
}

ParameterViews::ParameterViews(model::CausalLMImpl& model) {
  auto params = model.named_parameters();
  names.reserve(params.size());
  shapes.reserve(params.size());
  for (auto& p : params) {
    names.push_back(p.key());
    shapes.push_back(p.value().sizes().vec());
    grpo_dl_tensor t{p.value().data_ptr(), {GRPO_DEVICE_CPU, 0}, static_cast<int32_t>(p.value().dim()),
                     {GRPO_DTYPE_FLOAT, 32, 1}, shapes.back().data(), nullptr, 0};
    tensors.push_back({{names.back().data(), names.back().size()}, t});
  }
}

}  // namespace grpo::testing
