#include "config/config.h"

#include "config/config_internal.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

namespace grpo::config {

using nlohmann::json;

namespace detail {

std::string Location::describe() const {
  switch (kind) {
    case Kind::Yaml: return "option '" + spelled + "' in " + file + ":" + std::to_string(line);
    case Kind::Cli: return "flag --" + spelled;
    case Kind::Program: break;
  }
  return "'" + spelled + "' (set by " + origin + ")";
}

std::string Location::origin_text() const {
  switch (kind) {
    case Kind::Yaml: return file + ":" + std::to_string(line);
    case Kind::Cli: return "--" + spelled;
    case Kind::Program: break;
  }
  return origin;
}

void Problems::add(std::string message, std::string_view flag) {
  messages_.push_back(std::move(message));
  if (!flag.empty()) flags_.emplace(flag);
}

bool Problems::touches(std::initializer_list<std::string_view> flags) const {
  for (std::string_view f : flags)
    if (flags_.find(f) != flags_.end()) return true;
  return false;
}

void Problems::throw_if_any() const {
  if (messages_.empty()) return;
  if (messages_.size() == 1) throw ConfigError(messages_.front());
  std::string text = std::to_string(messages_.size()) + " problems in the configuration:";
  for (const std::string& m : messages_) text += "\n  - " + m;
  throw ConfigError(text);
}

void store(Config& config, const FlagSpec& spec, json value, const Location& where) {
  // Every value is written to args.yaml and handed to plugins as JSON, which is UTF-8.
  try {
    (void)value.dump();
  } catch (const json::type_error&) {
    throw ValueProblem{ValueProblem::Kind::Invalid, render(value), "UTF-8 text (it holds other bytes)"};
  }
  auto& e = ConfigAccess::entry(config, spec.name);
  e.given = value;
  e.value = std::move(value);
  e.origin = where.origin_text();
  e.explicit_set = true;
  e.derived = false;
}

}  // namespace detail

namespace {

const FlagSpec& spec_or_throw(std::string_view name) {
  const FlagSpec* spec = find_flag(name);
  if (!spec) throw std::invalid_argument("no flag named '" + std::string(name) + "'");
  return *spec;
}

void expect_type(const FlagSpec& spec, std::initializer_list<FlagType> types, const char* getter) {
  for (FlagType t : types)
    if (spec.type == t) return;
  throw std::invalid_argument(std::string(getter) + " does not fit the type of flag '" + spec.name + "'");
}

const json& non_null(const json& value, const FlagSpec& spec) {
  if (value.is_null())
    throw std::logic_error("flag '" + spec.name + "' is unset (null); check is_null() first");
  return value;
}

// steps_per_generation and generation_batch_size exclude each other, so when one is derived it is
// written as null; reading args.yaml back derives it again instead of failing the exclusion check.
bool written_as_null(const FlagSpec& spec, bool derived) {
  return derived && (spec.name == "steps_per_generation" || spec.name == "generation_batch_size");
}

}  // namespace

Config::Config() {
  for (const FlagSpec& spec : flag_table()) {
    Entry e;
    e.value = spec.default_value;
    entries_.emplace(spec.name, std::move(e));
  }
  detail::Problems problems;
  detail::resolve(*this, problems);
  // Apart from the batch geometry (unchecked here) the defaults are consistent; a problem is a bug.
  try {
    problems.throw_if_any();
  } catch (const ConfigError& e) {
    throw std::logic_error(std::string("default configuration is inconsistent: ") + e.what());
  }
}

const Config::Entry& Config::entry(std::string_view name) const {
  return entries_.find(spec_or_throw(name).name)->second;
}

bool Config::is_set(std::string_view name) const { return entry(name).explicit_set; }
bool Config::is_null(std::string_view name) const { return entry(name).value.is_null(); }
std::string Config::origin(std::string_view name) const { return entry(name).origin; }

bool Config::get_bool(std::string_view name) const {
  const FlagSpec& spec = spec_or_throw(name);
  expect_type(spec, {FlagType::Bool}, "get_bool");
  return non_null(entry(name).value, spec).get<bool>();
}

int64_t Config::get_int(std::string_view name) const {
  const FlagSpec& spec = spec_or_throw(name);
  expect_type(spec, {FlagType::Int}, "get_int");
  return non_null(entry(name).value, spec).get<int64_t>();
}

double Config::get_double(std::string_view name) const {
  const FlagSpec& spec = spec_or_throw(name);
  expect_type(spec, {FlagType::Float, FlagType::Int}, "get_double");
  return non_null(entry(name).value, spec).get<double>();
}

std::string Config::get_string(std::string_view name) const {
  const FlagSpec& spec = spec_or_throw(name);
  expect_type(spec, {FlagType::String}, "get_string");
  const json& v = entry(name).value;
  return v.is_null() ? std::string() : v.get<std::string>();
}

std::vector<std::string> Config::get_strings(std::string_view name) const {
  const FlagSpec& spec = spec_or_throw(name);
  expect_type(spec, {FlagType::StringList}, "get_strings");
  const json& v = entry(name).value;
  return v.is_null() ? std::vector<std::string>() : v.get<std::vector<std::string>>();
}

std::vector<double> Config::get_doubles(std::string_view name) const {
  const FlagSpec& spec = spec_or_throw(name);
  expect_type(spec, {FlagType::FloatList}, "get_doubles");
  const json& v = entry(name).value;
  return v.is_null() ? std::vector<double>() : v.get<std::vector<double>>();
}

json Config::get_json(std::string_view name) const { return entry(name).value; }

json Config::to_json() const {
  json out = json::object();
  for (const FlagSpec& spec : flag_table()) out[spec.name] = entries_.at(spec.name).value;
  return out;
}

namespace {

// A key that holds a secret: args.yaml is kept with the run and shared.
bool is_secret_key(std::string_view key) {
  constexpr std::string_view suffix = "api_key";
  return key == "token" || key == "hf_token" || key == "password" ||
         (key.size() >= suffix.size() && key.substr(key.size() - suffix.size()) == suffix);
}

// `value` with every secret (at any depth of a map) written as null: a run
// loaded from args.yaml then takes the key from its other source (the
// sampler reads GRPO_ROLLOUT_API_KEY).
json without_secrets(json value, int depth = 0) {
  if (!value.is_object() || depth > 16) return value;
  for (auto it = value.begin(); it != value.end(); ++it)
    it.value() = is_secret_key(it.key()) ? json() : without_secrets(it.value(), depth + 1);
  return value;
}

}  // namespace

std::string Config::to_yaml() const {
  std::ostringstream out;
  out << "# Resolved configuration of a grpo-host run (world size " << world_size_ << ").\n"
      << "# Load it again with --config; values derived from others say so in a comment.\n";
  bool first_group = true;
  FlagGroup group = FlagGroup::ModelData;
  for (const FlagSpec& spec : flag_table()) {
    // Flags refused outright can only hold their defaults; listing them would be noise.
    if (spec.group == FlagGroup::Compat && spec.availability != Availability::Available) continue;
    if (first_group || spec.group != group) {
      out << "\n# ---- " << group_title(spec.group) << " ----\n";
      group = spec.group;
      first_group = false;
    }
    const Entry& e = entries_.at(spec.name);
    if (written_as_null(spec, e.derived)) {
      out << spec.name << ": null  # resolved to " << detail::render(e.value) << ", " << e.origin << "\n";
      continue;
    }
    out << spec.name << ": " << detail::render(without_secrets(e.value));
    if (e.derived) out << "  # " << e.origin;
    out << "\n";
  }
  if (!plugin_flags_.empty()) {
    out << "\n# ---- Plugin options (checked against the plugins that published them) ----\n";
    for (const auto& [name, flag] : plugin_flags_) {
      nlohmann::json words(flag.words);
      if (is_secret_key(name)) words = json::array({nullptr});  // not written (see without_secrets)
      const json& shown = words.size() == 1 ? words[0] : words;
      out << name << ": " << shown.dump(-1, ' ', false, json::error_handler_t::replace) << "  # " << flag.where << "\n";
    }
  }
  return out.str();
}

void Config::write_args_yaml(const std::string& path) const {
  namespace fs = std::filesystem;
  const fs::path target(path);
  std::error_code ec;
  if (target.has_parent_path()) fs::create_directories(target.parent_path(), ec);
  const fs::path temp = target.string() + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream file(temp, std::ios::binary | std::ios::trunc);
    file << to_yaml();
    file.flush();
    if (!file) {
      const std::string why = std::strerror(errno);
      fs::remove(temp, ec);
      throw ConfigError("cannot write " + temp.string() + ": " + why +
                        " (check that output_dir is writable and the disk is not full)");
    }
  }
  fs::rename(temp, target, ec);
  if (ec) {
    fs::remove(temp, ec);
    throw ConfigError("cannot rename " + temp.string() + " to " + path + ": " + ec.message());
  }
}

void Config::set(std::string_view name, const json& value, std::string_view origin) {
  const FlagSpec* spec = find_flag(name);
  if (!spec) {
    std::string message = "unknown option '" + std::string(name) + "'";
    const std::string near = closest_flag_name(name);
    if (!near.empty()) message += " — did you mean '" + near + "'?";
    throw ConfigError(message);
  }
  detail::Location where;
  where.kind = detail::Location::Kind::Program;
  where.spelled = std::string(name);
  where.origin = std::string(origin);

  Config next = *this;
  detail::Problems problems;
  try {
    detail::store(next, *spec, detail::value_from_json(*spec, value), where);
  } catch (const detail::ValueProblem& problem) {
    problems.add(detail::problem_message(problem, where), spec->name);
  }
  if (problems.empty()) detail::resolve(next, problems);
  problems.throw_if_any();
  *this = std::move(next);
}

Config load_yaml_file(const std::string& path, bool check_batch_geometry) {
  Config config;
  detail::ConfigAccess::set_check_batch_geometry(config, check_batch_geometry);
  detail::Problems problems;
  if (detail::apply_yaml_file(config, path, problems)) detail::resolve(config, problems);
  problems.throw_if_any();
  return config;
}

}  // namespace grpo::config
