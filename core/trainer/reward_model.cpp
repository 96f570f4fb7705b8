#include "trainer/reward_model.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>

#include <nlohmann/json.hpp>
#include <torch/types.h>

#include "model/checkpoint_files.h"
#include "model/left_padded.h"
#include "model/model_config.h"
#include "model/weights.h"
#include "tokenizer/chat_prompt.h"
#include "util/json_input.h"

namespace grpo::trainer {

namespace fs = std::filesystem;
using model::CheckpointError;

namespace {

nlohmann::json read_config(const std::string& dir) {
  const std::string path = (fs::path(dir) / "config.json").string();
  std::ifstream in(path);
  if (!in) throw CheckpointError("--reward_model " + dir + ": no config.json there (a Hugging Face model directory)");
  try {
    return util::parse_json_file(path);
  } catch (const util::JsonInputError& e) {
    throw CheckpointError("--reward_model " + dir + ": " + e.what());
  }
}

}  // namespace

RewardModel::RewardModel(const std::string& dir, at::ScalarType dtype, at::Device device)
    : name_(fs::path(dir).lexically_normal().filename().string()) {
  if (name_.empty()) name_ = fs::path(dir).lexically_normal().parent_path().filename().string();
  nlohmann::json config = read_config(dir);
  const std::string arch = config.value("architectures", nlohmann::json::array()).empty()
                               ? ""
                               : config["architectures"][0].get<std::string>();
  const std::string suffix = "ForSequenceClassification";
  if (arch.size() <= suffix.size() || arch.compare(arch.size() - suffix.size(), suffix.size(), suffix) != 0)
    throw CheckpointError("--reward_model " + dir + ": config.json's architectures is '" + arch +
                          "', not a sequence classifier (e.g. Qwen2ForSequenceClassification); a causal LM is no "
                          "reward model");
  const int64_t labels = config.contains("id2label") ? static_cast<int64_t>(config["id2label"].size())
                                                      : config.value("num_labels", int64_t{2});
  if (labels != 1)
    throw CheckpointError("--reward_model " + dir + ": it has " + std::to_string(labels) +
                          " labels; a reward model has one (num_labels 1), whose logit is the reward");
  if (config.contains("pad_token_id") && config["pad_token_id"].is_number_integer())
    pad_id_ = config["pad_token_id"].get<int64_t>();
  // The body is the causal LM's; its head is `score`, not lm_head.
  config["architectures"] = {arch.substr(0, arch.size() - suffix.size()) + "ForCausalLM"};
  config["tie_word_embeddings"] = true;
  body_ = model::build_empty(model::ModelConfig::from_json(config, (fs::path(dir) / "config.json").string()), device,
                             dtype);
  const model::CheckpointFiles files = model::CheckpointFiles::open(dir);
  model::load_weights(*body_, files);
  const model::TensorView* score = files.find("score.weight");
  if (!score) throw CheckpointError("--reward_model " + dir + ": the checkpoint has no score.weight (the head)");
  head_ = model::tensor_view(*score).to(dtype).clone();
  if (head_.dim() != 2 || head_.size(0) != 1 || head_.size(1) != body_->config().hidden_size)
    throw CheckpointError("--reward_model " + dir + ": score.weight has shape " + c10::str(head_.sizes()) +
                          ", expected [1, " + std::to_string(body_->config().hidden_size) + "]");
  head_ = head_.to(device);
  body_->eval();
  for (auto& p : body_->parameters()) p.set_requires_grad(false);
  tokenizer_ = std::make_unique<tok::Tokenizer>(tok::Tokenizer::from_dir(dir));
  family_ = tok::chat_family_for(*tokenizer_, "");
}

std::string RewardModel::text_of(const Sample& sample) const {
  std::vector<tok::ChatMessage> messages;
  if (sample.prompt) messages = tok::messages_from_json(nlohmann::ordered_json::parse(sample.prompt->messages_json));
  messages.push_back({"assistant", sample.text});
  tok::ChatOptions options;
  options.add_generation_prompt = false;
  return tok::render_chat(*tokenizer_, family_, messages, options);
}

double RewardModel::score_ids(const std::vector<int32_t>& ids) { return score_rows({ids})[0]; }

at::Tensor RewardModel::score_batch(const std::vector<std::vector<int32_t>>& rows, const std::vector<size_t>& which) {
  std::vector<std::vector<int32_t>> batch;
  for (size_t r : which) batch.push_back(rows[r]);
  auto [ids, mask] = model::left_padded(batch, head_.device());
  torch::NoGradGuard no_grad;
  // Left-padded, every row's last token is the last position (positions come from the mask).
  at::Tensor hidden = body_->hidden_states(ids, mask).select(1, ids.size(1) - 1);  // [n, H]
  return at::matmul(hidden, head_.t()).reshape({ids.size(0)}).to(at::kDouble);
}

std::vector<double> RewardModel::score_rows(std::vector<std::vector<int32_t>> rows) {
  std::vector<double> out(rows.size(), std::numeric_limits<double>::quiet_NaN());
  std::vector<size_t> scored;  // distinct rows with a token, in batches of consecutive ones
  // A row equal to an earlier one takes its score: the same completion scores the same to the last bit
  // (a batched matmul need not give equal rows equal bits), so a group of equal completions keeps a
  // standard deviation of exactly zero.
  std::map<std::vector<int32_t>, size_t> first_of;
  std::vector<std::pair<size_t, size_t>> copies;  // (row, the earlier row it equals)
  for (size_t r = 0; r < rows.size(); ++r) {
    std::vector<int32_t>& ids = rows[r];
    if (ids.empty()) continue;
    // transformers: the rightmost token that is not the pad token; causal attention makes the rest irrelevant.
    size_t last = ids.size() - 1;
    if (pad_id_ >= 0)
      while (last > 0 && ids[last] == pad_id_) --last;
    ids.resize(last + 1);
    const auto [it, fresh] = first_of.emplace(ids, r);
    if (fresh) scored.push_back(r);
    else copies.emplace_back(r, it->second);
  }
  std::vector<at::Tensor> scores;  // read back together: a GPU would wait at each read
  for (size_t begin = 0; begin < scored.size();) {
    std::vector<size_t> batch;
    size_t longest = 0;
    for (size_t k = begin; k < scored.size(); ++k) {
      const size_t l = std::max(longest, rows[scored[k]].size());
      if (!batch.empty() && static_cast<int64_t>(l * (batch.size() + 1)) > kBatchTokens) break;
      longest = l;
      batch.push_back(scored[k]);
    }
    scores.push_back(score_batch(rows, batch));
    begin += batch.size();
  }
  if (scores.empty()) return out;
  const at::Tensor host = at::cat(scores).to(at::kCPU).contiguous();
  for (size_t k = 0; k < scored.size(); ++k) out[scored[k]] = host.data_ptr<double>()[k];
  for (const auto& [row, earlier] : copies) out[row] = out[earlier];
  return out;
}

std::vector<double> RewardModel::score(const std::vector<Sample>& samples) {
  std::vector<std::vector<int32_t>> rows;
  rows.reserve(samples.size());
  for (const Sample& s : samples) rows.push_back(tokenizer_->encode(text_of(s), /*add_special_tokens=*/false));
  return score_rows(std::move(rows));
}

}  // namespace grpo::trainer
