#include "config/settings_reader.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace grpo::config {

std::string_view SettingsReader::use(std::string_view name) {
  const FlagSpec* spec = find_flag(name);
  if (!spec) throw std::invalid_argument(fmt::format("settings read '{}', which is not a flag", name));
  used_.insert(spec->name);
  return name;
}

bool SettingsReader::flag(std::string_view name) { return config_.get_bool(use(name)); }
int64_t SettingsReader::integer(std::string_view name) { return config_.get_int(use(name)); }
double SettingsReader::real(std::string_view name) { return config_.get_double(use(name)); }
std::string SettingsReader::text(std::string_view name) { return config_.get_string(use(name)); }
std::vector<std::string> SettingsReader::texts(std::string_view name) { return config_.get_strings(use(name)); }
std::vector<double> SettingsReader::reals(std::string_view name) { return config_.get_doubles(use(name)); }
nlohmann::json SettingsReader::json(std::string_view name) { return config_.get_json(use(name)); }
bool SettingsReader::is_set(std::string_view name) { return config_.is_set(use(name)); }

std::optional<int64_t> SettingsReader::optional_integer(std::string_view name) {
  if (config_.is_null(use(name))) return std::nullopt;
  return config_.get_int(name);
}

std::optional<double> SettingsReader::optional_real(std::string_view name) {
  if (config_.is_null(use(name))) return std::nullopt;
  return config_.get_double(name);
}

void SettingsReader::throw_unknown_choice(std::string_view name, const std::string& value,
                                          const std::vector<std::string>& valid) {
  throw ConfigError(fmt::format("--{} '{}' is not supported: expected one of {}", name, value, fmt::join(valid, ", ")));
}

void warn_unused_flags(const Config& config, const std::set<std::string, std::less<>>& used,
                       std::string_view command) {
  for (const FlagSpec& flag : flag_table())
    if (flag.availability == Availability::Available && config.is_set(flag.name) && !used.count(flag.name))
      spdlog::warn("--{} is accepted but has no effect in {} yet", flag.name, command);
}

}  // namespace grpo::config
