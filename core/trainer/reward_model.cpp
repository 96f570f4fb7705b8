#include "trainer/reward_model.h"

#include <filesystem>
#include <fstream>
#include <limits>

#include <nlohmann/json.hpp>
#include <torch/types.h>

#include "model/checkpoint_files.h"
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

double RewardModel::score_ids(const std::vector<int32_t>& ids) { return score_tensor(ids).item<double>(); }

at::Tensor RewardModel::score_tensor(const std::vector<int32_t>& ids) {
  const auto on_device = at::TensorOptions().dtype(at::kDouble).device(head_.device());
  if (ids.empty()) return at::full({}, std::numeric_limits<double>::quiet_NaN(), on_device);
  torch::NoGradGuard no_grad;
  // transformers: the rightmost token that is not the pad token.
  int64_t last = static_cast<int64_t>(ids.size()) - 1;
  if (pad_id_ >= 0)
    while (last > 0 && ids[static_cast<size_t>(last)] == pad_id_) --last;
  const at::Device device = head_.device();
  at::Tensor input = at::tensor(std::vector<int64_t>(ids.begin(), ids.end()), at::kLong).unsqueeze(0).to(device);
  at::Tensor hidden = body_->hidden_states(input).select(0, 0).select(0, last);  // [H]
  return at::matmul(head_, hidden).to(at::kDouble).reshape({});
}

std::vector<double> RewardModel::score(const std::vector<Sample>& samples) {
  if (samples.empty()) return {};
  std::vector<at::Tensor> scores;  // read back together: a GPU would wait at each read
  scores.reserve(samples.size());
  for (const Sample& s : samples)
    scores.push_back(score_tensor(tokenizer_->encode(text_of(s), /*add_special_tokens=*/false)));
  const at::Tensor host = at::stack(scores).to(at::kCPU).contiguous();
  return {host.data_ptr<double>(), host.data_ptr<double>() + host.numel()};
}

}  // namespace grpo::trainer
