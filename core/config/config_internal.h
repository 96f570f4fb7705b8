#pragma once
// Shared by the files of core/config only; not part of the configuration API.

#include "config/config.h"
#include "config/flag_table.h"

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include <initializer_list>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace grpo::config::detail {

// Where a value was written, so that a message can point at it.
struct Location {
  enum class Kind { Yaml, Cli, Program };
  Kind kind = Kind::Program;
  std::string spelled;  // the name as the user wrote it (an alias stays an alias)
  std::string file;
  int line = 0;         // 1-based
  std::string origin;   // for Program: the caller's description

  std::string describe() const;     // "option 'x' in f.yaml:3", "flag --x", "'x' (set by ...)"
  std::string origin_text() const;  // what Config::origin() reports: "f.yaml:3", "--x", ...
};

// Problems are collected so that one ConfigError can list them all; a flag with a problem is
// remembered so that checks across flags do not pile follow-up errors on it.
class Problems {
 public:
  void add(std::string message, std::string_view flag = {});
  bool empty() const { return messages_.empty(); }
  bool touches(std::initializer_list<std::string_view> flags) const;
  void throw_if_any() const;

 private:
  std::vector<std::string> messages_;
  std::set<std::string, std::less<>> flags_;
};

struct ValueProblem {
  enum class Kind { Invalid, Unavailable };
  Kind kind = Kind::Invalid;
  std::string given;   // the value as written, quoted for messages
  std::string detail;  // Invalid: what is expected; Unavailable: what to do instead
};

std::string problem_message(const ValueProblem& problem, const Location& where);

// Typed, normalised and checked values; each throws ValueProblem.
nlohmann::json value_from_words(const FlagSpec& spec, const std::vector<std::string>& words);
nlohmann::json value_from_yaml(const FlagSpec& spec, const YAML::Node& node);
nlohmann::json value_from_json(const FlagSpec& spec, const nlohmann::json& value);

// Untyped YAML -> JSON (plugin options): plain scalars become bools, numbers or strings.
nlohmann::json yaml_to_json(const YAML::Node& node);

// Values as a user writes them in messages and in args.yaml (flow style YAML).
std::string render(const nlohmann::json& value);

std::string expectation(const FlagSpec& spec);

struct ConfigAccess {
  static Config::Entry& entry(Config& config, const std::string& name) {
    return config.entries_.at(name);
  }
  static void set_world_size(Config& config, int world_size) { config.world_size_ = world_size; }
  // Keeps the first one given: the command line's, which is added before the YAML file's.
  static void add_plugin_flag(Config& config, const std::string& name, std::vector<std::string> words,
                              std::string where) {
    config.plugin_flags_.emplace(name, Config::PluginFlag{std::move(words), std::move(where)});
  }
  static void set_check_batch_geometry(Config& config, bool on) { config.check_batch_geometry_ = on; }
  static bool check_batch_geometry(const Config& config) { return config.check_batch_geometry_; }
};

// Stores a checked value as explicitly set at `where`.
void store(Config& config, const FlagSpec& spec, nlohmann::json value, const Location& where);

// Reads `path` into `config`; problems (missing file, bad YAML, unknown keys, bad values) are recorded.
// Returns false when the file as a whole could not be used.
// plugin_keys: keys no table row knows are kept as plugin options (Config::plugin_flags).
bool apply_yaml_file(Config& config, const std::string& path, Problems& problems, bool plugin_keys = false);

// Derives the values that follow from others and checks the rules across flags.
void resolve(Config& config, Problems& problems);

}  // namespace grpo::config::detail
