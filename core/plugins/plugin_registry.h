// Finds plugin libraries and resolves plugin names to them.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "plugins/plugin_library.h"

namespace grpo::plugins {

// Where plugins come from, in this order.
struct PluginSources {
  std::vector<std::string> files;  // --plugins / --external_plugins / YAML `plugins:`
  bool use_env = true;             // GRPO_PLUGIN_PATH: ':'-separated files or directories
  bool use_builtin = true;         // the built-in plugin directory
  std::string builtin_dir;         // empty: found relative to the executable
};

// The built-in plugin directory: <dir of the executable>/../lib/grpo/plugins,
// so a moved or installed build still finds its plugins.
std::string builtin_plugin_dir();

struct ResolvedPlugin {
  std::shared_ptr<PluginLibrary> library;
  PluginInfo info;
};

class PluginRegistry {
 public:
  // Loads every library the sources name. Throws PluginError on a broken
  // library or on two libraries providing one plugin name (both files named).
  static PluginRegistry discover(const PluginSources& sources);

  // The plugin `name` of interface `interface_id`; throws PluginError listing
  // what is available (and the closest name) when there is none.
  ResolvedPlugin require(const std::string& name, const std::string& interface_id) const;

  std::vector<PluginInfo> all() const;
  std::vector<std::string> searched() const { return searched_; }

 private:
  void add(const std::shared_ptr<PluginLibrary>& library);
  std::map<std::pair<std::string, std::string>, ResolvedPlugin> by_name_;  // (interface, name)
  std::vector<std::shared_ptr<PluginLibrary>> libraries_;
  std::vector<std::string> searched_;
};

}  // namespace grpo::plugins
