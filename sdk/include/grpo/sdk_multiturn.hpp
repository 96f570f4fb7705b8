// The C++ layer for multi-turn handlers (grpo.multiturn/1): a class, one macro.
// Included by grpo/sdk.hpp; see sdk/examples/hint_handler.
//
//   struct Hint : grpo::MultiturnBase<int> {  // int: each conversation's state
//     static constexpr const char* name = "hint";
//     static constexpr const char* version = "1.0.0";
//     static constexpr const char* description = "asks once more";
//     Hint(const grpo::Options& options, const grpo::Host& host);
//     void step(int& asked, const grpo::Turn& turn, grpo::TurnResult& out) {
//       if (asked++ == 0) out.append("user", "Are you sure?"); else out.finish();
//     }
//   };
//   GRPO_EXPORT_MULTITURN(Hint)
//
// Optional members a handler may define (the base supplies defaults):
//   State begin(const grpo::ConversationInfo&)  — a new conversation's state
//   std::string tools_json() const              — tool schemas for the chat template
//   double reward(State&, const grpo::Turn& last) with has_reward = true
//   void end(State&)                            — the conversation is over
#ifndef GRPO_SDK_MULTITURN_HPP
#define GRPO_SDK_MULTITURN_HPP

#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "grpo/sdk.hpp"

namespace grpo {

namespace detail {
// A dataset column by name from a column array (text when a JSON string).
inline std::optional<std::string_view> find_column(const grpo_column* columns, size_t n, std::string_view name) {
  for (size_t i = 0; i < n; ++i)
    if (view(columns[i].name) == name) return view(columns[i].text);
  return std::nullopt;
}
}  // namespace detail

// A conversation as it starts (a view; valid during begin()).
class ConversationInfo {
 public:
  explicit ConversationInfo(const grpo_conversation_info* i) : i_(i) {}
  uint64_t id() const { return i_->conversation_id; }
  int64_t prompt_index() const { return i_->prompt_index; }
  uint32_t copy_index() const { return i_->copy_index; }
  std::string_view prompt_messages_json() const { return view(i_->prompt_messages_json); }
  std::string_view columns_json() const { return view(i_->columns_json); }
  std::optional<std::string_view> column(std::string_view name) const {
    return detail::find_column(i_->columns, i_->n_columns, name);
  }
  const grpo_conversation_info* raw() const { return i_; }

 private:
  const grpo_conversation_info* i_;
};

// The policy's last turn (a view; valid during step() and reward()).
class Turn {
 public:
  explicit Turn(const grpo_turn_input* t) : t_(t) {}
  std::string_view conversation_json() const { return view(t_->conversation_json); }
  std::string_view completion() const { return view(t_->last_completion); }
  std::vector<int32_t> completion_ids() const {
    return {t_->last_completion_ids, t_->last_completion_ids + t_->n_last_completion_ids};
  }
  grpo_finish_reason finish_reason() const { return t_->last_finish_reason; }
  uint32_t index() const { return t_->turn_index; }  // 0 for the first completion
  int64_t tokens_left() const { return t_->tokens_left; }  // -1: no total limit
  std::string_view columns_json() const { return view(t_->columns_json); }
  std::optional<std::string_view> column(std::string_view name) const {
    return detail::find_column(t_->columns, t_->n_columns, name);
  }
  const grpo_turn_input* raw() const { return t_; }

 private:
  const grpo_turn_input* t_;
};

// What follows the turn: messages to append, or the end.
class TurnResult {
 public:
  explicit TurnResult(grpo_turn_output* o) : o_(o) {}
  // role: "user" or "tool". The host renders it with the chat template; its
  // tokens carry no loss.
  void append(std::string_view role, std::string_view content) {
    o_->append_message(o_->host_ctx, str(role), str(content));
  }
  void finish() { o_->done = 1; }
  // One tool call handled in this turn (failed: malformed, unknown, error).
  void count_tool_call(bool failed) {
    ++o_->tool_calls;
    if (failed) ++o_->tool_failures;
  }

 private:
  grpo_turn_output* o_;
};

struct NoState {};

// Defaults a handler class may shadow; State is one conversation's state.
template <class State = NoState>
struct MultiturnBase {
  using state_type = State;
  static constexpr bool thread_safe = false;  // true: calls may overlap on one instance
  static constexpr bool has_reward = false;   // true: reward() is a reward column named after the handler
  static std::vector<OptionSpec> options() { return {}; }
  State begin(const ConversationInfo&) { return State{}; }
  std::string tools_json() const { return {}; }
  double reward(State&, const Turn&) { return std::numeric_limits<double>::quiet_NaN(); }
  void end(State&) {}  // the conversation is over; the state is destroyed right after
};

namespace detail {

template <class T>
struct MultiturnInstance {
  explicit MultiturnInstance(const grpo_host_api* api) : host(api) {}
  Host host;
  std::optional<T> impl;
  std::string tools;  // kept for tools_json()
};

template <class T>
struct MultiturnThunks {
  using State = typename T::state_type;
  static MultiturnInstance<T>& of(grpo_multiturn_instance* self) {
    return *reinterpret_cast<MultiturnInstance<T>*>(self);
  }
  static State& state(grpo_conversation* conv) { return *reinterpret_cast<State*>(conv); }

  static grpo_status create(const grpo_host_api* host, grpo_str config, grpo_multiturn_instance** out,
                            grpo_error* err) {
    return guarded(err, [&] {
      auto inst = std::make_unique<MultiturnInstance<T>>(host);
      inst->impl.emplace(Options(view(config)), inst->host);
      inst->tools = inst->impl->tools_json();
      *out = reinterpret_cast<grpo_multiturn_instance*>(inst.release());
    });
  }
  static grpo_str tools_json(grpo_multiturn_instance* self) { return str(of(self).tools); }
  static grpo_status begin(grpo_multiturn_instance* self, const grpo_conversation_info* info, grpo_conversation** out,
                           grpo_error* err) {
    return guarded(err, [&] {
      *out = reinterpret_cast<grpo_conversation*>(new State(of(self).impl->begin(ConversationInfo(info))));
    });
  }
  static grpo_status step(grpo_multiturn_instance* self, grpo_conversation* conv, const grpo_turn_input* input,
                          grpo_turn_output* out, grpo_error* err) {
    return guarded(err, [&] {
      TurnResult result(out);
      of(self).impl->step(state(conv), Turn(input), result);
    });
  }
  static grpo_status reward(grpo_multiturn_instance* self, grpo_conversation* conv, const grpo_turn_input* last,
                            double* out, grpo_error* err) {
    return guarded(err, [&] { *out = of(self).impl->reward(state(conv), Turn(last)); });
  }
  static void end(grpo_multiturn_instance* self, grpo_conversation* conv) {
    State* s = reinterpret_cast<State*>(conv);
    try {
      of(self).impl->end(*s);
    } catch (...) {  // end() returns nothing: a failure there frees the state all the same
    }
    delete s;
  }
  static void destroy(grpo_multiturn_instance* self) { delete &of(self); }
  static const grpo_multiturn_api* api() {
    static const grpo_multiturn_api table = {
        GRPO_MULTITURN_API_STRUCT_SIZE,
        (T::thread_safe ? GRPO_MULTITURN_THREAD_SAFE : 0u) | (T::has_reward ? GRPO_MULTITURN_HAS_REWARD : 0u),
        &create, &tools_json, &begin, &step, &reward, &end, &destroy};
    return &table;
  }
};

}  // namespace detail

// Describes multi-turn handler class T for GRPO_EXPORT_PLUGINS.
template <class T>
detail::PluginRecord multiturn() {
  return detail::PluginRecord{T::name, GRPO_MULTITURN_INTERFACE, T::version, T::description,
                              detail::options_json(T::options()), detail::MultiturnThunks<T>::api(), {}};
}

}  // namespace grpo

// A library holding one multi-turn handler class.
#define GRPO_EXPORT_MULTITURN(HandlerClass) GRPO_EXPORT_PLUGINS(::grpo::multiturn<HandlerClass>())

#endif  // GRPO_SDK_MULTITURN_HPP
