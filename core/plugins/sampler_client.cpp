#include "plugins/sampler_client.h"

#include <cstddef>
#include <cstring>
#include <mutex>

#include <fmt/format.h>

#include "plugins/crash_guard.h"
#include "plugins/plugin_error.h"
#include "plugins/plugin_text.h"

namespace grpo::plugins {

// 1.0 hosts wrote sizeof(grpo_sampling_params), 80, as its struct_size: a
// field appended below that offset would look present to a newer plugin.
static_assert(offsetof(grpo_sampling_params, prefix_flags) == 80, "prefix_flags must start past 1.0's tail padding");

namespace {

grpo_str as_str(const std::string& s) { return grpo_str{s.data(), s.size()}; }

struct SinkState {
  std::mutex mu;  // the sink is [any-thread]: a sampler may call it from its workers
  const std::vector<SampleRequest>* requests;
  std::vector<size_t> first;  // completion slot of each request's copy 0
  std::vector<Sample>* out;
  std::vector<char> filled;
  std::string error;
};

void sink(void* ctx, const grpo_completion* c) {
  auto* st = static_cast<SinkState*>(ctx);
  std::lock_guard<std::mutex> lock(st->mu);
  if (c->request_id >= st->requests->size() || c->index >= (*st->requests)[c->request_id].n) {
    st->error = fmt::format("a completion for request {} copy {} that was not asked for", c->request_id, c->index);
    return;
  }
  if (c->finish_reason != GRPO_FINISH_STOP && c->finish_reason != GRPO_FINISH_LENGTH &&
      c->finish_reason != GRPO_FINISH_ABORT) {
    st->error = fmt::format("finish reason {} for request {} copy {} (expected GRPO_FINISH_STOP, _LENGTH or _ABORT)",
                            c->finish_reason, c->request_id, c->index);
    return;
  }
  const size_t slot = st->first[c->request_id] + c->index;
  Sample& out = (*st->out)[slot];
  out.prompt = (*st->requests)[c->request_id].prompt;
  out.request = c->request_id;
  out.index = (*st->requests)[c->request_id].first_copy + c->index;
  out.ids.assign(c->ids, c->ids + c->n_ids);
  if (c->logprobs) out.logprobs.assign(c->logprobs, c->logprobs + c->n_ids);
  out.text.assign(c->text.data ? c->text.data : "", c->text.size);
  out.finish = c->finish_reason == GRPO_FINISH_STOP     ? FinishReason::Stop
               : c->finish_reason == GRPO_FINISH_LENGTH ? FinishReason::Length
                                                        : FinishReason::Abort;
  st->filled[slot] = 1;
}

}  // namespace

std::unique_ptr<SamplerClient> SamplerClient::create(const ResolvedPlugin& plugin, const nlohmann::json& options,
                                                     std::shared_ptr<MetricsSink> metrics,
                                                     const std::string& run_config_json, TextServices text) {
  install_crash_handlers();
  std::unique_ptr<SamplerClient> c(new SamplerClient());
  c->plugin_ = plugin;
  const auto* table = static_cast<const grpo_sampler_api*>(plugin.library->factory(plugin.info.name, GRPO_SAMPLER_INTERFACE));
  if (!table)
    throw PluginError(fmt::format("plugin '{}' ({}) provides no {} table", plugin.info.name, plugin.info.file,
                                  GRPO_SAMPLER_INTERFACE));
  std::memcpy(&c->api_, table, std::min<size_t>(table->struct_size, sizeof(grpo_sampler_api)));
  if (!c->api_.create || !c->api_.generate || !c->api_.load_weights || !c->api_.destroy)
    throw PluginError(fmt::format("sampler plugin '{}' ({}) lacks create, generate, load_weights or destroy",
                                  plugin.info.name, plugin.info.file));
  c->services_ = std::make_unique<HostServices>(plugin.info.name, std::move(metrics), run_config_json, text, options);
  std::string config = options.dump();
  grpo_error err{};
  grpo_status status;
  {
    PluginCallScope scope(plugin.info.name.c_str(), plugin.info.file.c_str(), "create");
    status = c->api_.create(c->services_->api(), as_str(config), &c->instance_, &err);
  }
  if (status != GRPO_OK || !c->instance_)
    throw PluginError(fmt::format("sampler '{}' ({}) could not be created: {}", plugin.info.name, plugin.info.file,
                                  status != GRPO_OK ? error_text(err) : "it returned no instance"));
  return c;
}

SamplerClient::~SamplerClient() {
  if (instance_) {
    PluginCallScope scope(plugin_.info.name.c_str(), plugin_.info.file.c_str(), "destroy");
    api_.destroy(instance_);
  }
}

bool SamplerClient::in_process() const { return (api_.flags & GRPO_SAMPLER_IN_PROCESS) != 0; }

std::vector<Sample> SamplerClient::generate(const std::vector<SampleRequest>& requests, const SampleOptions& options,
                                            uint64_t prefix_flags) {
  std::vector<grpo_generate_request> reqs(requests.size());
  SinkState st;
  st.requests = &requests;
  size_t total = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    const SampleRequest& r = requests[i];
    reqs[i] = grpo_generate_request{GRPO_GENERATE_REQUEST_STRUCT_SIZE, i, r.prompt_ids.data(), r.prompt_ids.size(),
                                    as_str(r.prompt_text), as_str(r.messages_json), r.n, r.seed, r.stop_ids.data(),
                                    r.stop_ids.size(), r.max_new_tokens};
    st.first.push_back(total);
    total += r.n;
  }
  std::vector<Sample> out(total);
  st.out = &out;
  st.filled.assign(total, 0);
  std::vector<grpo_str> stops;
  for (const auto& s : options.stop_strings) stops.push_back(as_str(s));
  grpo_sampling_params params{GRPO_SAMPLING_PARAMS_STRUCT_SIZE, options.temperature, options.top_p, options.top_k,
                              options.min_p, options.repetition_penalty, options.max_new_tokens, stops.data(),
                              stops.size(), options.return_logprobs ? 1 : 0, prefix_flags};
  grpo_error err{};
  grpo_status status;
  {
    PluginCallScope scope(plugin_.info.name.c_str(), plugin_.info.file.c_str(), "generate");
    status = api_.generate(instance_, reqs.data(), reqs.size(), sizeof(grpo_generate_request), &params, &sink, &st, &err);
  }
  if (status != GRPO_OK)
    throw PluginError(fmt::format("sampler '{}' ({}) failed to generate: {}", name(), plugin_.info.file, error_text(err)));
  if (!st.error.empty()) throw PluginError(fmt::format("sampler '{}' returned {}", name(), st.error));
  for (size_t i = 0; i < total; ++i)
    if (!st.filled[i]) throw PluginError(fmt::format("sampler '{}' left completion {} of {} out", name(), i, total));
  // A request's own budget binds whether or not the sampler read it (a 1.1
  // sampler cannot): what lies beyond it is cut, and the completion ended by length.
  for (Sample& c : out) {
    const int32_t budget = requests[c.request].max_new_tokens;
    if (budget <= 0 || c.ids.size() <= static_cast<size_t>(budget)) continue;
    c.ids.resize(static_cast<size_t>(budget));
    if (!c.logprobs.empty()) c.logprobs.resize(c.ids.size());
    c.finish = FinishReason::Length;
  }
  return out;
}

void SamplerClient::load_weights(const std::vector<grpo_named_tensor>& tensors, uint32_t flags) {
  grpo_error err{};
  grpo_status status;
  {
    PluginCallScope scope(plugin_.info.name.c_str(), plugin_.info.file.c_str(), "load_weights");
    status = api_.load_weights(instance_, tensors.data(), tensors.size(), flags, &err);
  }
  if (status != GRPO_OK)
    throw PluginError(fmt::format("sampler '{}' ({}) could not load weights: {}", name(), plugin_.info.file, error_text(err)));
}

}  // namespace grpo::plugins
