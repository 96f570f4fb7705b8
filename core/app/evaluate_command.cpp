#include "app/evaluate_command.h"

#include <cstdio>

#include <grpo/reward.h>

#include "config/config.h"
#include "model/engine.h"
#include "model/threads.h"
#include "model/lora_files.h"
#include "model/weights.h"
#include "rewards/reward_set.h"
#include "tokenizer/chat_prompt.h"
#include "trainer/prompt_source.h"

namespace grpo::app {

int run_evaluate_command(const std::vector<std::string>& args) {
  config::ParseResult parsed = config::parse(args, config::ParseOptions{{"sample"}, 0, false});
  const config::Config& cfg = parsed.config;
  const std::string dir = cfg.get_string("model");
  if (dir.empty()) throw config::ConfigError("evaluate needs --model DIR");
  if (cfg.get_strings("dataset").empty()) throw config::ConfigError("evaluate needs --dataset rows.jsonl");
  model::configure_cpu_threads(static_cast<int>(cfg.get_int("num_threads")));

  tok::Tokenizer tokenizer = tok::Tokenizer::from_dir(dir);
  trainer::PromptSource prompts(cfg.get_strings("dataset"), tokenizer,
                                tok::chat_family_for(tokenizer, cfg.get_string("template")),
                                data::load_system_prompt(cfg.get_string("system")), /*shuffle=*/false, 0);
  std::vector<const trainer::Prompt*> rows = prompts.next(prompts.size());
  model::Engine engine(model::load_model_or_adapter(dir), &tokenizer);  // a LoRA checkpoint too
  model::SamplingParams params;  // greedy unless --sample: a stable number to compare checkpoints by
  params.max_new_tokens = cfg.get_int("max_completion_length");
  params.stop_strings = cfg.get_strings("stop_words");
  if (parsed.extras.count("sample")) {
    params.temperature = cfg.get_double("temperature");
    params.top_p = cfg.get_double("top_p");
    params.top_k = cfg.get_int("top_k");
  } else {
    params.top_k = 1;
  }
  std::vector<model::GenerateRequest> requests;
  for (size_t i = 0; i < rows.size(); ++i) {
    model::GenerateRequest r{rows[i]->ids, 1, static_cast<uint64_t>(cfg.get_int("seed")) + i, {}};
    if (auto eos = tokenizer.eos_id()) r.stop_ids.push_back(*eos);
    requests.push_back(std::move(r));
  }
  std::vector<model::Completion> done = engine.generate(requests, params);

  std::vector<plugins::RewardInput> inputs;
  double length = 0;
  for (const auto& c : done) {
    plugins::RewardInput in;
    in.prompt_messages_json = rows[c.request]->messages_json;
    in.completion = tokenizer.decode(c.ids, /*skip_special_tokens=*/true);
    in.completion_ids = c.ids;
    in.ids_known = true;
    in.is_truncated = c.finish == model::FinishReason::Length;
    in.prompt_index = static_cast<int64_t>(c.request);
    in.columns = rows[c.request]->columns;
    inputs.push_back(std::move(in));
    length += static_cast<double>(c.ids.size());
  }
  plugins::PluginSources sources;
  sources.files = cfg.get_strings("plugins");
  plugins::PluginRegistry registry = plugins::PluginRegistry::discover(sources);
  rewards::RewardSet set(registry, cfg.get_strings("reward_funcs"), cfg.get_doubles("reward_weights"), cfg.to_json(),
                         cfg.get_json("plugin_args"), std::make_shared<plugins::MetricsSink>(),
                         static_cast<int>(cfg.get_int("num_threads")));
  rewards::RewardMatrix m = set.score(inputs, {});
  std::printf("%s on %zu rows (%s)\n", dir.c_str(), inputs.size(), parsed.extras.count("sample") ? "sampled" : "greedy");
  for (size_t f = 0; f < m.names.size(); ++f)
    std::printf("  %-20s %.4f\n", m.names[f].c_str(), rewards::nanmean(m.by_fn[f]));
  std::printf("  %-20s %.4f\n  %-20s %.1f\n", "weighted reward", rewards::nanmean(m.total), "mean length (tokens)",
              length / static_cast<double>(inputs.size()));
  if (!inputs.empty()) std::printf("  first completion: %s\n", inputs[0].completion.c_str());
  return 0;
}

}  // namespace grpo::app
