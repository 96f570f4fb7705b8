#include "app/evaluate_command.h"

#include <cstdio>
#include <cstdlib>

#include <spdlog/spdlog.h>

#include <grpo/multiturn.h>
#include <grpo/reward.h>
#include <grpo/sampler.h>

#include "config/config.h"
#include "model/engine.h"
#include "model/lora_files.h"
#include "model/stop_ids.h"
#include "model/threads.h"
#include "model/weights.h"
#include "plugins/plugin_options.h"
#include "rewards/reward_set.h"
#include "tokenizer/chat_prompt.h"
#include "trainer/conversations.h"
#include "trainer/prompt_source.h"
#include "trainer/settings.h"
#include "trainer/stop_signal.h"

namespace grpo::app {

namespace {

// The engine as a generate call: requests in, one Sample per completion.
std::vector<Sample> generate_with(model::Engine& engine, const model::SamplingParams& params,
                                  const std::vector<plugins::SampleRequest>& requests, uint64_t prefix_flags) {
  std::vector<model::GenerateRequest> reqs;
  for (const plugins::SampleRequest& r : requests)
    reqs.push_back({r.prompt_ids, r.n, r.seed, r.stop_ids, r.max_new_tokens > 0 ? r.max_new_tokens : -1});
  std::vector<Sample> out;
  const model::PrefixReuse reuse{(prefix_flags & GRPO_PREFIX_CONTINUES) != 0, (prefix_flags & GRPO_PREFIX_KEEP) != 0};
  for (model::Completion& c : engine.generate(reqs, params, reuse)) {
    Sample x;
    x.prompt = requests[c.request].prompt;
    x.request = c.request;
    x.index = static_cast<uint32_t>(c.index);
    x.finish = c.finish == model::FinishReason::Length ? FinishReason::Length : FinishReason::Stop;
    x.ids = std::move(c.ids);
    x.logprobs = std::move(c.logprobs);
    out.push_back(std::move(x));
  }
  return out;
}

}  // namespace

int run_evaluate_command(const std::vector<std::string>& args) {
  config::ParseResult parsed = config::parse(args, config::ParseOptions{{"sample"}, 0, false});
  const trainer::EvaluateSettings s = trainer::EvaluateSettings::from(parsed.config, /*needs_data=*/true);
  const std::string& dir = s.model_dir;
  model::configure_cpu_threads(s.num_threads);

  tok::Tokenizer tokenizer = tok::Tokenizer::from_dir(dir);
  const tok::ChatFamily family = tok::chat_family_for(tokenizer, s.prompts.template_name);
  plugins::PluginSources sources;
  sources.files = s.rewards.plugins;
  plugins::PluginRegistry registry = plugins::PluginRegistry::discover(sources);
  std::vector<std::string> sectioned = s.rewards.funcs;
  if (!s.multi_turn.handler.empty()) sectioned.push_back(s.multi_turn.handler);
  plugins::check_plugin_args_sections(s.rewards.plugin_args, sectioned, "", registry.all());
  auto metrics_sink = std::make_shared<plugins::MetricsSink>();
  const plugins::TextServices text{&tokenizer, family, dir};
  std::unique_ptr<plugins::MultiturnHandler> handler;
  if (!s.multi_turn.handler.empty())
    handler = plugins::MultiturnHandler::for_run(registry, s.multi_turn.handler, s.run.json, s.rewards.plugin_args,
                                                metrics_sink, text, s.multi_turn.timeout_s, s.num_threads);

  trainer::PromptFormat format{&tokenizer, family, s.prompts.system};
  if (handler) format.tools_json = handler->tools_json();
  trainer::PromptSource prompts(trainer::load_dataset_rows(s.datasets), format, /*shuffle=*/false, 0);
  std::vector<const Prompt*> rows = prompts.next(prompts.size());
  model::Engine engine(model::load_model_or_adapter(dir, s.dtype, s.device), &tokenizer);  // a LoRA checkpoint too
  const std::vector<int32_t> stop_ids = model::stop_token_ids(tokenizer, engine.model()->config(), dir);
  const int64_t context = s.prompts.max_length.value_or(engine.model()->config().max_position_embeddings);
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
  std::vector<plugins::SampleRequest> requests;
  for (size_t i = 0; i < rows.size(); ++i) {
    plugins::SampleRequest r;
    r.prompt_ids = rows[i]->ids;
    r.seed = s.seed + i;
    r.stop_ids = stop_ids;
    r.prompt = rows[i];
    requests.push_back(std::move(r));
  }
  const trainer::GenerateFn generate = [&](const std::vector<plugins::SampleRequest>& r, uint64_t prefix_flags) {
    return generate_with(engine, params, r, prefix_flags);
  };
  std::map<std::string, double> metrics;
  // Ctrl-C / SIGTERM: generation is given up a few seconds later (nothing is
  // scored); one that arrives while rewards score lets them finish.
  trainer::StopSignals signals;
  std::vector<Sample> samples;
  try {
    samples = trainer::run_interruptible<std::vector<Sample>>(
        [&] {
          if (!handler) return generate(requests, 0);
          const trainer::ConversationLimits limits{s.multi_turn.max_turns, s.sampling.max_new_tokens,
                                                   s.multi_turn.total_scope, context};
          trainer::ConversationRunner runner(*handler, tokenizer, family, limits);
          return runner.run(generate, requests, {}, metrics);
        },
        "generation", s.device);
  } catch (const trainer::StopRequested&) {
    // The generating thread still uses the model: leave without destroying it.
    spdlog::error("evaluate stopped by a signal while generating for {} rows: nothing was scored", requests.size());
    spdlog::shutdown();
    std::fflush(nullptr);
    std::_Exit(1);
  }
  if (!handler)
    for (Sample& x : samples) x.text = tokenizer.decode_sampled(x.ids, /*skip_special_tokens=*/true);
  double length = 0;
  for (const Sample& x : samples) length += static_cast<double>(x.ids.size());

  std::vector<std::unique_ptr<rewards::HostReward>> host_rewards;
  if (handler && handler->has_reward()) host_rewards.push_back(std::make_unique<rewards::EnvironmentReward>(handler->name()));
  rewards::RewardSet set(registry, s.rewards.funcs, s.rewards.weights, s.run.json, s.rewards.plugin_args, metrics_sink,
                         s.num_threads, text, s.rewards.isolation, std::move(host_rewards));
  rewards::RewardMatrix m = set.score(samples, {});
  std::printf("%s on %zu rows (%s)\n", dir.c_str(), samples.size(), parsed.extras.count("sample") ? "sampled" : "greedy");
  for (size_t f = 0; f < m.names.size(); ++f)
    std::printf("  %-20s %.4f\n", m.names[f].c_str(), rewards::nanmean(m.by_fn[f]));
  std::printf("  %-20s %.4f\n  %-20s %.1f\n", "weighted reward", rewards::nanmean(m.total), "mean length (tokens)",
              length / static_cast<double>(samples.size()));
  if (handler)
    std::printf("  %-20s %.3f\n  %-20s %.3f\n  %-20s %.2f\n", "tool calls/rollout", metrics["tools/call_frequency"],
                "tool failure rate", metrics["tools/failure_frequency"], "turns (mean)", metrics["turns/mean"]);
  if (!samples.empty())
    std::printf("  first completion: %s\n",
                handler ? samples[0].conversation_json.c_str() : samples[0].text.c_str());
  long failures = 0;
  for (const auto& fn : set.functions()) {
    if (fn->failures() == 0) continue;
    spdlog::error("reward '{}' ({}) failed on {} batch(es); those rewards counted as no opinion (NaN) in the means above",
                  fn->name(), fn->file(), fn->failures());
    failures += fn->failures();
  }
  if (trainer::stop_requested())
    spdlog::warn("a stop signal came while the rewards scored; the scores above are whole");
  return failures ? 1 : 0;
}

}  // namespace grpo::app
