// The services table (grpo_host_api) the host gives each plugin instance:
// logging into spdlog with the plugin's name, metrics, the run configuration.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include <grpo/host.h>

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

// Owns one grpo_host_api table; keep it alive as long as the instance it was
// given to.
class HostServices {
 public:
  HostServices(std::string plugin_name, std::shared_ptr<MetricsSink> metrics, std::string run_config_json);
  HostServices(const HostServices&) = delete;
  HostServices& operator=(const HostServices&) = delete;
  const grpo_host_api* api() const { return &api_; }
  const std::string& plugin_name() const { return plugin_name_; }

 private:
  static void log(void* ctx, grpo_log_level level, grpo_str message);
  static void log_metric(void* ctx, grpo_str name, double value);
  static grpo_str run_config(void* ctx);

  std::string plugin_name_;
  std::shared_ptr<MetricsSink> metrics_;
  std::string run_config_json_;
  grpo_host_api api_{};
};

}  // namespace grpo::plugins
