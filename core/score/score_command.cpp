#include "score/score_command.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "config/config.h"
#include "data/dataset.h"
#include "plugins/plugin_options.h"
#include "rewards/reward_set.h"
#include "score/score_inputs.h"

namespace grpo::score {

namespace fs = std::filesystem;

namespace {

nlohmann::json finite_or_null(double x) { return std::isnan(x) ? nlohmann::json() : nlohmann::json(x); }

// Written under a temporary name and renamed, so a crash never leaves half a file.
void write_rewards(const std::string& path, const std::vector<plugins::RewardInput>& inputs,
                   const rewards::RewardMatrix& m) {
  if (fs::path(path).has_parent_path()) fs::create_directories(fs::path(path).parent_path());
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    if (!out) throw std::runtime_error(fmt::format("cannot write '{}': check that its directory is writable", path));
    for (size_t i = 0; i < inputs.size(); ++i) {
      nlohmann::json line;
      line["index"] = i;
      line["row"] = inputs[i].prompt_index;
      nlohmann::json by_name = nlohmann::json::object();
      for (size_t f = 0; f < m.names.size(); ++f) by_name[m.names[f]] = finite_or_null(m.by_fn[f][i]);
      line["rewards"] = by_name;
      line["reward"] = finite_or_null(m.total[i]);
      out << line.dump() << '\n';
    }
  }
  fs::rename(tmp, path);
}

void print_summary(const rewards::RewardMatrix& m, const std::vector<double>& weights, size_t n,
                   const std::string& out_path) {
  std::printf("scored %zu completions -> %s\n", n, out_path.c_str());
  std::printf("%-24s %8s %10s %10s %8s\n", "reward", "weight", "mean", "std", "no-op");
  for (size_t f = 0; f < m.names.size(); ++f)
    std::printf("%-24s %8.3g %10.4f %10.4f %8zu\n", m.names[f].c_str(), weights[f], rewards::nanmean(m.by_fn[f]),
                rewards::nanstd(m.by_fn[f]), rewards::count_nan(m.by_fn[f]));
  std::printf("%-24s %8s %10.4f %10.4f %8zu\n", "weighted total", "", rewards::nanmean(m.total),
              rewards::nanstd(m.total), rewards::count_nan(m.total));
}

}  // namespace

int run_score_command(const std::vector<std::string>& args) {
  config::ParseResult parsed = config::parse(args, config::ParseOptions{{"completions", "output"}, 0, /*check_batch_geometry=*/false});
  const config::Config& cfg = parsed.config;

  std::vector<std::string> datasets = cfg.get_strings("dataset");
  if (datasets.empty()) throw config::ConfigError("score needs --dataset rows.jsonl (the rows the completions answer)");
  auto completions_arg = parsed.extras.find("completions");
  if (completions_arg == parsed.extras.end() || completions_arg->second.size() != 1)
    throw config::ConfigError("score needs --completions c.jsonl (one JSON object per line with a 'completion' text)");

  std::vector<data::Row> rows;
  const hub::Options hub{hub::use_hf_from(cfg.get_bool("use_hf")), ""};
  for (const std::string& d : datasets)
    for (auto& r : data::load_rows(d, nullptr, hub)) rows.push_back(std::move(r));
  std::vector<data::Row> lines = data::load_jsonl(completions_arg->second[0]);
  std::vector<plugins::RewardInput> inputs =
      pair_completions(rows, lines, data::load_system_prompt(cfg.get_string("system")));

  plugins::PluginSources sources;
  sources.files = cfg.get_strings("plugins");
  plugins::PluginRegistry registry = plugins::PluginRegistry::discover(sources);
  int threads = static_cast<int>(cfg.get_int("num_threads"));
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  auto metrics = std::make_shared<plugins::MetricsSink>();
  plugins::check_plugin_args_sections(cfg.get_json("plugin_args"), cfg.get_strings("reward_funcs"), "", registry.all());
  config::SettingsReader reader(cfg);
  rewards::RewardSet set(registry, cfg.get_strings("reward_funcs"), cfg.get_doubles("reward_weights"), cfg.to_json(),
                         cfg.get_json("plugin_args"), metrics, threads, {}, plugins::read_isolation(reader));

  rewards::RewardMatrix m = set.score(inputs, plugins::TrainerState{});

  std::string out_path = cfg.get_string("output_dir") + "/rewards.jsonl";
  auto output_arg = parsed.extras.find("output");
  if (output_arg != parsed.extras.end() && !output_arg->second.empty()) out_path = output_arg->second[0];
  write_rewards(out_path, inputs, m);
  print_summary(m, set.weights(), inputs.size(), out_path);
  for (const auto& [name, value] : metrics->drain()) std::printf("%-40s %10.4f\n", name.c_str(), value);
  long failures = 0;
  for (const auto& fn : set.functions()) failures += fn->failures();
  if (failures) spdlog::error("{} reward batch(es) failed; their rewards are null in {}", failures, out_path);
  return failures ? 1 : 0;
}

}  // namespace grpo::score#include "plugins/plugin_options.h"

