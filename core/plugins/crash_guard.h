// Names the plugin when the process dies inside it.
//
// Rationale: a segfault inside a plugin cannot be recovered in-process, but
// the user must learn which plugin and which call crashed instead of seeing a
// bare "Segmentation fault". A scope marks the current thread as inside a
// plugin call; the fatal-signal handler prints that and re-raises.
#pragma once

namespace grpo::plugins {

void install_crash_handlers();

class PluginCallScope {
 public:
  // All three strings must outlive the scope.
  PluginCallScope(const char* plugin, const char* file, const char* call);
  ~PluginCallScope();
  PluginCallScope(const PluginCallScope&) = delete;
  PluginCallScope& operator=(const PluginCallScope&) = delete;

 private:
  const char* saved_[3];
};

}  // namespace grpo::plugins
