#include "trainer/checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "model/weights.h"

namespace grpo::trainer {

namespace fs = std::filesystem;

std::unique_ptr<torch::optim::AdamW> make_adamw(const config::Config& cfg, model::CausalLMImpl& model) {
  torch::optim::AdamWOptions adam(cfg.get_double("learning_rate"));
  adam.betas({cfg.get_double("adam_beta1"), cfg.get_double("adam_beta2")})
      .eps(cfg.get_double("adam_epsilon"))
      .weight_decay(cfg.get_double("weight_decay"));
  return std::make_unique<torch::optim::AdamW>(model.parameters(), adam);
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
  model::save_model(model, tmp.string(), tokenizer_dir);
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
