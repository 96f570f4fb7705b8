// What a reward sees of one completion, owned by the host.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <grpo/reward.h>
#include <nlohmann/json.hpp>

namespace grpo::plugins {

// A dataset row's columns, prepared once and shared by the G completions of
// its prompt.
struct RowColumns {
  struct Column {
    std::string name, json, text;
  };
  std::vector<Column> columns;
  std::string json;  // the whole row as one JSON object

  static std::shared_ptr<const RowColumns> from_json(const nlohmann::json& row);
};

struct RewardInput {
  std::string prompt_messages_json = "[]";
  std::string completion;
  std::string conversation_json;   // a multi-turn rollout's messages; empty for one turn
  std::vector<int32_t> completion_ids;
  bool ids_known = false;          // completion_ids are the generated ids
  int64_t completion_tokens = -1;  // generated tokens; -1 unknown
  bool is_truncated = false;
  int64_t prompt_index = 0;
  std::shared_ptr<const RowColumns> columns;
};

// What score() hands a plugin of one completion: views into the caller's
// data (a RewardInput, a sampled Sample, or a batch in shared memory).
struct ColumnsView {
  std::vector<grpo_column> columns;
  std::string_view json;
};
// Views of `row`'s columns, as the ABI hands them to plugins.
inline ColumnsView view_of(const RowColumns& row) {
  ColumnsView v;
  for (const auto& c : row.columns)
    v.columns.push_back({{c.name.data(), c.name.size()}, {c.json.data(), c.json.size()}, {c.text.data(), c.text.size()}});
  v.json = row.json;
  return v;
}
struct RewardView {
  std::string_view messages_json, completion;
  std::string_view conversation;    // multi-turn: the whole conversation; empty otherwise
  const int32_t* ids = nullptr;     // null when the generated ids are unknown
  size_t n_ids = 0;
  int64_t tokens = -1;              // -1 unknown
  bool truncated = false;
  int64_t prompt_index = 0;
  const ColumnsView* columns = nullptr;
};

struct TrainerState {
  int64_t global_step = 0;
  int64_t max_steps = 0;
  double epoch = 0;
};

}  // namespace grpo::plugins
