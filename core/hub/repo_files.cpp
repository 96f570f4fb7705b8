#include "hub/repo_files.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <sstream>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "hub/hub_cache.h"

namespace grpo::hub {
namespace {

namespace fs = std::filesystem;

bool is_data_file(const fs::path& p) {
  static const char* kExtensions[] = {".parquet", ".jsonl", ".json", ".csv"};
  const std::string ext = p.extension().string();
  return std::any_of(std::begin(kExtensions), std::end(kExtensions), [&](const char* e) { return ext == e; });
}

// Every file under root as a relative '/'-path, hidden files and folders (.git, .cache) left out.
std::vector<std::string> all_files(const fs::path& root) {
  std::vector<std::string> out;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it) {
    if (it->path().filename().string().front() == '.') {
      if (it->is_directory()) it.disable_recursion_pending();
      continue;
    }
    // Lexically: the files of a hub snapshot are symlinks into blobs/, which fs::relative would follow.
    if (it->is_regular_file()) out.push_back(it->path().lexically_relative(root).generic_string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool class_match(std::string_view& pattern, char c) {
  // pattern starts just after '['; consumes through ']'.
  bool negate = !pattern.empty() && (pattern[0] == '!' || pattern[0] == '^');
  if (negate) pattern.remove_prefix(1);
  bool matched = false;
  bool first = true;
  while (!pattern.empty() && (first || pattern[0] != ']')) {
    first = false;
    char lo = pattern[0];
    if (pattern.size() >= 3 && pattern[1] == '-' && pattern[2] != ']') {
      matched |= lo <= c && c <= pattern[2];
      pattern.remove_prefix(3);
    } else {
      matched |= lo == c;
      pattern.remove_prefix(1);
    }
  }
  if (!pattern.empty()) pattern.remove_prefix(1);  // ']'
  return matched != negate;
}

std::string front_matter(const fs::path& readme) {
  std::ifstream in(readme);
  std::string line, yaml;
  if (!std::getline(in, line) || line.rfind("---", 0) != 0) return "";
  while (std::getline(in, line) && line.rfind("---", 0) != 0) yaml += line + "\n";
  return yaml;
}

std::vector<std::string> as_patterns(const YAML::Node& node) {
  if (node.IsScalar()) return {node.as<std::string>()};
  std::vector<std::string> out;
  if (node.IsSequence())
    for (size_t i = 0; i < node.size(); ++i) out.push_back(node[i].as<std::string>());
  return out;
}

// data_files: "glob" | [globs] (all train) | [{split, path}] | {split: path(s)}.
std::map<std::string, std::vector<std::string>> split_patterns(const YAML::Node& data_files) {
  std::map<std::string, std::vector<std::string>> out;
  if (data_files.IsScalar()) return {{"train", {data_files.as<std::string>()}}};
  if (data_files.IsMap()) {
    for (const auto& kv : data_files) out[kv.first.as<std::string>()] = as_patterns(kv.second);
    return out;
  }
  for (size_t i = 0; i < data_files.size(); ++i) {
    const YAML::Node entry = data_files[i];
    if (entry.IsScalar()) {
      out["train"].push_back(entry.as<std::string>());
    } else if (entry.IsMap() && entry["path"]) {
      auto& list = out[entry["split"] ? entry["split"].as<std::string>() : "train"];
      for (auto& p : as_patterns(entry["path"])) list.push_back(p);
    }
  }
  return out;
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

std::vector<std::string> absolute(const fs::path& root, const std::vector<std::string>& relative) {
  std::vector<std::string> out;
  for (const auto& r : relative) out.push_back((root / r).string());
  return out;
}

std::vector<std::string> from_configs(const fs::path& root, const YAML::Node& configs, const std::string& subset,
                                      const std::string& split, const std::string& label) {
  std::vector<std::string> names;
  std::optional<size_t> chosen_at;
  for (size_t i = 0; i < configs.size(); ++i) {
    const YAML::Node c = configs[i];
    const std::string name = c["config_name"] ? c["config_name"].as<std::string>() : "default";
    names.push_back(name);
    const bool is_default = (c["default"] && c["default"].as<bool>()) || name == "default";
    if (subset.empty() ? (is_default && !chosen_at) : name == subset) chosen_at = i;
  }
  if (!chosen_at && subset.empty() && configs.size() == 1) chosen_at = 0;
  if (!chosen_at)
    throw HubError(subset.empty()
                       ? fmt::format("{}: the dataset has several subsets and none is the default; pick one as "
                                     "{}:NAME, one of: {}", label, label, joined(names))
                       : fmt::format("{}: no subset '{}' in README.md's configs; the subsets are: {}", label, subset,
                                     joined(names)));
  const YAML::Node chosen = configs[*chosen_at];
  if (!chosen["data_files"])
    throw HubError(fmt::format("{}: subset '{}' of README.md lists no data_files", label, subset));
  const auto splits = split_patterns(chosen["data_files"]);
  const auto patterns = splits.find(split);
  if (patterns == splits.end()) {
    std::vector<std::string> have;
    for (const auto& kv : splits) have.push_back(kv.first);
    throw HubError(fmt::format("{}: the subset has no '{}' split in README.md's configs; its splits are: {}", label,
                               split, joined(have)));
  }
  std::vector<std::string> files;
  for (const std::string& f : all_files(root))
    for (const std::string& p : patterns->second)
      if (glob_match(p, f)) {
        files.push_back(f);
        break;
      }
  if (files.empty())
    throw HubError(fmt::format("{}: no file under {} matches the '{}' split's data_files ({}) of README.md", label,
                               root.string(), split, joined(patterns->second)));
  return absolute(root, files);
}

// The `datasets` library's keywords for a split in file and folder names.
const std::map<std::string, std::vector<std::string>>& split_keywords() {
  static const std::map<std::string, std::vector<std::string>> k = {
      {"train", {"train", "training"}},
      {"validation", {"validation", "valid", "dev", "val"}},
      {"test", {"test", "testing", "eval", "evaluation"}}};
  return k;
}

// `word` in `name`, bounded by the start or end or one of "-._ 0-9" on each side.
bool has_keyword(const std::string& name, const std::string& word) {
  auto sep = [](char c) { return c == '-' || c == '.' || c == '_' || c == ' ' || std::isdigit(static_cast<unsigned char>(c)); };
  for (size_t at = name.find(word); at != std::string::npos; at = name.find(word, at + 1)) {
    const bool left = at == 0 || sep(name[at - 1]);
    const size_t end = at + word.size();
    const bool right = end == name.size() || sep(name[end]);
    if (left && right) return true;
  }
  return false;
}

// Which split a file belongs to by the conventions: data/<split>-00000-of-00003.*
// first, then a keyword in the file name, then in a folder name.
std::map<std::string, std::vector<std::string>> splits_by_name(const std::vector<std::string>& files) {
  std::map<std::string, std::vector<std::string>> out;
  static const std::regex sharded(R"(data/(\w+?)-\d{5}-of-\d{5}[^/]*\.[^/]+)");
  std::smatch m;
  for (const auto& f : files)
    if (std::regex_match(f, m, sharded)) out[m[1].str()].push_back(f);
  if (!out.empty()) return out;
  for (int in_folder = 0; in_folder < 2 && out.empty(); ++in_folder)
    for (const auto& f : files) {
      const fs::path p(f);
      for (const auto& [split, words] : split_keywords()) {
        bool hit = false;
        if (!in_folder) {
          hit = std::any_of(words.begin(), words.end(), [&](const std::string& w) { return has_keyword(p.filename().string(), w); });
        } else {
          for (const auto& part : p.parent_path())
            hit |= std::any_of(words.begin(), words.end(), [&](const std::string& w) { return has_keyword(part.string(), w); });
        }
        if (hit) {
          out[split].push_back(f);
          break;
        }
      }
    }
  if (out.empty() && !files.empty()) out["train"] = files;
  return out;
}

}  // namespace

// Rationale: matching by backtracking (each '*' tries every length) takes time
// exponential in the stars, and a dataset's README chooses the pattern:
// "data/" and 8 "*a" against a 52-byte name took 2.5 s, each further "*a" 6
// times longer. This runs the pattern as a Thompson NFA instead, keeping the
// set of pattern positions that the path read so far can reach: O(pattern *
// path) time whatever the pattern, with the same semantics.
bool glob_match(std::string_view pattern, std::string_view path) {
  struct Step {
    // Fork reads nothing: it comes before the "**" of "**/", which also matches no directory.
    enum Kind { Byte, AnyButSlash, Class, Star, DoubleStar, Fork } kind;
    char byte = 0;
    std::string_view klass;  // Class: the pattern just after '[', read by class_match
  };
  std::vector<Step> steps;
  for (size_t i = 0; i < pattern.size();) {
    if (pattern.substr(i, 2) == "**") {
      if (pattern.substr(i + 2, 1) == "/") steps.push_back({Step::Fork});
      steps.push_back({Step::DoubleStar});
      i += 2;
    } else if (pattern[i] == '*') {
      steps.push_back({Step::Star});
      ++i;
    } else if (pattern[i] == '?') {
      steps.push_back({Step::AnyButSlash});
      ++i;
    } else if (pattern[i] == '[') {
      std::string_view rest = pattern.substr(i + 1);
      steps.push_back({Step::Class, 0, rest});
      class_match(rest, 0);  // consumes the class whatever the byte
      i = pattern.size() - rest.size();
    } else {
      steps.push_back({Step::Byte, pattern[i]});
      ++i;
    }
  }
  // live[k]: the first k steps can match the path read so far. Empty moves
  // (a star matching nothing, a fork past its "**/") only go forward, so one
  // pass in order closes the set.
  const size_t n = steps.size();
  std::vector<char> live(n + 1, 0), next(n + 1, 0);
  auto close = [&](std::vector<char>& set) {
    for (size_t k = 0; k < n; ++k) {
      if (!set[k]) continue;
      const Step::Kind kind = steps[k].kind;
      if (kind == Step::Star || kind == Step::DoubleStar || kind == Step::Fork) set[k + 1] = 1;
      if (kind == Step::Fork) set[k + 3] = 1;  // past "**/"
    }
  };
  live[0] = 1;
  close(live);
  for (const char c : path) {
    std::fill(next.begin(), next.end(), 0);
    bool any = false;
    for (size_t k = 0; k < n; ++k) {
      if (!live[k]) continue;
      const Step& s = steps[k];
      switch (s.kind) {
        case Step::Byte: next[k + 1] |= c == s.byte; break;
        case Step::AnyButSlash: next[k + 1] |= c != '/'; break;
        case Step::Class: {
          std::string_view klass = s.klass;
          next[k + 1] |= class_match(klass, c);
          break;
        }
        case Step::Star: next[k] |= c != '/'; break;
        case Step::DoubleStar: next[k] = 1; break;
        case Step::Fork: break;
      }
      any = any || next[k] || next[k + 1];
    }
    if (!any) return false;
    close(next);
    live.swap(next);
  }
  return live[n];
}

std::vector<std::string> split_files(const std::string& root_text, const std::string& subset, const std::string& split,
                                     const std::string& label) {
  const fs::path root(root_text);
  const fs::path readme = root / "README.md";
  if (fs::is_regular_file(readme)) {
    YAML::Node header;
    try {
      header = YAML::Load(front_matter(readme));
    } catch (const YAML::Exception& e) {
      throw HubError(fmt::format("{}: {} has a malformed YAML header: {}", label, readme.string(), e.what()));
    }
    if (header.IsMap() && header["configs"] && header["configs"].IsSequence())
      return from_configs(root, header["configs"], subset, split, label);
  }
  fs::path base = root;
  if (!subset.empty() && subset != "default") {
    base = root / subset;
    if (!fs::is_directory(base))
      throw HubError(fmt::format("{}: no subset '{}': README.md declares no configs and there is no folder {}", label,
                                 subset, base.string()));
  }
  std::vector<std::string> data;
  for (const auto& f : all_files(base))
    if (is_data_file(f)) data.push_back(f);
  if (data.empty())
    throw HubError(fmt::format("{}: {} holds no .parquet, .jsonl, .json or .csv file", label, base.string()));
  const auto splits = splits_by_name(data);
  const auto found = splits.find(split);
  if (found == splits.end()) {
    std::vector<std::string> have;
    for (const auto& kv : splits) have.push_back(kv.first + " (" + kv.second.front() + (kv.second.size() > 1 ? ", …)" : ")"));
    throw HubError(fmt::format("{}: no '{}' split under {}; the files there make the splits {}", label, split,
                               base.string(), joined(have)));
  }
  return absolute(base, found->second);
}

}  // namespace grpo::hub
