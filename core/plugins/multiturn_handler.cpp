#include "plugins/multiturn_handler.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "plugins/crash_guard.h"
#include "plugins/plugin_error.h"
#include "plugins/plugin_options.h"
#include "plugins/plugin_text.h"

namespace grpo::plugins {

namespace {

grpo_str as_str(const std::string& s) { return grpo_str{s.data(), s.size()}; }

// host_ctx is the call's vector of appended messages.
void append_message(void* ctx, grpo_str role, grpo_str content) {
  static_cast<std::vector<tok::ChatMessage>*>(ctx)->push_back({plugin_text(role), plugin_text(content)});
}

int32_t finish_code(FinishReason f) {
  return f == FinishReason::Stop ? GRPO_FINISH_STOP : f == FinishReason::Length ? GRPO_FINISH_LENGTH : GRPO_FINISH_ABORT;
}

}  // namespace

// One call's inputs and outputs, owned jointly by the caller and the worker
// thread: a call abandoned past its deadline may still read and write them.
struct MultiturnHandler::Call {
  explicit Call(const TurnView& turn)
      : conversation_json(turn.conversation_json),
        completion(turn.completion),
        ids(turn.ids ? *turn.ids : std::vector<int32_t>()),
        columns(turn.columns ? *turn.columns : RowColumns{{}, "{}"}),
        views(view_of(columns).columns),
        state{GRPO_TRAINER_STATE_STRUCT_SIZE, turn.state.global_step, turn.state.max_steps, turn.state.epoch},
        input{GRPO_TURN_INPUT_STRUCT_SIZE, as_str(conversation_json), as_str(completion), ids.data(), ids.size(),
              finish_code(turn.finish), turn.turn, turn.tokens_left, views.data(), views.size(),
              as_str(columns.json), &state} {}
  std::string conversation_json, completion;
  std::vector<int32_t> ids;
  RowColumns columns;
  std::vector<grpo_column> views;
  grpo_trainer_state state;
  grpo_turn_input input;
  std::vector<tok::ChatMessage> appended;
  grpo_turn_output output{};
  grpo_error err{};
  grpo_status status = GRPO_OK;
  double value = std::numeric_limits<double>::quiet_NaN();
};

std::unique_ptr<MultiturnHandler> MultiturnHandler::create(const ResolvedPlugin& plugin, const nlohmann::json& options,
                                                           std::shared_ptr<MetricsSink> metrics,
                                                           const std::string& run_config_json, TextServices text,
                                                           double timeout_s, int threads) {
  install_crash_handlers();
  std::unique_ptr<MultiturnHandler> h(new MultiturnHandler());
  h->plugin_ = plugin;
  h->timeout_s_ = timeout_s;
  const auto* table =
      static_cast<const grpo_multiturn_api*>(plugin.library->factory(plugin.info.name, GRPO_MULTITURN_INTERFACE));
  if (!table)
    throw PluginError(fmt::format("plugin '{}' ({}) provides no {} table", plugin.info.name, plugin.info.file,
                                  GRPO_MULTITURN_INTERFACE));
  std::memcpy(&h->api_, table, std::min<size_t>(table->struct_size, sizeof(grpo_multiturn_api)));
  if (!h->api_.create || !h->api_.step || !h->api_.destroy)
    throw PluginError(fmt::format("multi-turn handler '{}' ({}) lacks create, step or destroy", plugin.info.name,
                                  plugin.info.file));
  h->services_ = std::make_unique<HostServices>(plugin.info.name, std::move(metrics), run_config_json, text, options);
  const std::string config = options.dump();
  grpo_error err{};
  grpo_status status;
  {
    PluginCallScope scope(plugin.info.name.c_str(), plugin.info.file.c_str(), "create");
    status = h->api_.create(h->services_->api(), as_str(config), &h->instance_, &err);
  }
  if (status != GRPO_OK || !h->instance_)
    throw PluginError(fmt::format("multi-turn handler '{}' ({}) could not be created: {}", plugin.info.name,
                                  plugin.info.file, status != GRPO_OK ? error_text(err) : "it returned no instance"));
  const bool thread_safe = (h->api_.flags & GRPO_MULTITURN_THREAD_SAFE) != 0;
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int w = 0; w < (thread_safe ? threads : 1); ++w) {
    h->workers_.push_back(std::make_unique<CallWorker>());
    h->idle_.push_back(static_cast<size_t>(w));
  }
  if (h->api_.tools_json) {
    PluginCallScope scope(plugin.info.name.c_str(), plugin.info.file.c_str(), "tools_json");
    const grpo_str tools = h->api_.tools_json(h->instance_);
    h->tools_ = plugin_text(tools);
  }
  // Checked here, once: the chat template reads the schemas for every prompt.
  if (!h->tools_.empty()) {
    const nlohmann::json tools = nlohmann::json::parse(h->tools_, nullptr, /*allow_exceptions=*/false);
    if (!tools.is_array())
      throw PluginError(fmt::format("multi-turn handler '{}' ({}): tools_json() returned {}, not a JSON array of tool "
                                    "schemas: \"{}\"",
                                    plugin.info.name, plugin.info.file, tools.is_discarded() ? "invalid JSON" : tools.type_name(),
                                    h->tools_.substr(0, 120)));
  }
  return h;
}

std::unique_ptr<MultiturnHandler> MultiturnHandler::for_run(const PluginRegistry& registry, const std::string& name,
                                                            const nlohmann::json& run_config,
                                                            const nlohmann::json& plugin_args,
                                                            std::shared_ptr<MetricsSink> metrics, TextServices text,
                                                            double timeout_s, int threads) {
  const ResolvedPlugin plugin = registry.require(name, GRPO_MULTITURN_INTERFACE);
  const nlohmann::json section =
      plugin_args.is_object() && plugin_args.contains(name) ? plugin_args[name] : nlohmann::json();
  return create(plugin, resolve_plugin_options(plugin.info, run_config, section), std::move(metrics),
                run_config.dump(), text, timeout_s, threads);
}

MultiturnHandler::~MultiturnHandler() {
  if (!instance_) return;
  const bool stuck = std::any_of(workers_.begin(), workers_.end(), [](const auto& w) { return w->stuck(); });
  if (stuck) {  // destroying it, or unloading its code, under a running call would crash
    spdlog::warn("multi-turn handler '{}' is still stuck in a call; its instance is left as it is", name());
    new std::shared_ptr<PluginLibrary>(plugin_.library);  // never unloaded
    services_.release();                                  // the call may still use them
    return;
  }
  PluginCallScope scope(plugin_.info.name.c_str(), plugin_.info.file.c_str(), "destroy");
  api_.destroy(instance_);
}

bool MultiturnHandler::call(const char* what, const std::function<grpo_status(grpo_error*)>& body,
                            const std::shared_ptr<Call>& record) {
  const std::optional<size_t> worker = acquire();
  const bool was_stuck = !worker;
  const bool returned = worker && workers_[*worker]->run(
                                      [this, what, body, record] {
                                        PluginCallScope scope(plugin_.info.name.c_str(), plugin_.info.file.c_str(), what);
                                        record->status = body(&record->err);
                                      },
                                      timeout_s_);
  if (worker) release(*worker);
  if (returned && record->status == GRPO_OK) return true;
  ++failures_;
  const std::string why =
      returned ? fmt::format("{}() failed (status {}): {}", what, record->status, error_text(record->err))
      : was_stuck ? fmt::format("it is still stuck in an earlier call, so {}() was not made", what)
                  : fmt::format("{}() did not return within {} s (--multi_turn_timeout)", what, timeout_s_);
  spdlog::error("multi-turn handler '{}' ({}): {}; that conversation ends here, its rewards count as no opinion "
                "(NaN) and training goes on",
                name(), plugin_.info.file, why);
  return false;
}

std::optional<size_t> MultiturnHandler::acquire() {
  std::unique_lock<std::mutex> lock(pool_mutex_);
  for (;;) {
    for (size_t i = 0; i < idle_.size(); ++i) {
      if (workers_[idle_[i]]->stuck()) continue;
      const size_t w = idle_[i];
      idle_.erase(idle_.begin() + static_cast<std::ptrdiff_t>(i));
      return w;
    }
    // None free: wait for a running call, unless every worker is stuck.
    if (idle_.size() == workers_.size()) return std::nullopt;
    pool_changed_.wait(lock);
  }
}

void MultiturnHandler::release(size_t worker) {
  {
    std::lock_guard<std::mutex> lock(pool_mutex_);
    idle_.push_back(worker);
  }
  pool_changed_.notify_all();  // a waiter may also be the one to see every worker stuck
}

grpo_conversation* MultiturnHandler::begin(uint64_t id, const Prompt& prompt, int64_t prompt_index, uint32_t copy,
                                           const TrainerState& state, bool* failed) {
  *failed = false;
  if (!api_.begin) return nullptr;
  TurnView view;
  view.conversation_json = prompt.messages_json;
  view.columns = prompt.columns.get();
  view.state = state;
  auto c = std::make_shared<Call>(view);
  auto conv = std::make_shared<grpo_conversation*>(nullptr);
  const grpo_conversation_info info{GRPO_CONVERSATION_INFO_STRUCT_SIZE, id, prompt_index, copy,
                                    as_str(c->conversation_json), c->views.data(), c->views.size(),
                                    as_str(c->columns.json), &c->state};
  auto info_copy = std::make_shared<grpo_conversation_info>(info);
  if (!call("begin", [this, c, info_copy, conv](grpo_error* err) { return api_.begin(instance_, info_copy.get(), conv.get(), err); }, c)) {
    *failed = true;
    return nullptr;
  }
  return *conv;
}

TurnDecision MultiturnHandler::step(grpo_conversation* conv, const TurnView& turn) {
  auto c = std::make_shared<Call>(turn);
  c->output = {GRPO_TURN_OUTPUT_STRUCT_SIZE, 0, &c->appended, &append_message, 0, 0};
  if (!call("step", [this, c, conv](grpo_error* err) { return api_.step(instance_, conv, &c->input, &c->output, err); }, c))
    return TurnDecision{true, {}, 0, 0, true};
  for (const tok::ChatMessage& m : c->appended) {
    if (m.role == "user" || m.role == "tool") continue;
    ++failures_;
    spdlog::error("multi-turn handler '{}' ({}): step() appended a message with role \"{}\"; only user and tool "
                  "messages may follow a policy turn; that conversation ends here, its rewards count as no opinion "
                  "(NaN) and training goes on",
                  name(), plugin_.info.file, m.role);
    return TurnDecision{true, {}, 0, 0, true};
  }
  TurnDecision d;
  d.tool_calls = c->output.tool_calls;
  d.tool_failures = std::min(c->output.tool_failures, c->output.tool_calls);
  d.done = c->output.done != 0 || c->appended.empty();
  if (!d.done) d.appended = std::move(c->appended);
  return d;
}

double MultiturnHandler::reward(grpo_conversation* conv, const TurnView& last) {
  if (!has_reward()) return std::numeric_limits<double>::quiet_NaN();
  auto c = std::make_shared<Call>(last);
  if (!call("reward", [this, c, conv](grpo_error* err) { return api_.reward(instance_, conv, &c->input, &c->value, err); }, c))
    return std::numeric_limits<double>::quiet_NaN();
  if (std::isinf(c->value)) {
    spdlog::warn("multi-turn handler '{}' returned an infinite reward; it counts as no opinion (NaN)", name());
    return std::numeric_limits<double>::quiet_NaN();
  }
  return c->value;
}

void MultiturnHandler::end(grpo_conversation* conv) {
  if (!api_.end || !conv) return;
  // A stuck handler cannot free it now: the state is left to it.
  call("end", [this, conv](grpo_error*) { api_.end(instance_, conv); return GRPO_OK; },
       std::make_shared<Call>(TurnView{}));
}

}  // namespace grpo::plugins
