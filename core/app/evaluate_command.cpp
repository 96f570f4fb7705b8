#include "app/evaluate_command.h"

#include <cstdio>

#include <grpo/reward.h>

#include "config/config.h"
#include "model/stop_ids.h"
#include "plugins/plugin_options.h"
#include "trainer/settings.h"
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
  const trainer::EvaluateSettings s = trainer::EvaluateSettings::from(parsed.config, /*needs_data=*/true);
  const std::string& dir = s.model_dir;
  model::configure_cpu_threads(s.num_threads);

  tok::Tokenizer tokenizer = tok::Tokenizer::from_dir(dir);
  trainer::PromptSource prompts(s.datasets, tokenizer, tok::chat_family_for(tokenizer, s.prompts.template_name),
                                s.prompts.system, /*shuffle=*/false, 0);
  std::vector<const Prompt*> rows = prompts.next(prompts.size());
  model::Engine engine(model::load_model_or_adapter(dir), &tokenizer);  // a LoRA checkpoint too
  const std::vector<int32_t> stop_ids = model::stop_token_ids(tokenizer, engine.model()->config(), dir);
  model::SamplingParams params;  // greedy unless --sample: a stable number to compare checkpoints by
  params.max_new_tokens = s.sampling.max_new_tokens;
  params.stop_strings = s.sampling.stop_strings;
  if (parsed.extras.count("sample")) {
    params.temperature = s.sampling.temperature;
    params.top_p = s.sampling.top_p;
    params.top_k = s.sampling.top_k;
  } else {
    params.top_k = 1;
  }
  std::vector<model::GenerateRequest> requests;
  for (size_t i = 0; i < rows.size(); ++i) requests.push_back({rows[i]->ids, 1, s.seed + i, stop_ids});
  std::vector<Sample> samples;
  double length = 0;
  for (model::Completion& c : engine.generate(requests, params)) {
    Sample x;
    x.prompt = rows[c.request];
    x.request = c.request;
    x.text = tokenizer.decode_sampled(c.ids, /*skip_special_tokens=*/true);
    x.finish = c.finish == model::FinishReason::Length ? FinishReason::Length : FinishReason::Stop;
    length += static_cast<double>(c.ids.size());
    x.ids = std::move(c.ids);
    samples.push_back(std::move(x));
  }
  plugins::PluginSources sources;
  sources.files = s.rewards.plugins;
  plugins::PluginRegistry registry = plugins::PluginRegistry::discover(sources);
  plugins::check_plugin_args_sections(s.rewards.plugin_args, s.rewards.funcs, "", registry.all());
  rewards::RewardSet set(registry, s.rewards.funcs, s.rewards.weights, s.run.json, s.rewards.plugin_args,
                         std::make_shared<plugins::MetricsSink>(), s.num_threads);
  rewards::RewardMatrix m = set.score(samples, {});
  std::printf("%s on %zu rows (%s)\n", dir.c_str(), samples.size(), parsed.extras.count("sample") ? "sampled" : "greedy");
  for (size_t f = 0; f < m.names.size(); ++f)
    std::printf("  %-20s %.4f\n", m.names[f].c_str(), rewards::nanmean(m.by_fn[f]));
  std::printf("  %-20s %.4f\n  %-20s %.1f\n", "weighted reward", rewards::nanmean(m.total), "mean length (tokens)",
              length / static_cast<double>(samples.size()));
  if (!samples.empty()) std::printf("  first completion: %s\n", samples[0].text.c_str());
  return 0;
}

}  // namespace grpo::app
