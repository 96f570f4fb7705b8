#include "model/stop_ids.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "util/json_input.h"

namespace grpo::model {

namespace {

void add(std::vector<int32_t>& ids, int64_t id) {
  if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(static_cast<int32_t>(id));
}

// generation_config.json's eos_token_id: an int, a list of ints, or null.
std::vector<int64_t> generation_eos_ids(const std::string& model_dir) {
  const std::filesystem::path path = std::filesystem::path(model_dir) / "generation_config.json";
  std::ifstream in(path);
  if (!in) return {};
  std::ostringstream text;
  text << in.rdbuf();
  const nlohmann::json doc = util::try_parse_json(text.str());
  if (!doc.is_object())
    throw ModelConfigError(path.string() + " is not a JSON object: fix or remove it (it is read for eos_token_id)");
  const auto it = doc.find("eos_token_id");
  if (it == doc.end() || it->is_null()) return {};
  std::vector<int64_t> out;
  for (const nlohmann::json& id : it->is_array() ? *it : nlohmann::json::array({*it})) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0)
      throw ModelConfigError(path.string() + ": eos_token_id must be a token id or a list of them, got " +
                             it->dump());
    out.push_back(id.get<int64_t>());
  }
  return out;
}

}  // namespace

std::vector<int32_t> stop_token_ids(const tok::Tokenizer& tokenizer, const ModelConfig& config,
                                    const std::string& model_dir) {
  std::vector<int32_t> ids;
  if (auto eos = tokenizer.eos_id()) add(ids, *eos);
  for (int64_t id : config.eos_token_ids) add(ids, id);
  if (!model_dir.empty())
    for (int64_t id : generation_eos_ids(model_dir)) add(ids, id);
  return ids;
}

}  // namespace grpo::model
