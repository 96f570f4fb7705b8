#include "config/log_level.h"

#include <cstdlib>
#include <string>

#include <spdlog/spdlog.h>

#include "config/config.h"

namespace grpo::config {

void apply_log_level(std::string_view name, std::string_view origin) {
  static const std::pair<const char*, spdlog::level::level_enum> kLevels[] = {
      {"trace", spdlog::level::trace}, {"debug", spdlog::level::debug}, {"info", spdlog::level::info},
      {"warn", spdlog::level::warn},   {"error", spdlog::level::err}};
  for (const auto& [spelled, level] : kLevels)
    if (name == spelled) return spdlog::set_level(level);
  throw ConfigError(std::string(origin) + " '" + std::string(name) +
                    "' is not a log level: expected trace, debug, info, warn or error");
}

void apply_log_level_from_env() {
  if (const char* env = std::getenv("GRPO_LOG_LEVEL"); env && *env) apply_log_level(env, "GRPO_LOG_LEVEL");
}

}  // namespace grpo::config
