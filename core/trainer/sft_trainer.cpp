#include "trainer/sft_trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <random>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <torch/types.h>  // before clip_grad.h, which uses torch::Tensor without including it
#include <torch/nn/utils/clip_grad.h>

#include "data/dataset.h"
#include "model/device_memory.h"
#include "model/threads.h"
#include "model/weights.h"
#include "tokenizer/chat_prompt.h"
#include "trainer/checkpoint.h"
#include "trainer/lr_schedule.h"
#include "trainer/rollout_batch.h"
#include "trainer/run_log.h"
#include "trainer/stop_signal.h"

namespace grpo::trainer {

namespace {

// Prompt ids (chat format, generation prompt) and the answer's ids + end of turn.
RolloutSequence example_of(const data::Row& row, const tok::Tokenizer& tokenizer, tok::ChatFamily family,
                           const std::string& system) {
  nlohmann::json messages;
  std::string answer;
  const auto& c = row.columns;
  if (c.contains("messages") && c["messages"].is_array() && !c["messages"].empty() &&
      c["messages"].back().value("role", "") == "assistant") {
    answer = c["messages"].back().value("content", "");
    messages = data::prompt_messages(row, system);  // drops the last assistant turn
  } else if (c.contains("response") && c["response"].is_string()) {
    answer = c["response"].get<std::string>();
    messages = data::prompt_messages(row, system);
  } else {
    throw data::DataError(fmt::format("{}: sft needs an answer to learn: a final assistant turn in 'messages' or a "
                                      "'response' column",
                                      row.source));
  }
  RolloutSequence s;
  try {
    s.prompt_ids = tok::encode_chat_prompt(tokenizer, family, tok::messages_from_json(messages));
  } catch (const tok::ChatTemplateError& e) {
    throw data::DataError(fmt::format("{}: {}", row.source, e.what()));
  }
  s.completion_ids = tokenizer.encode(answer, false);
  if (auto eos = tokenizer.eos_id()) s.completion_ids.push_back(*eos);  // learn to stop
  return s;
}

}  // namespace

void run_sft(const SftSettings& s) {
  model::make_current(s.model.device);  // as torch.cuda.set_device
  model::configure_cpu_threads(s.num_threads);
  torch::manual_seed(s.seed);
  const std::string& model_dir = s.model.dir;
  std::filesystem::create_directories(s.checkpoint.output_dir);
  remove_unfinished_checkpoints(s.checkpoint.output_dir);
  s.run.config.write_args_yaml((std::filesystem::path(s.checkpoint.output_dir) / "args.yaml").string());

  tok::Tokenizer tokenizer = tok::Tokenizer::from_dir(model_dir);
  const tok::ChatFamily family = tok::chat_family_for(tokenizer, s.prompts.template_name);
  std::vector<RolloutSequence> examples;
  for (const data::DatasetSource& source : s.datasets)
    for (const data::Row& row : data::load_rows(source))
      examples.push_back(example_of(row, tokenizer, family, s.prompts.system));
  if (examples.empty()) throw data::DataError("the sft dataset has no rows");

  model::CausalLM policy = load_policy(s.model);  // full, or the base with LoRA adapters
  policy->train();
  policy->set_gradient_checkpointing(s.model.gradient_checkpointing);
  auto optimizer = make_adamw(s.optimizer, *policy);
  const int64_t micro = s.micro_batch, ga = s.grad_accum;
  const int64_t per_step = micro * ga;
  const int64_t steps_per_epoch = (static_cast<int64_t>(examples.size()) + per_step - 1) / per_step;
  const int64_t max_steps =
      s.max_steps ? *s.max_steps : static_cast<int64_t>(std::ceil(s.epochs * static_cast<double>(steps_per_epoch)));
  LrSchedule schedule(s.optimizer.scheduler, s.optimizer.learning_rate, max_steps, s.optimizer.warmup_steps.value_or(-1),
                      s.optimizer.warmup_ratio);
  RunLog log(s.checkpoint.output_dir, s.logging.tensorboard);
  const int64_t logging_steps = s.logging.logging_steps;
  spdlog::info("sft on {} examples for {} steps ({} per step) on {}", examples.size(), max_steps, per_step,
               s.model.device.str());

  // Ctrl-C / SIGTERM: the step in progress finishes and is saved, as in train.
  StopSignals signals;
  const int64_t save_steps = s.logging.save_steps.value_or(0);
  const nlohmann::json state{{"global_step", 0}, {"max_steps", max_steps}};
  auto save = [&](int64_t step) {
    if (!s.checkpoint.save) return;  // --save_strategy no
    nlohmann::json st = state;
    st["global_step"] = step;
    save_checkpoint(*policy, s.checkpoint, step, model_dir, st);
  };
  std::vector<size_t> order(examples.size());
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(s.seed);
  size_t cursor = order.size();  // forces a shuffle before the first step
  double epochs = -1;
  for (int64_t step = 0; step < max_steps; ++step) {
    const auto start = std::chrono::steady_clock::now();
    at::Tensor loss_sum = at::zeros({}, at::TensorOptions().dtype(at::kDouble).device(s.model.device));
    double tokens = 0;
    for (int64_t m = 0; m < ga; ++m) {
      std::vector<RolloutSequence> part;
      while (static_cast<int64_t>(part.size()) < micro) {
        if (cursor == order.size()) {
          if (s.shuffle) std::shuffle(order.begin(), order.end(), rng);
          cursor = 0;
          epochs += 1;
        }
        part.push_back(examples[order[cursor++]]);
      }
      for (const RolloutSequence& e : part) tokens += static_cast<double>(e.completion_ids.size());
      RolloutBatch batch = make_rollout_batch(part, 0, false, s.model.device);
      at::Tensor logp = completion_logprobs(*policy, batch, {1.0, kLogprobChunk, false}).logprobs;  // [B, T]
      const at::Tensor& mask = batch.completion_mask;
      at::Tensor loss = -(logp * mask).sum() / mask.sum().clamp_min(1.0) / static_cast<double>(ga);
      loss.backward();
      loss_sum += loss.detach();  // read once per step, not per micro-batch (a GPU waits at each read)
    }
    const double grad_norm = torch::nn::utils::clip_grad_norm_(policy->parameters(), s.optimizer.max_grad_norm);
    set_learning_rate(*optimizer, schedule.lr(step));
    optimizer->step();
    optimizer->zero_grad(/*set_to_none=*/false);  // kept for the next backward: see make_adamw
    log.add({{"loss", loss_sum.item<double>()},
             {"grad_norm", grad_norm},
             {"learning_rate", schedule.lr(step)},
             {"epoch", epochs + static_cast<double>(cursor) / static_cast<double>(order.size())},
             {"num_tokens", tokens},
             {"step_time", std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()}});
    const int64_t done = step + 1;
    if (stop_requested()) {
      log.flush(done, max_steps);
      spdlog::warn("stopped by a signal at step {}/{}{}", done, max_steps,
                   s.checkpoint.save ? ": saving a checkpoint" : " (--save_strategy no: no checkpoint)");
      save(done);
      return;
    }
    if (done % logging_steps == 0 || done == max_steps) log.flush(done, max_steps);
    if (save_steps > 0 && done % save_steps == 0 && done < max_steps) save(done);
  }
  save(max_steps);
}

}  // namespace grpo::trainer
