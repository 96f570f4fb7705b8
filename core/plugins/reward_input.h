// What a reward sees of one completion, owned by the host.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

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

struct TrainerState {
  int64_t global_step = 0;
  int64_t max_steps = 0;
  double epoch = 0;
};

}  // namespace grpo::plugins
