#pragma once
// The resolved configuration of a run: YAML (--config) first, then the command line, then the values
// that follow from others (epsilon_high from epsilon, the batch geometry, the sampler from use_vllm).

#include "config/flag_table.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>
#include "util/user_error.h"

namespace grpo::config {

// Every message is meant for the user: it names the flag or YAML key (with file:line), the value
// given and what is expected. Several problems are reported together, one per line.
class ConfigError : public ::grpo::UserError {
 public:
  using UserError::UserError;
};

namespace detail {
struct ConfigAccess;
}

// Every flag of the table has a value: its default unless set. Getters take canonical names or
// aliases; asking for a name that is not a flag, or with the wrong type, throws std::invalid_argument.
class Config {
 public:
  // All defaults, resolved for a world size of 1. The defaults (ms-swift's) do not pass the batch
  // divisibility check by themselves (1 completion per generation batch, 8 per group): a run must
  // set the batch sizes, as in swift.
  Config();

  bool is_set(std::string_view name) const;   // set explicitly by YAML, the command line or set()
  bool is_null(std::string_view name) const;  // optional value left empty
  // Where the value came from: "default", "configs/x.yaml:3", "--flag", "derived from epsilon", ...
  std::string origin(std::string_view name) const;
  int world_size() const { return world_size_; }

  bool get_bool(std::string_view name) const;
  int64_t get_int(std::string_view name) const;   // throws std::logic_error when null
  double get_double(std::string_view name) const;  // Float or Int flags; throws when null
  std::string get_string(std::string_view name) const;  // "" when null
  std::vector<std::string> get_strings(std::string_view name) const;  // empty when null
  std::vector<double> get_doubles(std::string_view name) const;       // empty when null
  nlohmann::json get_json(std::string_view name) const;  // maps are objects, unset optionals null

  nlohmann::json to_json() const;  // every flag

  // Flags and top-level YAML keys no table row knows, kept for the plugins of
  // the run (ParseOptions::plugin_flags): name -> the words given and where.
  // Plugins' options are flags and keys too, as ms-swift's reward options
  // are; the trainer checks them against the loaded plugins. The command line
  // wins over the YAML file here as everywhere.
  struct PluginFlag {
    std::vector<std::string> words;
    std::string where;  // "--unit", or "option 'unit' in x.yaml:3"
  };
  const std::map<std::string, PluginFlag>& plugin_flags() const { return plugin_flags_; }
  // The resolved configuration as args.yaml: grouped as in --help, loadable again with --config.
  std::string to_yaml() const;
  // Writes to_yaml() to a temporary name in the same directory, then renames it over `path`.
  void write_args_yaml(const std::string& path) const;

  // Overrides one flag as the command line would, then re-derives dependent values. On a problem
  // throws ConfigError and leaves the configuration unchanged.
  void set(std::string_view name, const nlohmann::json& value, std::string_view origin);

 private:
  friend struct detail::ConfigAccess;

  struct Entry {
    nlohmann::json value;  // what getters return: `given` or the default, plus derivations
    nlohmann::json given;  // as set explicitly, kept so that derivations can be redone
    std::string origin = "default";
    bool explicit_set = false;
    bool derived = false;
  };
  const Entry& entry(std::string_view name) const;

  std::map<std::string, Entry, std::less<>> entries_;
  std::map<std::string, PluginFlag> plugin_flags_;
  int world_size_ = 1;
  bool check_batch_geometry_ = false;
};

struct ParseResult {
  Config config;
  std::map<std::string, std::vector<std::string>> extras;  // flags of allowed_extra, by name
  std::vector<std::string> positional;                     // words before the first flag
};

struct ParseOptions {
  // Flags of the subcommand itself (e.g. score's --completions); they come back unparsed in `extras`.
  std::vector<std::string> allowed_extra;
  // 0 reads it from the environment (WORLD_SIZE, else NPROC_PER_NODE x NNODES).
  int world_size = 0;
  // Subcommands that do not train (score, plugins) skip the generation-batch divisibility checks;
  // the batch geometry is still derived.
  bool check_batch_geometry = true;
  // Unknown flags are kept in Config::plugin_flags() for the plugins instead of refused.
  bool plugin_flags = false;
};

// Parses the words after the subcommand: `--name value`, `--name=value`, lists as `--reward_funcs a b c`
// (values run until the next word starting with `--`), maps as JSON, `--config path.yaml`.
ParseResult parse(const std::vector<std::string>& args, const ParseOptions& options);
// The same with the world size from the environment. The batch geometry is checked when the
// subcommand declares no flags of its own (train, config); subcommands with extras (score, plugins)
// do not train. ParseOptions says it explicitly.
ParseResult parse(const std::vector<std::string>& args, const std::vector<std::string>& allowed_extra = {});

// A YAML file alone, resolved and checked for a world size of 1.
Config load_yaml_file(const std::string& path, bool check_batch_geometry = true);

// WORLD_SIZE when set, else NPROC_PER_NODE x NNODES (each 1 when unset); throws ConfigError on junk.
int world_size_from_env();

// `grpo-host --help`: the flags grouped as in cli.md, with their defaults.
std::string help_text();

}  // namespace grpo::config
