#include "plugins/plugin_library.h"

#include <cstring>
#include <filesystem>
#include <fstream>

#define BOOST_DLL_USE_STD_FS 1
#include <boost/dll/shared_library.hpp>
#include <fmt/format.h>

#include "plugins/host_services.h"
#include "plugins/plugin_error.h"
#include "plugins/plugin_text.h"

namespace grpo::plugins {

namespace fs = std::filesystem;

struct PluginLibrary::Impl {
  boost::dll::shared_library library;
};

namespace {

std::string version_string(const grpo_version& v) { return fmt::format("{}.{}.{}", v.major, v.minor, v.patch); }

bool is_elf(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  in.read(magic, 4);
  return in.gcount() == 4 && std::memcmp(magic, "\x7f" "ELF", 4) == 0;
}

std::string safe(const char* s) { return s ? s : ""; }

}  // namespace

std::shared_ptr<PluginLibrary> PluginLibrary::load(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec))
    throw PluginError(fmt::format("plugin file '{}' does not exist; check the path given to --plugins, the YAML "
                                  "'plugins:' list or GRPO_PLUGIN_PATH",
                                  path));
  if (fs::is_directory(path, ec))
    throw PluginError(fmt::format("plugin path '{}' is a directory; give the .so file, or put the directory in "
                                  "GRPO_PLUGIN_PATH",
                                  path));
  if (!is_elf(path))
    throw NotAPluginError(fmt::format("plugin file '{}' is not a shared object (no ELF header); build it as a "
                                  "MODULE library against grpo::sdk",
                                  path));

  std::shared_ptr<PluginLibrary> lib(new PluginLibrary());
  lib->path_ = fs::absolute(path).lexically_normal().string();
  lib->impl_ = std::make_unique<Impl>();
  try {
    // Local symbol visibility: two plugins defining the same symbol cannot clash.
    lib->impl_->library.load(lib->path_, boost::dll::load_mode::rtld_local | boost::dll::load_mode::rtld_now);
  } catch (const std::exception& e) {
    throw PluginError(fmt::format("cannot load plugin '{}': {}; rebuild it for this machine (missing "
                                  "libraries show with `ldd {}`)",
                                  lib->path_, e.what(), lib->path_));
  }
  if (!lib->impl_->library.has(GRPO_PLUGIN_ENTRY_SYMBOL))
    throw NotAPluginError(fmt::format("'{}' is a shared object but not a grpo plugin: it does not export '{}'; "
                                  "define it with GRPO_EXPORT_REWARD / GRPO_EXPORT_PLUGINS (grpo/sdk.hpp) and "
                                  "build with the SDK's CMake package",
                                  lib->path_, GRPO_PLUGIN_ENTRY_SYMBOL));

  // Version first: read struct_size and abi_version before anything else.
  const auto& entry = lib->impl_->library.get<const grpo_entry>(GRPO_PLUGIN_ENTRY_SYMBOL);
  const size_t version_end = offsetof(grpo_entry, abi_version) + sizeof(grpo_version);
  if (entry.struct_size < version_end)
    throw PluginError(fmt::format("plugin '{}' has a malformed entry (struct_size {}); rebuild it against the "
                                  "grpo SDK",
                                  lib->path_, entry.struct_size));
  const grpo_version host = GRPO_SDK_VERSION_INIT;
  if (entry.abi_version.major != host.major)
    throw PluginError(fmt::format("plugin '{}' was built for grpo SDK {} but this host speaks SDK {} (major "
                                  "versions differ); rebuild the plugin against SDK {}.x",
                                  lib->path_, version_string(entry.abi_version), version_string(host),
                                  host.major));
  // Copy what both sides know; a newer minor's extra fields stay unread.
  std::memcpy(&lib->entry_, &entry, std::min<size_t>(entry.struct_size, sizeof(grpo_entry)));
  if (!lib->entry_.plugin_count || !lib->entry_.get_plugin || !lib->entry_.get_factory)
    throw PluginError(fmt::format("plugin '{}' has an incomplete entry (plugin_count, get_plugin and "
                                  "get_factory are required); rebuild it against the grpo SDK",
                                  lib->path_));

  if (lib->entry_.init) {
    // A library-wide table: logs carry the file name, metrics go nowhere yet.
    static HostServices library_services("plugin-library", nullptr, "{}");
    grpo_error err{};
    if (lib->entry_.init(library_services.api(), &err) != GRPO_OK)
      throw PluginError(fmt::format("plugin '{}' failed to initialise: {}", lib->path_, error_text(err)));
  }
  lib->initialised_ = true;  // deinit() pairs with a successful init() only

  const uint32_t n = lib->entry_.plugin_count();
  for (uint32_t i = 0; i < n; ++i) {
    const grpo_plugin_descriptor* d = lib->entry_.get_plugin(i);
    if (!d) continue;
    grpo_plugin_descriptor copy{};
    std::memcpy(&copy, d, std::min<size_t>(d->struct_size, sizeof(copy)));
    if (!copy.name || !*copy.name || !copy.interface_id)
      throw PluginError(fmt::format("plugin '{}' lists a plugin #{} without a name or interface id", lib->path_, i));
    lib->plugins_.push_back(PluginInfo{copy.name, copy.interface_id, safe(copy.version), safe(copy.description),
                                       copy.options_json ? copy.options_json : "[]", lib->path_,
                                       version_string(entry.abi_version)});
  }
  return lib;
}

PluginLibrary::~PluginLibrary() {
  if (initialised_ && impl_ && impl_->library.is_loaded() && entry_.deinit) entry_.deinit();
}

const void* PluginLibrary::factory(const std::string& name, const std::string& interface_id) const {
  return entry_.get_factory(name.c_str(), interface_id.c_str());
}

}  // namespace grpo::plugins
