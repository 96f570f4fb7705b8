// One loaded plugin library (.so): its entry, checked, and its descriptors.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <grpo/grpo.h>

namespace grpo::plugins {

// A plugin as a library lists it; strings are copied out of the library.
struct PluginInfo {
  std::string name;
  std::string interface_id;  // "grpo.reward/1", ...
  std::string version;
  std::string description;
  std::string options_json;  // JSON array, "[]" when none
  std::string file;          // the library it came from
  std::string sdk_version;   // the SDK the library was built with, "1.0.0"
};

// Keeps the library mapped for as long as anything it created lives: every
// plugin object holds a shared_ptr to its PluginLibrary.
class PluginLibrary {
 public:
  // Loads and checks `path`. Throws PluginError naming the file on: missing
  // file, not a shared object, no entry symbol, other ABI major, failing init.
  static std::shared_ptr<PluginLibrary> load(const std::string& path);
  ~PluginLibrary();
  PluginLibrary(const PluginLibrary&) = delete;
  PluginLibrary& operator=(const PluginLibrary&) = delete;

  const std::string& path() const { return path_; }
  const std::vector<PluginInfo>& plugins() const { return plugins_; }
  // The plugin's function table for `interface_id`, or nullptr. The table
  // begins with uint32_t struct_size.
  const void* factory(const std::string& name, const std::string& interface_id) const;

 private:
  PluginLibrary() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string path_;
  grpo_entry entry_{};  // the part of the plugin's entry this host knows, zero-filled beyond
  bool initialised_ = false;  // init() succeeded (or there is none): deinit() is due
  std::vector<PluginInfo> plugins_;
};

}  // namespace grpo::plugins
