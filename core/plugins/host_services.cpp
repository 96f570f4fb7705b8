#include "plugins/host_services.h"

#include <spdlog/spdlog.h>

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

HostServices::HostServices(std::string plugin_name, std::shared_ptr<MetricsSink> metrics, std::string run_config_json)
    : plugin_name_(std::move(plugin_name)), metrics_(std::move(metrics)), run_config_json_(std::move(run_config_json)) {
  api_.struct_size = GRPO_HOST_API_STRUCT_SIZE;
  api_.host_version = GRPO_SDK_VERSION_INIT;
  api_.host_ctx = this;
  api_.log = &HostServices::log;
  api_.log_metric = &HostServices::log_metric;
  api_.run_config_json = &HostServices::run_config;
}

void HostServices::log(void* ctx, grpo_log_level level, grpo_str message) {
  auto* self = static_cast<HostServices*>(ctx);
  std::string_view text = message.data ? std::string_view(message.data, message.size) : std::string_view();
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
  if (self->metrics_ && name.data) self->metrics_->add(std::string(name.data, name.size), value);
}

grpo_str HostServices::run_config(void* ctx) {
  auto* self = static_cast<HostServices*>(ctx);
  return grpo_str{self->run_config_json_.data(), self->run_config_json_.size()};
}

}  // namespace grpo::plugins
