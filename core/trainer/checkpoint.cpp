#include "trainer/checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "model/lora_files.h"
#include "model/weights.h"

namespace grpo::trainer {

namespace fs = std::filesystem;

std::vector<at::Tensor> trainable_parameters(model::CausalLMImpl& model) {
  std::vector<at::Tensor> trainable;
  for (const auto& p : model.parameters())
    if (p.requires_grad()) trainable.push_back(p);
  return trainable;
}

std::unique_ptr<torch::optim::AdamW> make_adamw(const OptimizerSettings& settings, model::CausalLMImpl& model) {
  return make_adamw(settings, trainable_parameters(model));
}

std::unique_ptr<torch::optim::AdamW> make_adamw(const OptimizerSettings& settings, std::vector<at::Tensor> params) {
  torch::optim::AdamWOptions adam(settings.learning_rate);
  adam.betas({settings.beta1, settings.beta2}).eps(settings.epsilon).weight_decay(settings.weight_decay);
  return std::make_unique<torch::optim::AdamW>(std::move(params), adam);
}

model::CausalLM load_policy(const ModelSettings& settings) {
  const std::string& resume = settings.resume_from;
  if (!settings.lora) return model::load_model(resume.empty() ? settings.dir : resume, settings.dtype);
  model::CausalLM policy = model::load_model(settings.dir, settings.dtype);  // the base stays as it was
  model::apply_lora(*policy, settings.lora_options);
  if (!resume.empty()) model::load_peft_adapter(*policy, resume);  // refuses adapters that differ from the flags
  return policy;
}

void set_learning_rate(torch::optim::AdamW& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
}

std::string save_checkpoint(model::CausalLMImpl& model, const CheckpointSettings& settings, int64_t step,
                            const std::string& tokenizer_dir, const nlohmann::json& state,
                            const std::function<void(const std::string& tmp_dir)>& extra) {
  const fs::path output_dir = settings.output_dir;
  const fs::path final_dir = output_dir / fmt::format("checkpoint-{}", step);
  const fs::path tmp = output_dir / fmt::format(".checkpoint-{}.tmp", step);
  fs::remove_all(tmp);
  if (model::has_adapters(model)) {
    model::save_peft_adapter(model, settings.lora_options, tmp.string(), settings.base_model);
    model::copy_tokenizer_files(tokenizer_dir, tmp.string());
    if (settings.merge_lora) model::save_merged_model(model, (tmp / "merged").string(), tokenizer_dir);
  } else {
    model::save_model(model, tmp.string(), tokenizer_dir);
  }
  std::ofstream(tmp / "trainer_state.json") << state.dump(2) << "\n";
  if (extra) extra(tmp.string());
  fs::remove_all(final_dir);
  fs::rename(tmp, final_dir);  // a crash never leaves half a checkpoint under the final name
  if (settings.save_total_limit) {
    std::vector<std::pair<int64_t, fs::path>> existing;
    for (const auto& e : fs::directory_iterator(output_dir)) {
      const std::string name = e.path().filename().string();
      if (e.is_directory() && name.rfind("checkpoint-", 0) == 0)
        existing.emplace_back(std::stoll(name.substr(11)), e.path());
    }
    std::sort(existing.begin(), existing.end());
    const auto keep = static_cast<size_t>(std::max<int64_t>(1, *settings.save_total_limit));
    for (size_t i = 0; i + keep < existing.size(); ++i) fs::remove_all(existing[i].second);
  }
  spdlog::info("saved {}", final_dir.string());
  return final_dir.string();
}

}  // namespace grpo::trainer
