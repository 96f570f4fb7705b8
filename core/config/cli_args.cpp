// The command line: `--name value`, `--name=value`, `--list a b c`, `--config file.yaml`.
// YAML is applied first and the command line overrides it key by key.

#include "config/config_internal.h"
#include "config/log_level.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <map>
#include <optional>

namespace grpo::config {
namespace {

struct CliFlag {
  std::string spelled;  // without the leading dashes
  std::vector<std::string> words;
};

bool is_flag_word(const std::string& word) { return word.size() > 2 && word.rfind("--", 0) == 0; }

std::string normalise(std::string name) {
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

std::optional<int> positive_env(const char* name, detail::Problems& problems) {
  const char* text = std::getenv(name);
  if (!text || !*text) return std::nullopt;
  int value = 0;
  const char* end = text + std::char_traits<char>::length(text);
  auto [ptr, ec] = std::from_chars(text, end, value);
  if (ec != std::errc() || ptr != end || value < 1) {
    problems.add(std::string("environment variable ") + name + "='" + text +
                 "' is not a positive integer; unset it or give the number of processes");
    return std::nullopt;
  }
  return value;
}

}  // namespace

int world_size_from_env() {
  detail::Problems problems;
  int world = 1;
  if (auto w = positive_env("WORLD_SIZE", problems)) {
    world = *w;
  } else {
    world = positive_env("NPROC_PER_NODE", problems).value_or(1) * positive_env("NNODES", problems).value_or(1);
  }
  problems.throw_if_any();
  return world;
}

ParseResult parse(const std::vector<std::string>& args, const std::vector<std::string>& allowed_extra) {
  ParseOptions options;
  options.allowed_extra = allowed_extra;
  options.check_batch_geometry = allowed_extra.empty();
  return parse(args, options);
}

ParseResult parse(const std::vector<std::string>& args, const ParseOptions& options) {
  ParseResult result;
  detail::Problems problems;

  std::vector<CliFlag> flags;
  size_t i = 0;
  while (i < args.size() && !is_flag_word(args[i]) && args[i] != "--") result.positional.push_back(args[i++]);
  while (i < args.size()) {
    const std::string& word = args[i++];
    if (word == "--") {  // everything after a bare `--` is positional
      result.positional.insert(result.positional.end(), args.begin() + static_cast<long>(i), args.end());
      break;
    }
    CliFlag flag;
    flag.spelled = word.substr(2);
    if (auto eq = flag.spelled.find('='); eq != std::string::npos) {
      flag.words.push_back(flag.spelled.substr(eq + 1));
      flag.spelled.resize(eq);
    }
    while (i < args.size() && !is_flag_word(args[i]) && args[i] != "--") flag.words.push_back(args[i++]);
    flags.push_back(std::move(flag));
  }

  std::vector<std::string> extra_names;
  for (const std::string& e : options.allowed_extra) extra_names.push_back(normalise(e));

  std::optional<std::string> config_path;
  bool config_usable = true;
  std::vector<std::pair<const FlagSpec*, const CliFlag*>> settings;
  std::map<std::string, std::string> seen;  // canonical name -> spelling
  std::vector<std::pair<std::string, std::vector<std::string>>> plugin_flags;
  for (const CliFlag& flag : flags) {
    const std::string name = normalise(flag.spelled);
    if (name == "config") {
      if (config_path)
        problems.add("--config is given twice; merge the two files or pass one of them");
      else if (flag.words.empty() || (flag.words.size() == 1 && flag.words.front().empty()))
        problems.add("--config needs the path of a YAML file, e.g. --config configs/grpo.yaml");
      else if (flag.words.size() > 1)
        problems.add("--config takes one YAML file, got " + std::to_string(flag.words.size()) + ": " +
                     flag.words[0] + " " + flag.words[1] + (flag.words.size() > 2 ? " ..." : ""));
      else
        config_path = flag.words.front();
      config_usable = config_usable && config_path.has_value();
      continue;
    }
    if (std::find(extra_names.begin(), extra_names.end(), name) != extra_names.end()) {
      auto& words = result.extras[name];
      words.insert(words.end(), flag.words.begin(), flag.words.end());
      continue;
    }
    const FlagSpec* spec = find_flag(name);
    if (!spec && options.plugin_flags) {  // a plugin's option, checked once the plugins are loaded
      if (auto [it, inserted] = seen.emplace(name, flag.spelled); !inserted)
        problems.add("flag --" + flag.spelled + " is given twice (also as --" + it->second + "); keep one");
      else
        plugin_flags.emplace_back(name, flag.words);
      continue;
    }
    if (!spec) {
      std::string message = "unknown flag --" + flag.spelled;
      const std::string near = closest_flag_name(name);
      message += near.empty() ? " (grpo-host --help lists the flags)" : " — did you mean --" + near + "?";
      problems.add(message);
      continue;
    }
    auto [it, inserted] = seen.emplace(spec->name, flag.spelled);
    if (!inserted) {
      problems.add("flag --" + flag.spelled + " is given twice (also as --" + it->second + "); keep one",
                   spec->name);
      continue;
    }
    settings.emplace_back(spec, &flag);
  }

  Config& config = result.config;
  for (auto& [name, words] : plugin_flags)
    detail::ConfigAccess::add_plugin_flag(config, name, std::move(words), "--" + name);
  if (config_path)
    config_usable = detail::apply_yaml_file(config, *config_path, problems, options.plugin_flags) && config_usable;
  for (const auto& [spec, flag] : settings) {
    detail::Location where;
    where.kind = detail::Location::Kind::Cli;
    where.spelled = flag->spelled;
    try {
      detail::store(config, *spec, detail::value_from_words(*spec, flag->words), where);
    } catch (const detail::ValueProblem& problem) {
      problems.add(detail::problem_message(problem, where), spec->name);
    }
  }

  int world_size = options.world_size;
  if (world_size <= 0) {
    try {
      world_size = world_size_from_env();
    } catch (const ConfigError& e) {
      problems.add(e.what());
      world_size = 1;
    }
  }
  detail::ConfigAccess::set_world_size(config, world_size);
  detail::ConfigAccess::set_check_batch_geometry(config, options.check_batch_geometry);
  // Without its YAML file the configuration is not the user's: checks across flags would only add noise.
  detail::Problems cross_flag_problems;
  detail::resolve(config, config_usable ? problems : cross_flag_problems);
  problems.throw_if_any();
  if (config.is_set("log_level")) apply_log_level(config.get_string("log_level"), "--log_level");
  return result;
}

}  // namespace grpo::config
