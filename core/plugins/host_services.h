// The services table (grpo_host_api) the host gives each plugin instance:
// logging into spdlog with the plugin's name, metrics, the run configuration.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include <grpo/host.h>
#include <nlohmann/json.hpp>

#include "tokenizer/chat_prompt.h"
#include "tokenizer/tokenizer.h"

namespace grpo::plugins {

// Metrics that plugins report between two logging steps; averaged on drain.
class MetricsSink {
 public:
  void add(const std::string& name, double value);
  std::map<std::string, double> drain();  // mean per name since the last drain

 private:
  std::mutex mu_;
  std::map<std::string, std::pair<double, long>> sums_;
};

// The run's tokenizer and chat format, for the tokenize / detokenize /
// render_chat services; both outlive every plugin instance of the run.
struct TextServices {
  const tok::Tokenizer* tokenizer = nullptr;
  tok::ChatFamily family = tok::ChatFamily::ChatML;
  std::string tokenizer_dir;  // where `tokenizer` was loaded from: an isolated plugin's worker loads it again
};

// Owns one grpo_host_api table; keep it alive as long as the instance it was
// given to.

class HostServices {
 public:
  // Without `text` (no tokenizer), the text services are NULL in the table.
  // `options`: the instance's resolved options, served by option_*.
  HostServices(std::string plugin_name, std::shared_ptr<MetricsSink> metrics, std::string run_config_json,
               TextServices text = {}, nlohmann::json options = nlohmann::json::object());
  HostServices(const HostServices&) = delete;
  HostServices& operator=(const HostServices&) = delete;
  const grpo_host_api* api() const { return &api_; }
  const std::string& plugin_name() const { return plugin_name_; }

 private:
  static void log(void* ctx, grpo_log_level level, grpo_str message);
  static void log_metric(void* ctx, grpo_str name, double value);
  static grpo_str run_config(void* ctx);
  static grpo_status tokenize(void* ctx, grpo_str text, int32_t add_special_tokens, int32_t* ids, size_t capacity,
                              size_t* size, grpo_error* err);
  static grpo_status detokenize(void* ctx, const int32_t* ids, size_t n_ids, int32_t skip_special_tokens, char* text,
                                size_t capacity, size_t* size, grpo_error* err);
  static grpo_status render_chat(void* ctx, grpo_str messages_json, int32_t add_generation_prompt, char* text,
                                 size_t capacity, size_t* size, grpo_error* err);
  const nlohmann::json* option(grpo_str name) const;  // null when absent or null
  static grpo_status option_int(void* ctx, grpo_str name, int64_t* value);
  static grpo_status option_double(void* ctx, grpo_str name, double* value);
  static grpo_status option_bool(void* ctx, grpo_str name, int32_t* value);
  static grpo_status option_string(void* ctx, grpo_str name, grpo_str* value);

  std::string plugin_name_;
  std::shared_ptr<MetricsSink> metrics_;
  std::string run_config_json_;
  TextServices text_;
  nlohmann::json options_;
  std::map<std::string, std::string> option_strings_;  // what option_string hands out, kept alive
  std::mutex option_mu_;
  grpo_host_api api_{};
};

}  // namespace grpo::plugins
