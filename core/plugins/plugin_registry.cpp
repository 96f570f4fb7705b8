#include "plugins/plugin_registry.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <set>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "plugins/plugin_error.h"
#include "util/suggest.h"

namespace grpo::plugins {

namespace fs = std::filesystem;

std::string builtin_plugin_dir() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  return (exe.parent_path() / ".." / "lib" / "grpo" / "plugins").lexically_normal().string();
}

namespace {

std::vector<std::string> libraries_in(const fs::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_regular_file() && e.path().extension() == ".so") out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> split_path_list(const std::string& list) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= list.size()) {
    size_t end = list.find(':', start);
    if (end == std::string::npos) end = list.size();
    if (end > start) out.push_back(list.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

}  // namespace

PluginRegistry PluginRegistry::discover(const PluginSources& sources) {
  PluginRegistry reg;
  std::vector<std::string> files = sources.files;
  std::vector<std::string> named = sources.files;  // given as files, not found in a searched directory
  if (sources.use_env) {
    if (const char* env = std::getenv("GRPO_PLUGIN_PATH")) {
      for (const std::string& entry : split_path_list(env)) {
        reg.searched_.push_back(entry + " (GRPO_PLUGIN_PATH)");
        std::error_code ec;
        if (fs::is_directory(entry, ec)) {
          for (auto& f : libraries_in(entry)) files.push_back(f);
        } else {
          files.push_back(entry);
          named.push_back(entry);
        }
      }
    }
  }
  if (sources.use_builtin) {
    std::string dir = sources.builtin_dir.empty() ? builtin_plugin_dir() : sources.builtin_dir;
    reg.searched_.push_back(dir + " (built-in)");
    for (auto& f : libraries_in(dir)) files.push_back(f);
  }

  auto key_of = [](const std::string& file) {
    std::error_code ec;
    fs::path canonical = fs::weakly_canonical(file, ec);
    return ec ? file : canonical.string();
  };
  std::set<std::string> named_keys;
  for (const std::string& file : named) named_keys.insert(key_of(file));
  std::set<std::string> seen;  // one library named twice (e.g. a built-in given explicitly) loads once
  for (const std::string& file : files) {
    const std::string key = key_of(file);
    if (!seen.insert(key).second) continue;
    try {
      reg.add(PluginLibrary::load(file));
    } catch (const NotAPluginError& e) {
      if (named_keys.count(key)) throw;  // named as a file: the user meant it
      spdlog::warn("skipping {} in the plugin search path: {}", file, e.what());
    }
  }
  return reg;
}

void PluginRegistry::add(const std::shared_ptr<PluginLibrary>& library) {
  libraries_.push_back(library);
  for (const PluginInfo& info : library->plugins())
    spdlog::debug("plugin '{}' ({} {}, SDK {}) from {}", info.name, info.interface_id, info.version, info.sdk_version,
                  info.file);
  for (const PluginInfo& info : library->plugins()) {
    auto key = std::make_pair(info.interface_id, info.name);
    auto it = by_name_.find(key);
    if (it != by_name_.end())
      throw PluginError(fmt::format("two plugins are called '{}' ({}): '{}' and '{}'; remove one of the files from "
                                    "--plugins / GRPO_PLUGIN_PATH, or rename one plugin",
                                    info.name, info.interface_id, it->second.info.file, info.file));
    by_name_.emplace(key, ResolvedPlugin{library, info});
  }
}

ResolvedPlugin PluginRegistry::require(const std::string& name, const std::string& interface_id) const {
  auto it = by_name_.find({interface_id, name});
  if (it != by_name_.end()) return it->second;
  std::vector<std::string> names;
  for (const auto& [key, plugin] : by_name_)
    if (key.first == interface_id) names.push_back(key.second);
  std::string hint = util::closest_name(name, names);
  std::string list;
  for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
  throw PluginError(fmt::format("no {} plugin called '{}'{}; available: {}. Load the library that provides it with "
                                "--plugins path/to/lib.so (`grpo-host plugins` lists what is found)",
                                interface_id, name, hint.empty() ? "" : fmt::format(" (did you mean '{}'?)", hint),
                                list.empty() ? "none" : list));
}

std::vector<PluginInfo> PluginRegistry::all() const {
  std::vector<PluginInfo> out;
  for (const auto& lib : libraries_)
    for (const auto& p : lib->plugins()) out.push_back(p);
  return out;
}

}  // namespace grpo::plugins
