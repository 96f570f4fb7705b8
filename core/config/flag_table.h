#pragma once
// The table of every flag grpo-host understands (spec/cli.md), plus the ms-swift/Python flags that
// users paste from `swift rlhf` scripts, each with the sentence that explains what to do instead.

#include <nlohmann/json.hpp>

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace grpo::config {

enum class FlagType { Bool, Int, Float, String, StringList, FloatList, Map };

// The order is the order of `grpo-host --help`; the first six are the groups of cli.md.
enum class FlagGroup { ModelData, Grpo, Rewards, Plugins, Sampling, Optimisation, Compat };

enum class Availability {
  Available,
  // Planned but not built: accepted only at its default value, refused otherwise with `reason`.
  NotBuilt,
  // Meaningful only for Python/DeepSpeed: accepted only at its default value, refused otherwise.
  Refused,
};

struct FlagSpec {
  std::string name;
  FlagType type = FlagType::String;
  nlohmann::json default_value;  // null: an optional value that is unset by default
  FlagGroup group = FlagGroup::ModelData;
  std::string help;
  std::string value_hint;  // shown in --help, e.g. N, PATH

  bool nullable = false;  // `null` (YAML) / `null|none` (CLI) is a valid value
  std::vector<std::string> aliases;

  std::vector<std::string> choices;  // for String and each element of StringList
  // Input spellings that mean another value (case-insensitive), e.g. scale_rewards true -> group.
  std::vector<std::pair<std::string, nlohmann::json>> value_aliases;
  // Values refused with a sentence of their own, e.g. report_to wandb.
  std::vector<std::pair<std::string, std::string>> refused_values;
  std::string choice_note;  // appended to the list of choices when a value is not one of them

  std::optional<double> min, max;  // numeric range, also for each element of FloatList
  bool min_exclusive = false, max_exclusive = false;

  Availability availability = Availability::Available;
  std::string reason;  // for NotBuilt / Refused: what to do instead

  // Last check after type, choice and range checks; may rewrite the value. Returns a problem or "".
  std::function<std::string(nlohmann::json&)> finish;
};

const std::vector<FlagSpec>& flag_table();

// Resolves canonical names and aliases; '-' and '_' are interchangeable, as in HfArgumentParser.
const FlagSpec* find_flag(std::string_view name);

// The known name (or alias) nearest to `name` by edit distance, or "" when none is close enough.
std::string closest_flag_name(std::string_view name);

std::string_view group_title(FlagGroup group);

}  // namespace grpo::config
