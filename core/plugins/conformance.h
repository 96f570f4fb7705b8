// `grpo-host plugins --check lib.so`: the checks a plugin author runs before
// shipping, as clap-validator is for CLAP plugins — exported symbols, the SDK
// version, descriptors, the options schema, and for rewards create/destroy
// and score() on batches of 0, 1 and 64 with empty, long, invalid-UTF-8 and
// non-ASCII text, concurrently when the plugin says it is thread-safe.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace grpo::plugins {

struct CheckResult {
  std::string name;    // what was checked, e.g. "format: score 64 completions"
  bool passed = false;
  std::string detail;  // why it failed (or what was seen)
};

// Runs every check on the library at `path`; a plugin's fault is a failed
// check, never an exception. `plugin_args`: options per plugin name, for
// plugins that cannot be created with their defaults alone.
std::vector<CheckResult> check_plugin_library(const std::string& path, const nlohmann::json& plugin_args);

// The names of the dynamic symbols a shared object defines and exports,
// without the toolchain's own (those starting with '_'). Throws
// std::runtime_error when `path` is not a readable 64-bit ELF file.
std::vector<std::string> exported_symbols(const std::string& path);

}  // namespace grpo::plugins
