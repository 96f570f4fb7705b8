#include "plugins/host_services.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "plugins/plugin_text.h"

namespace grpo::plugins {

void MetricsSink::add(const std::string& name, double value) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& [sum, count] = sums_[name];
  sum += value;
  ++count;
}

std::map<std::string, double> MetricsSink::drain() {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::string, double> out;
  for (const auto& [name, sc] : sums_) out[name] = sc.first / static_cast<double>(sc.second);
  sums_.clear();
  return out;
}

HostServices::HostServices(std::string plugin_name, std::shared_ptr<MetricsSink> metrics, std::string run_config_json,
                           TextServices text, nlohmann::json options)
    : plugin_name_(std::move(plugin_name)),
      metrics_(std::move(metrics)),
      run_config_json_(std::move(run_config_json)),
      text_(text),
      options_(std::move(options)) {
  api_.struct_size = GRPO_HOST_API_STRUCT_SIZE;
  api_.host_version = GRPO_SDK_VERSION_INIT;
  api_.host_ctx = this;
  api_.log = &HostServices::log;
  api_.log_metric = &HostServices::log_metric;
  api_.run_config_json = &HostServices::run_config;
  api_.option_int = &HostServices::option_int;
  api_.option_double = &HostServices::option_double;
  api_.option_bool = &HostServices::option_bool;
  api_.option_string = &HostServices::option_string;
  if (text_.tokenizer) {
    api_.tokenize = &HostServices::tokenize;
    api_.detokenize = &HostServices::detokenize;
    api_.render_chat = &HostServices::render_chat;
  }
}

void HostServices::log(void* ctx, grpo_log_level level, grpo_str message) {
  auto* self = static_cast<HostServices*>(ctx);
  const std::string text = plugin_text(message);
  spdlog::level::level_enum lvl = spdlog::level::info;
  switch (level) {
    case GRPO_LOG_TRACE: lvl = spdlog::level::trace; break;
    case GRPO_LOG_DEBUG: lvl = spdlog::level::debug; break;
    case GRPO_LOG_INFO: lvl = spdlog::level::info; break;
    case GRPO_LOG_WARN: lvl = spdlog::level::warn; break;
    default: lvl = spdlog::level::err; break;
  }
  spdlog::log(lvl, "[{}] {}", self->plugin_name_, text);
}

void HostServices::log_metric(void* ctx, grpo_str name, double value) {
  auto* self = static_cast<HostServices*>(ctx);
  if (self->metrics_ && name.data) self->metrics_->add(plugin_text(name), value);
}

grpo_str HostServices::run_config(void* ctx) {
  auto* self = static_cast<HostServices*>(ctx);
  return grpo_str{self->run_config_json_.data(), self->run_config_json_.size()};
}

namespace {

// The service's answer: its full size always, its bytes when they fit; an
// exception (malformed input) becomes GRPO_INVALID_ARGUMENT with the message.
template <class F>
grpo_status answer(grpo_error* err, F&& body) {
  try {
    body();
    return GRPO_OK;
  } catch (const std::exception& e) {
    if (err) {
      err->code = GRPO_INVALID_ARGUMENT;
      std::snprintf(err->message, sizeof err->message, "%s", e.what());
    }
    return GRPO_INVALID_ARGUMENT;
  }
}

void copy_out(const std::string& text, char* out, size_t capacity, size_t* size) {
  if (size) *size = text.size();
  if (out && capacity >= text.size()) std::memcpy(out, text.data(), text.size());
}

std::string_view view_of(grpo_str s) { return s.data ? std::string_view(s.data, s.size) : std::string_view(); }

}  // namespace

grpo_status HostServices::tokenize(void* ctx, grpo_str text, int32_t add_special_tokens, int32_t* ids,
                                   size_t capacity, size_t* size, grpo_error* err) {
  auto* self = static_cast<HostServices*>(ctx);
  return answer(err, [&] {
    const std::vector<int32_t> out = self->text_.tokenizer->encode(view_of(text), add_special_tokens != 0);
    if (size) *size = out.size();
    if (ids && capacity >= out.size()) std::copy(out.begin(), out.end(), ids);
  });
}

grpo_status HostServices::detokenize(void* ctx, const int32_t* ids, size_t n_ids, int32_t skip_special_tokens,
                                     char* text, size_t capacity, size_t* size, grpo_error* err) {
  auto* self = static_cast<HostServices*>(ctx);
  return answer(err, [&] {
    const std::vector<int32_t> in(ids, ids + (ids ? n_ids : 0));
    copy_out(self->text_.tokenizer->decode_sampled(in, skip_special_tokens != 0), text, capacity, size);
  });
}

grpo_status HostServices::render_chat(void* ctx, grpo_str messages_json, int32_t add_generation_prompt, char* text,
                                      size_t capacity, size_t* size, grpo_error* err) {
  auto* self = static_cast<HostServices*>(ctx);
  return answer(err, [&] {
    const nlohmann::ordered_json messages = nlohmann::ordered_json::parse(view_of(messages_json));
    tok::ChatOptions options;
    options.add_generation_prompt = add_generation_prompt != 0;
    copy_out(tok::render_chat(*self->text_.tokenizer, self->text_.family, tok::messages_from_json(messages), options), text,
             capacity, size);
  });
}

const nlohmann::json* HostServices::option(grpo_str name) const {
  if (!options_.is_object()) return nullptr;
  const auto it = options_.find(std::string(view_of(name)));
  return it == options_.end() || it->is_null() ? nullptr : &*it;
}

grpo_status HostServices::option_int(void* ctx, grpo_str name, int64_t* value) {
  const nlohmann::json* v = static_cast<HostServices*>(ctx)->option(name);
  if (!v) return GRPO_NOT_FOUND;
  if (!v->is_number_integer()) return GRPO_INVALID_ARGUMENT;
  *value = v->get<int64_t>();
  return GRPO_OK;
}

grpo_status HostServices::option_double(void* ctx, grpo_str name, double* value) {
  const nlohmann::json* v = static_cast<HostServices*>(ctx)->option(name);
  if (!v) return GRPO_NOT_FOUND;
  if (!v->is_number()) return GRPO_INVALID_ARGUMENT;
  *value = v->get<double>();
  return GRPO_OK;
}

grpo_status HostServices::option_bool(void* ctx, grpo_str name, int32_t* value) {
  const nlohmann::json* v = static_cast<HostServices*>(ctx)->option(name);
  if (!v) return GRPO_NOT_FOUND;
  if (!v->is_boolean()) return GRPO_INVALID_ARGUMENT;
  *value = v->get<bool>() ? 1 : 0;
  return GRPO_OK;
}

grpo_status HostServices::option_string(void* ctx, grpo_str name, grpo_str* value) {
  auto* self = static_cast<HostServices*>(ctx);
  const nlohmann::json* v = self->option(name);
  if (!v) return GRPO_NOT_FOUND;
  if (!v->is_string()) return GRPO_INVALID_ARGUMENT;
  std::lock_guard<std::mutex> lock(self->option_mu_);
  // Options never change, so the first copy stays valid for every later call.
  const std::string& kept = self->option_strings_.try_emplace(std::string(view_of(name)), v->get<std::string>()).first->second;
  *value = grpo_str{kept.data(), kept.size()};
  return GRPO_OK;
}

}  // namespace grpo::plugins
