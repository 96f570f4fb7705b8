#include "app/plugins_command.h"

#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "config/config.h"
#include "plugins/conformance.h"
#include "plugins/plugin_error.h"
#include "plugins/plugin_registry.h"
#include "util/suggest.h"

namespace grpo::app {

namespace {

std::string kind_of(const std::string& interface_id) {
  size_t dot = interface_id.find('.'), slash = interface_id.find('/');
  if (dot == std::string::npos || slash == std::string::npos || slash < dot) return interface_id;
  return interface_id.substr(dot + 1, slash - dot - 1);
}

void describe(const plugins::PluginInfo& p) {
  std::printf("%s (%s %s)\n  file: %s\n  built with SDK %s\n  %s\n", p.name.c_str(), kind_of(p.interface_id).c_str(),
              p.version.c_str(), p.file.c_str(), p.sdk_version.c_str(), p.description.c_str());
  nlohmann::json options = nlohmann::json::parse(p.options_json, nullptr, false);
  if (!options.is_array() || options.empty()) {
    std::printf("  options: none\n");
    return;
  }
  std::printf("  options (as flags, or under plugin_args.%s in YAML):\n", p.name.c_str());
  for (const auto& o : options) {
    if (!o.is_object()) continue;
    std::printf("    %-30s %-7s default %-8s %s\n", o.value("name", "?").c_str(), o.value("type", "").c_str(),
                o.contains("default") ? o["default"].dump().c_str() : "null", o.value("help", "").c_str());
  }
}

// --check LIB: every conformance check on one library, PASS or FAIL each;
// exit status 1 when one failed. Each check that calls into the plugin runs
// in a process of its own, so a plugin that crashes fails a check, not this.
int run_checks(const std::string& file, const nlohmann::json& plugin_args, const plugins::CheckOptions& options) {
  const std::vector<plugins::CheckResult> results = plugins::check_plugin_library(file, plugin_args, options);
  size_t failed = 0;
  std::printf("checking %s\n", file.c_str());
  for (const auto& r : results) {
    failed += r.passed ? 0 : 1;
    std::printf("%s  %s%s%s\n", r.passed ? "PASS" : "FAIL", r.name.c_str(), r.detail.empty() ? "" : ": ",
                r.detail.c_str());
  }
  if (failed)
    std::printf("%zu of %zu checks passed, %zu failed\n", results.size() - failed, results.size(), failed);
  else
    std::printf("%zu of %zu checks passed: the plugin conforms\n", results.size(), results.size());
  return failed ? 1 : 0;
}

}  // namespace

int run_plugins_command(const std::vector<std::string>& args) {
  config::ParseResult parsed =
      config::parse(args, config::ParseOptions{{"describe", "check", "check_timeout"}, 0, /*check_batch_geometry=*/false});
  auto check_arg = parsed.extras.find("check");
  if (check_arg != parsed.extras.end()) {
    if (check_arg->second.size() != 1) throw config::ConfigError("--check takes one plugin library, e.g. --check libmine.so");
    plugins::CheckOptions options;
    if (auto t = parsed.extras.find("check_timeout"); t != parsed.extras.end()) {
      char* end = nullptr;
      const std::string text = t->second.size() == 1 ? t->second[0] : "";
      options.timeout_s = std::strtod(text.c_str(), &end);
      if (text.empty() || *end != '\0' || !(options.timeout_s > 0) || options.timeout_s > 86400)
        throw config::ConfigError("--check_timeout takes the seconds one check may take, from 0 to 86400 (default 60)");
    }
    return run_checks(check_arg->second[0], parsed.config.get_json("plugin_args"), options);
  }
  plugins::PluginSources sources;
  sources.files = parsed.config.get_strings("plugins");
  plugins::PluginRegistry registry = plugins::PluginRegistry::discover(sources);
  std::vector<plugins::PluginInfo> all = registry.all();

  auto describe_arg = parsed.extras.find("describe");
  if (describe_arg != parsed.extras.end()) {
    if (describe_arg->second.size() != 1) throw config::ConfigError("--describe takes one plugin name");
    const std::string& name = describe_arg->second[0];
    std::vector<std::string> names;
    bool found = false;
    for (const auto& p : all) {
      names.push_back(p.name);
      if (p.name == name) {
        describe(p);
        found = true;
      }
    }
    if (!found) {
      std::string hint = util::closest_name(name, names);
      throw plugins::PluginError(fmt::format("no plugin called '{}'{}; `grpo-host plugins` lists them", name,
                                             hint.empty() ? "" : fmt::format(" (did you mean '{}'?)", hint)));
    }
    return 0;
  }

  std::printf("%-20s %-10s %-9s %s\n", "NAME", "KIND", "VERSION", "FILE");
  for (const auto& p : all)
    std::printf("%-20s %-10s %-9s %s\n", p.name.c_str(), kind_of(p.interface_id).c_str(), p.version.c_str(),
                p.file.c_str());
  std::printf("\nsearched: --plugins");
  for (const auto& s : registry.searched()) std::printf(", %s", s.c_str());
  std::printf("\n");
  return 0;
}

}  // namespace grpo::app
