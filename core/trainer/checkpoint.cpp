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

std::unique_ptr<torch::optim::AdamW> make_adamw(const config::Config& cfg, model::CausalLMImpl& model) {
  torch::optim::AdamWOptions adam(cfg.get_double("learning_rate"));
  adam.betas({cfg.get_double("adam_beta1"), cfg.get_double("adam_beta2")})
      .eps(cfg.get_double("adam_epsilon"))
      .weight_decay(cfg.get_double("weight_decay"));
  std::vector<at::Tensor> trainable;
  for (const auto& p : model.parameters())
    if (p.requires_grad()) trainable.push_back(p);
  return std::make_unique<torch::optim::AdamW>(trainable, adam);
}

model::LoraOptions lora_options(const config::Config& cfg) {
  model::LoraOptions o;
  o.rank = cfg.get_int("lora_rank");
  o.alpha = static_cast<double>(cfg.get_int("lora_alpha"));
  o.dropout = cfg.get_double("lora_dropout");
  o.target_modules = cfg.get_strings("target_modules");
  o.seed = static_cast<uint64_t>(cfg.get_int("seed"));
  return o;
}

model::CausalLM load_policy(const config::Config& cfg, at::ScalarType dtype) {
  const std::string resume = cfg.get_string("resume_from_checkpoint");
  if (cfg.get_string("train_type") != "lora") return model::load_model(resume.empty() ? cfg.get_string("model") : resume, dtype);
  model::CausalLM policy = model::load_model(cfg.get_string("model"), dtype);  // the base stays as it was
  model::apply_lora(*policy, lora_options(cfg));
  if (!resume.empty()) model::load_peft_adapter(*policy, resume);  // refuses adapters that differ from the flags
  return policy;
}

void set_learning_rate(torch::optim::AdamW& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
}

std::string save_checkpoint(model::CausalLMImpl& model, const config::Config& cfg, int64_t step,
                            const std::string& tokenizer_dir, const nlohmann::json& state,
                            const std::function<void(const std::string& tmp_dir)>& extra) {
  const fs::path output_dir = cfg.get_string("output_dir");
  const fs::path final_dir = output_dir / fmt::format("checkpoint-{}", step);
  const fs::path tmp = output_dir / fmt::format(".checkpoint-{}.tmp", step);
  fs::remove_all(tmp);
  if (model::has_adapters(model)) {
    model::save_peft_adapter(model, lora_options(cfg), tmp.string(), cfg.get_string("model"));
    model::copy_tokenizer_files(tokenizer_dir, tmp.string());
    if (cfg.get_bool("merge_lora")) model::save_merged_model(model, (tmp / "merged").string(), tokenizer_dir);
  } else {
    model::save_model(model, tmp.string(), tokenizer_dir);
  }
  std::ofstream(tmp / "trainer_state.json") << state.dump(2) << "\n";
  if (extra) extra(tmp.string());
  fs::remove_all(final_dir);
  fs::rename(tmp, final_dir);  // a crash never leaves half a checkpoint under the final name
  if (!cfg.is_null("save_total_limit")) {
    std::vector<std::pair<int64_t, fs::path>> existing;
    for (const auto& e : fs::directory_iterator(output_dir)) {
      const std::string name = e.path().filename().string();
      if (e.is_directory() && name.rfind("checkpoint-", 0) == 0)
        existing.emplace_back(std::stoll(name.substr(11)), e.path());
    }
    std::sort(existing.begin(), existing.end());
    const auto keep = static_cast<size_t>(std::max<int64_t>(1, cfg.get_int("save_total_limit")));
    for (size_t i = 0; i + keep < existing.size(); ++i) fs::remove_all(existing[i].second);
  }
  spdlog::info("saved {}", final_dir.string());
  return final_dir.string();
}

}  // namespace grpo::trainer
