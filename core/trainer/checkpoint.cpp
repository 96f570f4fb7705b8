#include "trainer/checkpoint.h"

#include <ATen/core/grad_mode.h>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string_view>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "model/checkpoint_files.h"
#include "model/lora_files.h"
#include "model/weights.h"
#include "trainer/fused_adamw.h"
#include "trainer/jsonl_appender.h"

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
  // Made now, before any activation, rather than by the first step: see
  // FusedAdamW::allocate_state(). The steps zero the gradients in place
  // (zero_grad(false); LibTorch 2.x frees them by default), so every backward
  // adds into these same tensors; made by the first backward instead, they
  // land among its activations and the second step grows the heap around
  // them. A parameter the loss never reaches thus takes the weight decay from
  // the first step, not from the second.
  {
    at::NoGradGuard no_grad;
    for (at::Tensor& p : params)
      if (!p.grad().defined()) p.mutable_grad() = at::zeros_like(p);
  }
  auto optimizer = std::make_unique<FusedAdamW>(std::move(params), adam);
  optimizer->allocate_state();
  return optimizer;
}

model::CausalLM load_policy(const ModelSettings& settings) {
  const std::string& resume = settings.resume_from;
  if (!settings.lora) return model::load_model(resume.empty() ? settings.dir : resume, settings.dtype, settings.device);
  // The base stays as it was.
  model::CausalLM policy = model::load_model(settings.dir, settings.dtype, settings.device);
  model::apply_lora(*policy, settings.lora_options);
  if (!resume.empty()) model::load_peft_adapter(*policy, resume);  // refuses adapters that differ from the flags
  return policy;
}

void set_learning_rate(torch::optim::AdamW& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
}

namespace {

// The step of a folder named checkpoint-<digits>; nullopt for any other name
// (checkpoint-best, checkpoint-12.bak), which save_total_limit leaves alone.
std::optional<int64_t> checkpoint_step(const std::string& name) {
  constexpr std::string_view prefix = "checkpoint-";
  if (name.size() <= prefix.size() || name.size() > prefix.size() + 18 || name.rfind(prefix, 0) != 0)
    return std::nullopt;
  const std::string digits = name.substr(prefix.size());
  if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) return std::nullopt;
  return std::stoll(digits);
}

void remove_older_checkpoints(const fs::path& output_dir, int64_t limit) {
  std::vector<std::pair<int64_t, fs::path>> existing;
  for (const auto& e : fs::directory_iterator(output_dir))
    if (auto step = checkpoint_step(e.path().filename().string()); step && e.is_directory())
      existing.emplace_back(*step, e.path());
  std::sort(existing.begin(), existing.end());
  const auto keep = static_cast<size_t>(std::max<int64_t>(1, limit));
  for (size_t i = 0; i + keep < existing.size(); ++i) fs::remove_all(existing[i].second);
}

}  // namespace

std::string save_checkpoint(model::CausalLMImpl& model, const CheckpointSettings& settings, int64_t step,
                            const std::string& tokenizer_dir, const nlohmann::json& state,
                            const std::function<void(const std::string& tmp_dir)>& extra) {
  const fs::path output_dir = settings.output_dir;
  const fs::path final_dir = output_dir / fmt::format("checkpoint-{}", step);
  const fs::path tmp = output_dir / fmt::format(".checkpoint-{}.tmp", step);
  try {
    fs::remove_all(tmp);
    if (model::has_adapters(model)) {
      model::save_peft_adapter(model, settings.lora_options, tmp.string(), settings.base_model);
      model::copy_tokenizer_files(tokenizer_dir, tmp.string());
      if (settings.merge_lora) model::save_merged_model(model, (tmp / "merged").string(), tokenizer_dir);
    } else {
      model::save_model(model, tmp.string(), tokenizer_dir);
    }
    model::write_text_atomically((tmp / "trainer_state.json").string(), state.dump(2) + "\n");
    if (extra) extra(tmp.string());  // LibTorch's writers report a full disk as "unexpected pos"
  } catch (const std::exception& e) {
    std::error_code ec;
    fs::remove_all(tmp, ec);  // a partial checkpoint only takes space
    throw CheckpointWriteError(fmt::format(
        "cannot write {}: {} ({} free on that disk; is it full?). The checkpoints saved before are intact; free "
        "space or choose another --output_dir, then continue with --resume_from_checkpoint on the newest",
        final_dir.string(), e.what(), free_space(output_dir.string())));
  }
  fs::remove_all(final_dir);
  fs::rename(tmp, final_dir);  // a crash never leaves half a checkpoint under the final name
  if (settings.save_total_limit) remove_older_checkpoints(output_dir, *settings.save_total_limit);
  spdlog::info("saved {}", final_dir.string());
  return final_dir.string();
}

size_t remove_unfinished_checkpoints(const std::string& output_dir) {
  size_t removed = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(output_dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(".checkpoint-", 0) != 0 || name.size() < 17 || name.compare(name.size() - 4, 4, ".tmp") != 0)
      continue;
    spdlog::warn("removing {}: a checkpoint whose save was interrupted (the process was killed while writing it)",
                 e.path().string());
    fs::remove_all(e.path(), ec);
    ++removed;
  }
  return removed;
}

}  // namespace grpo::trainer
