// `grpo-host plugins --check lib.so`: the checks a plugin author runs before
// shipping, as clap-validator is for CLAP plugins — exported symbols, the SDK
// version, descriptors, the options schema, and for rewards create/destroy
// and score() on batches of 0, 1 and 64 with empty, long, invalid-UTF-8 and
// non-ASCII text, concurrently when the plugin says it is thread-safe.
//
// Like clap-validator, every check that calls into the plugin runs in a
// process of its own (grpo-plugin-worker, the isolated reward's worker): a
// plugin that crashes, aborts, exits, hangs or prints on stdout fails that
// check, named with what happened, and the other checks still run.
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

class Wire;

struct CheckOptions {
  // Seconds one check may take (`--check_timeout`); past it, its process is
  // killed and the check fails.
  double timeout_s = 60;
  // "" = grpo-plugin-worker beside this executable (or $GRPO_PLUGIN_WORKER).
  std::string worker_exe;
};

// Runs every check on the library at `path`; a plugin's fault is a failed
// check, never an exception or the checker's death. `plugin_args`: options
// per plugin name, for plugins that cannot be created with their defaults alone.
std::vector<CheckResult> check_plugin_library(const std::string& path, const nlohmann::json& plugin_args,
                                              const CheckOptions& options = {});

// grpo-plugin-worker, once it has read kCheckWorkerMagic: runs the one check
// the host names and replies with its result; exits without unloading the
// plugin (destroying it is a check of its own).
int serve_plugin_check(Wire& in, Wire& out);

// The names of the dynamic symbols a shared object defines and exports,
// without the toolchain's own (those starting with '_'). Throws
// std::runtime_error when `path` is not a readable 64-bit ELF file.
std::vector<std::string> exported_symbols(const std::string& path);

}  // namespace grpo::plugins
