#include "plugins/multiturn_handler.h"

#include <cmath>
#include <cstring>
#include <limits>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "plugins/crash_guard.h"
#include "plugins/plugin_error.h"

namespace grpo::plugins {

namespace {

grpo_str as_str(const std::string& s) { return grpo_str{s.data(), s.size()}; }

struct Appended {
  std::vector<tok::ChatMessage>* messages;
};

void append_message(void* ctx, grpo_str role, grpo_str content) {
  auto* a = static_cast<Appended*>(ctx);
  a->messages->push_back({std::string(role.data ? role.data : "", role.size),
                          std::string(content.data ? content.data : "", content.size)});
}

std::vector<grpo_column> column_views(const RowColumns* columns) {
  std::vector<grpo_column> out;
  if (columns)
    for (const auto& c : columns->columns) out.push_back({as_str(c.name), as_str(c.json), as_str(c.text)});
  return out;
}

int32_t finish_code(FinishReason f) {
  return f == FinishReason::Stop ? GRPO_FINISH_STOP : f == FinishReason::Length ? GRPO_FINISH_LENGTH : GRPO_FINISH_ABORT;
}

// The C view of a turn; `columns` and `state` hold what it points at.
grpo_turn_input turn_input(const TurnView& turn, std::vector<grpo_column>& columns, grpo_trainer_state& state) {
  static const std::string kEmpty = "{}";
  columns = column_views(turn.columns);
  state = {GRPO_TRAINER_STATE_STRUCT_SIZE, turn.state.global_step, turn.state.max_steps, turn.state.epoch};
  return {GRPO_TURN_INPUT_STRUCT_SIZE,
          as_str(turn.conversation_json),
          as_str(turn.completion),
          turn.ids ? turn.ids->data() : nullptr,
          turn.ids ? turn.ids->size() : 0,
          finish_code(turn.finish),
          turn.turn,
          turn.tokens_left,
          columns.data(),
          columns.size(),
          as_str(turn.columns ? turn.columns->json : kEmpty),
          &state};
}

}  // namespace

std::unique_ptr<MultiturnHandler> MultiturnHandler::create(const ResolvedPlugin& plugin, const nlohmann::json& options,
                                                           std::shared_ptr<MetricsSink> metrics,
                                                           const std::string& run_config_json, TextServices text) {
  install_crash_handlers();
  std::unique_ptr<MultiturnHandler> h(new MultiturnHandler());
  h->plugin_ = plugin;
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
                                  plugin.info.file, status != GRPO_OK ? err.message : "it returned no instance"));
  if (h->api_.tools_json) {
    PluginCallScope scope(plugin.info.name.c_str(), plugin.info.file.c_str(), "tools_json");
    const grpo_str tools = h->api_.tools_json(h->instance_);
    if (tools.data) h->tools_.assign(tools.data, tools.size);
  }
  return h;
}

MultiturnHandler::~MultiturnHandler() {
  if (instance_) {
    PluginCallScope scope(plugin_.info.name.c_str(), plugin_.info.file.c_str(), "destroy");
    api_.destroy(instance_);
  }
}

void MultiturnHandler::report(const char* call, const grpo_error& err, grpo_status status) {
  ++failures_;
  spdlog::error("multi-turn handler '{}' ({}): {}() failed (status {}): {}; that conversation ends here, its "
                "rewards count as no opinion (NaN) and training goes on",
                name(), plugin_.info.file, call, status, err.message);
}

grpo_conversation* MultiturnHandler::begin(uint64_t id, const Prompt& prompt, int64_t prompt_index, uint32_t copy,
                                           const TrainerState& state, bool* failed) {
  *failed = false;
  if (!api_.begin) return nullptr;
  const std::vector<grpo_column> columns = column_views(prompt.columns.get());
  static const std::string kEmpty = "{}";
  const grpo_trainer_state st{GRPO_TRAINER_STATE_STRUCT_SIZE, state.global_step, state.max_steps, state.epoch};
  const grpo_conversation_info info{GRPO_CONVERSATION_INFO_STRUCT_SIZE,
                                    id,
                                    prompt_index,
                                    copy,
                                    as_str(prompt.messages_json),
                                    columns.data(),
                                    columns.size(),
                                    as_str(prompt.columns ? prompt.columns->json : kEmpty),
                                    &st};
  grpo_conversation* conv = nullptr;
  grpo_error err{};
  grpo_status status;
  {
    PluginCallScope scope(plugin_.info.name.c_str(), plugin_.info.file.c_str(), "begin");
    status = api_.begin(instance_, &info, &conv, &err);
  }
  if (status != GRPO_OK) {
    report("begin", err, status);
    *failed = true;
    return nullptr;
  }
  return conv;
}

TurnDecision MultiturnHandler::step(grpo_conversation* conv, const TurnView& turn) {
  std::vector<grpo_column> columns;
  grpo_trainer_state st{};
  const grpo_turn_input in = turn_input(turn, columns, st);
  TurnDecision d;
  Appended appended{&d.appended};
  grpo_turn_output out{GRPO_TURN_OUTPUT_STRUCT_SIZE, 0, &appended, &append_message, 0, 0};
  grpo_error err{};
  grpo_status status;
  {
    PluginCallScope scope(plugin_.info.name.c_str(), plugin_.info.file.c_str(), "step");
    status = api_.step(instance_, conv, &in, &out, &err);
  }
  if (status != GRPO_OK) {
    report("step", err, status);
    return TurnDecision{true, {}, 0, 0, true};
  }
  for (const tok::ChatMessage& m : d.appended) {
    if (m.role == "user" || m.role == "tool") continue;
    std::snprintf(err.message, sizeof err.message, "it appended a message with role \"%s\"; only user and tool "
                  "messages may follow a policy turn", m.role.c_str());
    report("step", err, GRPO_INVALID_ARGUMENT);
    return TurnDecision{true, {}, 0, 0, true};
  }
  d.tool_calls = out.tool_calls;
  d.tool_failures = std::min(out.tool_failures, out.tool_calls);
  d.done = out.done != 0 || d.appended.empty();
  if (d.done) d.appended.clear();
  return d;
}

double MultiturnHandler::reward(grpo_conversation* conv, const TurnView& last) {
  if (!has_reward()) return std::numeric_limits<double>::quiet_NaN();
  std::vector<grpo_column> columns;
  grpo_trainer_state st{};
  const grpo_turn_input in = turn_input(last, columns, st);
  double value = std::numeric_limits<double>::quiet_NaN();
  grpo_error err{};
  grpo_status status;
  {
    PluginCallScope scope(plugin_.info.name.c_str(), plugin_.info.file.c_str(), "reward");
    status = api_.reward(instance_, conv, &in, &value, &err);
  }
  if (status != GRPO_OK) {
    report("reward", err, status);
    return std::numeric_limits<double>::quiet_NaN();
  }
  if (std::isinf(value)) {
    spdlog::warn("multi-turn handler '{}' returned an infinite reward; it counts as no opinion (NaN)", name());
    return std::numeric_limits<double>::quiet_NaN();
  }
  return value;
}

void MultiturnHandler::end(grpo_conversation* conv) {
  if (!api_.end || !conv) return;
  PluginCallScope scope(plugin_.info.name.c_str(), plugin_.info.file.c_str(), "end");
  api_.end(instance_, conv);
}

}  // namespace grpo::plugins
