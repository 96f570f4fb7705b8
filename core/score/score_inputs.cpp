#include "score/score_inputs.h"

#include <fmt/format.h>

namespace grpo::score {

using data::DataError;

namespace {

int64_t row_index_of(const data::Row& line, size_t i, size_t n_lines, size_t n_rows, bool explicit_rows) {
  if (explicit_rows) {
    const char* key = line.columns.contains("row") ? "row" : "index";
    const auto& v = line.columns[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<size_t>() >= n_rows)
      throw DataError(fmt::format("{}: '{}' must be a row number in [0, {}) of the dataset", line.source, key, n_rows));
    return v.get<int64_t>();
  }
  if (n_lines == n_rows) return static_cast<int64_t>(i);
  return static_cast<int64_t>(i / (n_lines / n_rows));
}

void read_completion(const data::Row& line, plugins::RewardInput& in) {
  const auto& c = line.columns;
  const char* text_key = c.contains("completion") ? "completion" : "response";
  if (!c.contains(text_key) || !c[text_key].is_string())
    throw DataError(fmt::format("{}: each line needs a 'completion' string", line.source));
  in.completion = c[text_key].get<std::string>();
  if (c.contains("completion_ids")) {
    const auto& ids = c["completion_ids"];
    if (!ids.is_array())
      throw DataError(fmt::format("{}: 'completion_ids' must be a list of token ids", line.source));
    for (const auto& id : ids) {
      if (!id.is_number_integer()) throw DataError(fmt::format("{}: 'completion_ids' must hold integers", line.source));
      in.completion_ids.push_back(id.get<int32_t>());
    }
    in.ids_known = true;
    in.completion_tokens = static_cast<int64_t>(in.completion_ids.size());
  } else {
    for (const char* key : {"num_tokens", "completion_tokens"})
      if (c.contains(key)) {
        if (!c[key].is_number_integer() || c[key].get<int64_t>() < 0)
          throw DataError(fmt::format("{}: '{}' must be a non-negative integer", line.source, key));
        in.completion_tokens = c[key].get<int64_t>();
      }
  }
  if (c.contains("is_truncated")) {
    if (!c["is_truncated"].is_boolean()) throw DataError(fmt::format("{}: 'is_truncated' must be true or false", line.source));
    in.is_truncated = c["is_truncated"].get<bool>();
  } else if (c.contains("finish_reason") && c["finish_reason"].is_string()) {
    in.is_truncated = c["finish_reason"] == "length";
  }
}

}  // namespace

std::vector<plugins::RewardInput> pair_completions(const std::vector<data::Row>& rows,
                                                   const std::vector<data::Row>& completions,
                                                   const std::string& system) {
  if (rows.empty()) throw DataError("the dataset has no rows");
  bool explicit_rows = false;
  for (const auto& line : completions)
    explicit_rows = explicit_rows || line.columns.contains("row") || line.columns.contains("index");
  if (!explicit_rows && completions.size() != rows.size() && completions.size() % rows.size() != 0)
    throw DataError(fmt::format("{} completions for {} dataset rows: without a 'row' field on each completion line "
                                "the counts must be equal or a multiple (G completions per row)",
                                completions.size(), rows.size()));

  std::vector<std::shared_ptr<const plugins::RowColumns>> columns(rows.size());
  std::vector<std::string> prompts(rows.size());
  std::vector<plugins::RewardInput> inputs(completions.size());
  for (size_t i = 0; i < completions.size(); ++i) {
    const data::Row& line = completions[i];
    if (explicit_rows && !line.columns.contains("row") && !line.columns.contains("index"))
      throw DataError(fmt::format("{}: some lines have a 'row' field and this one has not; give it on every line",
                                  line.source));
    int64_t r = row_index_of(line, i, completions.size(), rows.size(), explicit_rows);
    if (!columns[r]) {
      nlohmann::json cols = rows[r].columns;
      cols.erase("messages");  // it becomes the prompt; every other column reaches the rewards
      columns[r] = plugins::RowColumns::from_json(cols);
      bool has_prompt = rows[r].columns.contains("messages") || rows[r].columns.contains("query") ||
                        rows[r].columns.contains("problem") || rows[r].columns.contains("prompt");
      prompts[r] = has_prompt ? data::prompt_messages(rows[r], system).dump() : "[]";
    }
    plugins::RewardInput& in = inputs[i];
    read_completion(line, in);
    in.prompt_index = r;
    in.columns = columns[r];
    in.prompt_messages_json = prompts[r];
  }
  return inputs;
}

}  // namespace grpo::score
