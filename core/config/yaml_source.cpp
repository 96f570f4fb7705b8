// Reading a --config YAML file: every key is a flag name, every problem points at file:line.

#include "config/config_internal.h"

#include <algorithm>
#include <filesystem>
#include <map>

#include <yaml-cpp/depthguard.h>

namespace grpo::config::detail {
namespace {

std::string node_kind(const YAML::Node& node) {
  if (node.IsSequence()) return "a list";
  if (node.IsScalar()) return "a single value";
  return "not a mapping";
}

std::string normalise(std::string name) {
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

// Parses the file; reports why it cannot be and returns an undefined node then.
YAML::Node load(const std::string& path, Problems& problems) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    problems.add("config file '" + path + "' not found (looked for " + fs::absolute(path, ec).string() +
                 "); check the path given to --config, e.g. --config configs/grpo.yaml");
    return YAML::Node(YAML::NodeType::Undefined);
  }
  if (fs::is_directory(path, ec)) {
    problems.add("config file '" + path + "' is a directory; pass a YAML file, e.g. " + path +
                 "/args.yaml");
    return YAML::Node(YAML::NodeType::Undefined);
  }
  try {
    return YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    problems.add("config file '" + path + "' cannot be read; check its permissions");
  } catch (const YAML::DeepRecursion& e) {  // its own message says "bad file"
    problems.add(path + ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1) +
                 ": YAML nested " + std::to_string(e.depth()) +
                 " levels deep, past what the YAML parser accepts; a config file needs a few levels at most");
  } catch (const YAML::ParserException& e) {
    problems.add(path + ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1) +
                 ": malformed YAML: " + e.msg);
  } catch (const YAML::Exception& e) {
    problems.add(path + ": malformed YAML: " + e.what());
  }
  return YAML::Node(YAML::NodeType::Undefined);
}

}  // namespace

bool apply_yaml_file(Config& config, const std::string& path, Problems& problems, bool plugin_keys) {
  const YAML::Node root = load(path, problems);
  if (!root.IsDefined()) return false;  // reported by load()
  if (root.IsNull()) return true;       // an empty file
  if (!root.IsMap()) {
    problems.add(path + ":" + std::to_string(root.Mark().line + 1) +
                 ": a config file maps option names to values (like `num_generations: 8`), but this one is " +
                 node_kind(root));
    return false;
  }
  std::map<std::string, std::pair<std::string, int>> seen;  // canonical name -> (spelling, line)
  for (const auto& kv : root) {
    const YAML::Node& key = kv.first;
    const int line = key.Mark().line + 1;
    if (!key.IsScalar()) {
      problems.add(path + ":" + std::to_string(line) + ": keys must be option names, not lists or mappings");
      continue;
    }
    Location where;
    where.kind = Location::Kind::Yaml;
    where.spelled = key.Scalar();
    where.file = path;
    where.line = line;

    if (normalise(where.spelled) == "config") {
      problems.add(where.describe() +
                   ": config is the path of the YAML file itself (--config on the command line), not a "
                   "key inside it; remove this line");
      continue;
    }
    const FlagSpec* spec = find_flag(where.spelled);
    if (!spec && plugin_keys) {  // a plugin's option, checked once the plugins are loaded
      const YAML::Node& value = kv.second;
      std::vector<std::string> words;
      if (value.IsScalar()) words.push_back(value.Scalar());
      else if (value.IsSequence())
        for (const auto& item : value) words.push_back(item.IsScalar() ? item.Scalar() : YAML::Dump(item));
      else words.push_back(YAML::Dump(value));
      ConfigAccess::add_plugin_flag(config, normalise(where.spelled), std::move(words),
                                    "option '" + where.spelled + "' in " + path + ":" + std::to_string(line));
      continue;
    }
    if (!spec) {
      std::string message = "unknown option '" + where.spelled + "' in " + path + ":" + std::to_string(line);
      const std::string near = closest_flag_name(where.spelled);
      message += near.empty() ? " (grpo-host --help lists the options)" : " — did you mean '" + near + "'?";
      problems.add(message);
      continue;
    }
    auto [it, inserted] = seen.emplace(spec->name, std::make_pair(where.spelled, line));
    if (!inserted) {
      problems.add(where.describe() + " repeats '" + it->second.first + "' from line " +
                       std::to_string(it->second.second) + "; keep one of them",
                   spec->name);
      continue;
    }
    try {
      store(config, *spec, value_from_yaml(*spec, kv.second), where);
    } catch (const ValueProblem& problem) {
      problems.add(problem_message(problem, where), spec->name);
    } catch (const YAML::Exception& e) {
      problems.add(where.describe() + ": " + e.what(), spec->name);
    }
  }
  return true;
}

}  // namespace grpo::config::detail
