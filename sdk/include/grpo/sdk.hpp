// The C++ layer of the grpo SDK (header-only, C++17).
//
// A reward plugin is a class plus one export macro:
//
//   struct MyReward : grpo::RewardBase {
//     static constexpr const char* name = "my_reward";
//     static constexpr const char* version = "1.0.0";
//     static constexpr const char* description = "1.0 when ...";
//     MyReward(const grpo::Options& options, const grpo::Host& host);
//     void score(const grpo::RewardBatch& batch, double* rewards);  // one per sample; NaN = no opinion
//   };
//   GRPO_EXPORT_REWARD(MyReward)
//
// This layer fills the C structs and version fields, and catches every
// exception at the boundary: a throw inside score() reaches the host as an
// error status with the exception's message.
#ifndef GRPO_SDK_HPP
#define GRPO_SDK_HPP

#include <cstddef>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "grpo/grpo.h"
#include "grpo/sdk_json.hpp"

namespace grpo {

inline std::string_view view(grpo_str s) { return s.data ? std::string_view(s.data, s.size) : std::string_view(); }
inline grpo_str str(std::string_view s) { return grpo_str{s.data(), s.size()}; }

// An error with a status code; thrown inside a plugin, it crosses the ABI as that code.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message, grpo_status code = GRPO_INVALID_ARGUMENT)
      : std::runtime_error(message), code_(code) {}
  grpo_status code() const { return code_; }

 private:
  grpo_status code_;
};

// The host's services for one plugin instance.
class Host {
 public:
  explicit Host(const grpo_host_api* api = nullptr) : api_(api) {}

  void log(grpo_log_level level, std::string_view message) const {
    if (api_ && GRPO_HAS_FIELD(api_, grpo_host_api, log) && api_->log) api_->log(api_->host_ctx, level, str(message));
  }
  void debug(std::string_view m) const { log(GRPO_LOG_DEBUG, m); }
  void info(std::string_view m) const { log(GRPO_LOG_INFO, m); }
  void warn(std::string_view m) const { log(GRPO_LOG_WARN, m); }
  void error(std::string_view m) const { log(GRPO_LOG_ERROR, m); }

  // A scalar metric, averaged per logging step into logging.jsonl.
  void metric(std::string_view name, double value) const {
    if (api_ && GRPO_HAS_FIELD(api_, grpo_host_api, log_metric) && api_->log_metric)
      api_->log_metric(api_->host_ctx, str(name), value);
  }
  std::string_view run_config_json() const {
    if (api_ && GRPO_HAS_FIELD(api_, grpo_host_api, run_config_json) && api_->run_config_json)
      return view(api_->run_config_json(api_->host_ctx));
    return "{}";
  }
  // The run's tokenizer and chat template (hosts of SDK 1.1 on that have one;
  // has_text() says). Each throws grpo::Error with the host's message on
  // malformed input, and when the host has no tokenizer.
  bool has_text() const {
    return api_ && GRPO_HAS_FIELD(api_, grpo_host_api, render_chat) && api_->tokenize && api_->detokenize &&
           api_->render_chat;
  }
  std::vector<int32_t> tokenize(std::string_view text, bool add_special_tokens = false) const {
    require_text();
    size_t n = 0;
    grpo_error err{};
    check(api_->tokenize(api_->host_ctx, str(text), add_special_tokens, nullptr, 0, &n, &err), err);
    std::vector<int32_t> ids(n);
    check(api_->tokenize(api_->host_ctx, str(text), add_special_tokens, ids.data(), ids.size(), &n, &err), err);
    return ids;
  }
  std::string detokenize(const std::vector<int32_t>& ids, bool skip_special_tokens = true) const {
    require_text();
    return sized_text([&](char* out, size_t capacity, size_t* size, grpo_error* err) {
      return api_->detokenize(api_->host_ctx, ids.data(), ids.size(), skip_special_tokens, out, capacity, size, err);
    });
  }
  std::string render_chat(std::string_view messages_json, bool add_generation_prompt = true) const {
    require_text();
    return sized_text([&](char* out, size_t capacity, size_t* size, grpo_error* err) {
      return api_->render_chat(api_->host_ctx, str(messages_json), add_generation_prompt, out, capacity, size, err);
    });
  }

  const grpo_host_api* api() const { return api_; }

 private:
  void require_text() const {
    if (!has_text()) throw Error("the host offers no tokenizer here (it is older than SDK 1.1, or runs without a model)");
  }
  static void check(grpo_status status, const grpo_error& err) {
    if (status != GRPO_OK) throw Error(err.message);
  }
  template <class Call>
  static std::string sized_text(Call call) {
    size_t n = 0;
    grpo_error err{};
    check(call(nullptr, 0, &n, &err), err);
    std::string out(n, '\0');
    check(call(out.data(), out.size(), &n, &err), err);
    return out;
  }
  const grpo_host_api* api_;
};

// One option a plugin accepts; published so `grpo-host plugins --describe` can
// print it and the host can fill it from the run configuration.
struct OptionSpec {
  std::string name;
  std::string type;          // "int", "float", "bool", "string", "list"
  std::string default_json;  // "null" when it has no default
  std::string help;
};

// The plugin's options (a JSON object). Getters fall back to the default when
// a key is absent or null, and throw grpo::Error naming the key on a wrong type.
class Options {
 public:
  Options() : json_(Json::parse("{}")) {}
  explicit Options(std::string_view json_text) {
    try {
      json_ = Json::parse(json_text.empty() ? std::string_view("{}") : json_text);
    } catch (const std::exception& e) {
      throw Error(std::string("plugin options are not valid JSON: ") + e.what());
    }
    if (!json_.is_object()) throw Error("plugin options must be a JSON object");
  }

  bool has(const std::string& key) const {
    const Json* v = json_.find(key);
    return v && !v->is_null();
  }
  double get_double(const std::string& key, double fallback) const {
    return get<double>(key, fallback, [](const Json& v) { return v.as_double(); });
  }
  long long get_int(const std::string& key, long long fallback) const {
    return get<long long>(key, fallback, [](const Json& v) { return v.as_int(); });
  }
  bool get_bool(const std::string& key, bool fallback) const {
    return get<bool>(key, fallback, [](const Json& v) { return v.as_bool(); });
  }
  std::string get_string(const std::string& key, const std::string& fallback) const {
    return get<std::string>(key, fallback, [](const Json& v) { return v.as_string(); });
  }
  std::optional<double> get_optional_double(const std::string& key) const {
    if (!has(key)) return std::nullopt;
    return get_double(key, 0);
  }
  const Json& json() const { return json_; }

 private:
  template <class T, class F>
  T get(const std::string& key, T fallback, F convert) const {
    const Json* v = json_.find(key);
    if (!v || v->is_null()) return fallback;
    try {
      return convert(*v);
    } catch (const std::exception& e) {
      throw Error("option '" + key + "': " + e.what());
    }
  }
  Json json_;
};

// A completion to score (a view; valid during score()).
class RewardSample {
 public:
  explicit RewardSample(const grpo_reward_sample* s) : s_(s) {}

  std::string_view completion() const { return view(s_->completion); }
  std::string_view prompt_messages_json() const { return view(s_->prompt_messages_json); }
  const int32_t* completion_ids() const { return GRPO_HAS_FIELD(s_, grpo_reward_sample, n_completion_ids) ? s_->completion_ids : nullptr; }
  size_t n_completion_ids() const { return completion_ids() ? s_->n_completion_ids : 0; }
  // Generated tokens; -1 when the host does not know them.
  int64_t completion_tokens() const { return GRPO_HAS_FIELD(s_, grpo_reward_sample, completion_tokens) ? s_->completion_tokens : -1; }
  bool is_truncated() const { return GRPO_HAS_FIELD(s_, grpo_reward_sample, is_truncated) && s_->is_truncated != 0; }
  int64_t prompt_index() const { return GRPO_HAS_FIELD(s_, grpo_reward_sample, prompt_index) ? s_->prompt_index : -1; }
  std::string_view columns_json() const { return GRPO_HAS_FIELD(s_, grpo_reward_sample, columns_json) ? view(s_->columns_json) : "{}"; }
  // A multi-turn rollout's whole conversation (JSON messages); empty for one turn or a host before 1.2.
  std::string_view conversation_json() const {
    return GRPO_HAS_FIELD(s_, grpo_reward_sample, conversation_json) ? view(s_->conversation_json) : std::string_view();
  }

  // A dataset column: its decoded text when it is a JSON string, else its JSON.
  std::optional<std::string_view> column(std::string_view name) const {
    if (!GRPO_HAS_FIELD(s_, grpo_reward_sample, n_columns)) return std::nullopt;
    for (size_t i = 0; i < s_->n_columns; ++i)
      if (view(s_->columns[i].name) == name) return view(s_->columns[i].text);
    return std::nullopt;
  }
  const grpo_reward_sample* raw() const { return s_; }

 private:
  const grpo_reward_sample* s_;
};

class RewardBatch {
 public:
  explicit RewardBatch(const grpo_reward_batch* b) : b_(b) {}
  size_t size() const { return b_->n; }
  RewardSample operator[](size_t i) const { return RewardSample(grpo_reward_batch_sample(b_, i)); }
  int64_t global_step() const { return state() ? state()->global_step : 0; }
  int64_t max_steps() const { return state() ? state()->max_steps : 0; }
  const grpo_trainer_state* state() const { return GRPO_HAS_FIELD(b_, grpo_reward_batch, state) ? b_->state : nullptr; }

 private:
  const grpo_reward_batch* b_;
};

// Defaults a reward class may shadow.
struct RewardBase {
  static constexpr bool thread_safe = false;  // true: score() may run concurrently on one instance
  static std::vector<OptionSpec> options() { return {}; }
};

namespace detail {

inline grpo_status fail(grpo_error* err, grpo_status code, const char* message) {
  if (err) {
    err->code = code;
    std::strncpy(err->message, message, GRPO_ERROR_MESSAGE_SIZE - 1);
    err->message[GRPO_ERROR_MESSAGE_SIZE - 1] = '\0';
  }
  return code;
}

// Runs `body`, turning any exception into a status + message.
template <class F>
grpo_status guarded(grpo_error* err, F&& body) noexcept {
  try {
    body();
    return GRPO_OK;
  } catch (const Error& e) {
    return fail(err, e.code(), e.what());
  } catch (const std::exception& e) {
    return fail(err, GRPO_INTERNAL, e.what());
  } catch (...) {
    return fail(err, GRPO_UNKNOWN, "unknown exception");
  }
}

inline std::string options_json(const std::vector<OptionSpec>& options) {
  std::string out = "[";
  for (size_t i = 0; i < options.size(); ++i) {
    const OptionSpec& o = options[i];
    if (i) out += ",";
    out += "{\"name\":" + json_quote(o.name) + ",\"type\":" + json_quote(o.type) +
           ",\"default\":" + (o.default_json.empty() ? "null" : o.default_json) + ",\"help\":" + json_quote(o.help) + "}";
  }
  return out + "]";
}

// A plugin object and the Host it was given, which lives exactly as long:
// a class may keep `const Host&` or a copy (a Host is one pointer).
template <class T>
struct Instance {
  explicit Instance(const grpo_host_api* api) : host(api) {}
  Host host;
  std::optional<T> impl;
};

template <class T, class Handle>
grpo_status create_instance(const grpo_host_api* host, grpo_str config, Handle** out, grpo_error* err) {
  return guarded(err, [&] {
    auto inst = std::make_unique<Instance<T>>(host);
    inst->impl.emplace(Options(view(config)), inst->host);
    *out = reinterpret_cast<Handle*>(inst.release());
  });
}

template <class T>
using RewardInstance = Instance<T>;

template <class T>
struct RewardThunks {
  static grpo_status create(const grpo_host_api* host, grpo_str config, grpo_reward_instance** out, grpo_error* err) {
    return create_instance<T>(host, config, out, err);
  }
  static grpo_status score(grpo_reward_instance* self, const grpo_reward_batch* batch, grpo_reward_output* out,
                           grpo_error* err) {
    return guarded(err, [&] {
      auto* inst = reinterpret_cast<RewardInstance<T>*>(self);
      RewardBatch b(batch);
      if (out->capacity < b.size()) throw Error("reward output has room for fewer rewards than samples");
      for (size_t i = 0; i < b.size(); ++i) out->rewards[i] = std::numeric_limits<double>::quiet_NaN();
      inst->impl->score(b, out->rewards);
      out->count = b.size();
    });
  }
  static void destroy(grpo_reward_instance* self) {
    delete reinterpret_cast<RewardInstance<T>*>(self);
  }
  static const grpo_reward_api* api() {
    static const grpo_reward_api table = {GRPO_REWARD_API_STRUCT_SIZE, T::thread_safe ? GRPO_REWARD_THREAD_SAFE : 0u,
                                          &create, &score, &destroy};
    return &table;
  }
};

// One plugin of a library: its descriptor and its function table.
struct PluginRecord {
  std::string name, interface_id, version, description, options;
  const void* factory;
  grpo_plugin_descriptor descriptor;
};

class PluginTable {
 public:
  explicit PluginTable(std::vector<PluginRecord> records) : records_(std::move(records)) {
    for (PluginRecord& r : records_)  // pointers fixed after the vector stops moving
      r.descriptor = {GRPO_PLUGIN_DESCRIPTOR_STRUCT_SIZE, r.name.c_str(), r.interface_id.c_str(), r.version.c_str(),
                      r.description.c_str(), r.options.c_str()};
  }
  uint32_t count() const { return static_cast<uint32_t>(records_.size()); }
  const grpo_plugin_descriptor* get(uint32_t i) const { return i < records_.size() ? &records_[i].descriptor : nullptr; }
  const void* factory(const char* name, const char* interface_id) const {
    if (!name || !interface_id) return nullptr;
    for (const PluginRecord& r : records_)
      if (r.name == name && r.interface_id == interface_id) return r.factory;
    return nullptr;
  }

 private:
  std::vector<PluginRecord> records_;
};

}  // namespace detail

// Describes reward class T for GRPO_EXPORT_PLUGINS.
template <class T>
detail::PluginRecord reward() {
  return detail::PluginRecord{T::name, GRPO_REWARD_INTERFACE, T::version, T::description,
                              detail::options_json(T::options()), detail::RewardThunks<T>::api(), {}};
}

}  // namespace grpo

// Defines the library's entry symbol for the listed plugins, e.g.
//   GRPO_EXPORT_PLUGINS(grpo::reward<Format>(), grpo::reward<Cosine>())
// Use once per library.
#define GRPO_EXPORT_PLUGINS(...)                                                                         \
  namespace {                                                                                            \
  const ::grpo::detail::PluginTable& grpo_plugin_table_() {                                              \
    static const ::grpo::detail::PluginTable table(std::vector<::grpo::detail::PluginRecord>{__VA_ARGS__}); \
    return table;                                                                                        \
  }                                                                                                      \
  uint32_t grpo_plugin_count_() { return grpo_plugin_table_().count(); }                                 \
  const grpo_plugin_descriptor* grpo_plugin_get_(uint32_t i) { return grpo_plugin_table_().get(i); }     \
  const void* grpo_plugin_factory_(const char* name, const char* id) {                                   \
    return grpo_plugin_table_().factory(name, id);                                                       \
  }                                                                                                      \
  }                                                                                                      \
  extern "C" GRPO_EXPORT const grpo_entry grpo_plugin_entry = {                                          \
      GRPO_ENTRY_STRUCT_SIZE, GRPO_SDK_VERSION_INIT, nullptr, nullptr,                                       \
      &grpo_plugin_count_, &grpo_plugin_get_, &grpo_plugin_factory_};

// A library holding one reward class.
#define GRPO_EXPORT_REWARD(RewardClass) GRPO_EXPORT_PLUGINS(::grpo::reward<RewardClass>())

#include "grpo/sdk_sampler.hpp"    // the sampler layer, built on the above
#include "grpo/sdk_multiturn.hpp"  // the multi-turn layer, likewise

#endif  // GRPO_SDK_HPP
