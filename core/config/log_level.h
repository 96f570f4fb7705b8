// The log level of every grpo program: GRPO_LOG_LEVEL, then --log_level.
// Plugins' host.debug() lines show from `debug` on.
#pragma once

#include <string_view>

namespace grpo::config {

// trace | debug | info | warn | error; throws ConfigError naming `origin`
// (e.g. "GRPO_LOG_LEVEL") for anything else.
void apply_log_level(std::string_view name, std::string_view origin);

// GRPO_LOG_LEVEL when it is set.
void apply_log_level_from_env();

}  // namespace grpo::config
