// Typed reads of a resolved Config that remember which flags were read. A
// command's settings struct is built through one reader, once; the names it
// read are then the set of flags the command uses — derived, not kept by hand —
// and a flag set by the user outside that set gets a warning.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/config.h"

namespace grpo::config {

class SettingsReader {
 public:
  explicit SettingsReader(const Config& config) : config_(config) {}

  bool flag(std::string_view name);
  int64_t integer(std::string_view name);
  double real(std::string_view name);
  std::optional<int64_t> optional_integer(std::string_view name);  // nullopt when unset (null)
  std::optional<double> optional_real(std::string_view name);
  std::string text(std::string_view name);                   // "" when unset
  std::vector<std::string> texts(std::string_view name);     // empty when unset
  std::vector<double> reals(std::string_view name);          // empty when unset
  nlohmann::json json(std::string_view name);
  bool is_set(std::string_view name);  // given explicitly (YAML or command line)

  // The value of a string flag as one of `values`; anything else is a
  // ConfigError naming the flag, the value and the valid ones.
  template <class E>
  E choice(std::string_view name, const std::vector<std::pair<std::string, E>>& values) {
    const std::string v = text(name);
    for (const auto& [spelled, value] : values)
      if (spelled == v) return value;
    std::vector<std::string> names;
    for (const auto& entry : values) names.push_back(entry.first);
    throw_unknown_choice(name, v, names);
  }

  const Config& config() const { return config_; }
  const std::set<std::string, std::less<>>& used() const { return used_; }
  void mark_used(std::string_view name) { used_.emplace(name); }

 private:
  [[noreturn]] static void throw_unknown_choice(std::string_view name, const std::string& value,
                                                const std::vector<std::string>& valid);
  std::string_view use(std::string_view name);
  const Config& config_;
  std::set<std::string, std::less<>> used_;
};

// Warns once per flag the user set that is not in `used` ("accepted but has no
// effect"), for a command named `command` (e.g. "training").
void warn_unused_flags(const Config& config, const std::set<std::string, std::less<>>& used,
                       std::string_view command);

}  // namespace grpo::config
