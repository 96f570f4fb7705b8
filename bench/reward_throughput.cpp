// Reward throughput (completions/s) of each built-in reward on realistic
// ~500-token NuminaMath-style solutions, on one thread and — for plugins that
// declare themselves thread-safe — on all cores, with the ratio between them.
//
//   bench_rewards [--n 4000] [--threads N]
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>

#include <grpo/reward.h>
#include <spdlog/spdlog.h>

#include "plugins/plugin_options.h"
#include "plugins/plugin_registry.h"
#include "plugins/reward_function.h"

using namespace grpo::plugins;

namespace {

// A worked solution of ~2,000 characters (~500 tokens) ending in \boxed{}.
std::string solution_text(std::mt19937& rng, const std::string& answer) {
  static const char* steps[] = {
      "First, we rewrite the equation as $x^2 - 5x + 6 = 0$ and factor it into $(x-2)(x-3) = 0$. ",
      "Substituting $y = \\frac{3}{4}x$ into the second equation gives $\\frac{3}{4}x + 2x = 11$. ",
      "By the Pythagorean theorem, $a^2 + b^2 = c^2$, so $c = \\sqrt{9 + 16} = 5$. ",
      "The sum of the arithmetic series is $S_n = \\frac{n}{2}(a_1 + a_n) = \\frac{10}{2}(3 + 21)$. ",
      "Note that $\\binom{6}{2} = 15$ and there are $4$ favourable outcomes, so the probability is $\\frac{4}{15}$. ",
      "Multiplying both sides by $2$ we obtain $2x + 6 = 14$, hence $x = 4$. Let us double-check this value. ",
      "Since $\\sin^2\\theta + \\cos^2\\theta = 1$, we get $\\cos\\theta = \\pm\\frac{\\sqrt{3}}{2}$. ",
      "We can verify with Python:\n```python\nfrom sympy import *\nprint(simplify((x**2-1)/(x-1)))\n```\n",
  };
  std::string out = "Let's solve this step by step.\n\n";
  std::uniform_int_distribution<int> pick(0, 7);
  while (out.size() < 1900) out += steps[pick(rng)];
  return out + "\n\nTherefore, the final answer is $\\boxed{" + answer + "}$.";
}

std::vector<RewardInput> make_inputs(size_t n) {
  static const char* answers[] = {"42", "\\frac{3}{4}", "2\\sqrt{3}", "x^2+1", "0.75", "\\{1,2,3\\}", "(1,2)",
                                  "-7", "\\frac{\\pi}{4}", "1{,}000", "12\\text{ cm}", "3+2x"};
  std::mt19937 rng(1234);
  std::vector<RewardInput> v;
  for (size_t i = 0; i < n; ++i) {
    RewardInput in;
    const std::string gold = answers[i % 12];
    // Half right, half wrong, as in a real group.
    const std::string said = (i % 2 == 0) ? gold : std::string(answers[(i + 5) % 12]);
    in.completion = "<think>" + solution_text(rng, said) + "</think>\n<answer>\\boxed{" + said + "}</answer>";
    in.completion_ids.assign(500, 0);
    for (size_t t = 0; t < 500; ++t) in.completion_ids[t] = static_cast<int32_t>(rng() % 151000);
    in.ids_known = true;
    in.columns = RowColumns::from_json({{"solution", solution_text(rng, gold)}});
    v.push_back(std::move(in));
  }
  return v;
}

struct Measured {
  double per_s = 0;
  double mean_reward = 0;
};

// Best of three runs (the machine is noisy), after a warm-up call that also
// lets the host measure the plugin's cost per sample.
Measured measure(RewardFunction& fn, const std::vector<RewardInput>& inputs) {
  fn.score(std::vector<RewardInput>(inputs.begin(), inputs.begin() + std::min<size_t>(64, inputs.size())), {});
  Measured m;
  for (int run = 0; run < 3; ++run) {
    auto t0 = std::chrono::steady_clock::now();
    std::vector<double> r = fn.score(inputs, {});
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    m.per_s = std::max(m.per_s, static_cast<double>(inputs.size()) / s);
    double sum = 0;
    for (double x : r) sum += x;
    m.mean_reward = sum / static_cast<double>(r.size());
  }
  return m;
}

// Seconds per score() call on batches of 64, best of `calls` (after a warm-up).
double seconds_per_batch_of_64(RewardFunction& fn, const std::vector<RewardInput>& inputs, int calls) {
  const std::vector<RewardInput> batch(inputs.begin(), inputs.begin() + std::min<size_t>(64, inputs.size()));
  fn.score(batch, {});
  double best = 1e30;
  for (int c = 0; c < calls; ++c) {
    auto t0 = std::chrono::steady_clock::now();
    fn.score(batch, {});
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  size_t n = 4000;
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--n")) n = std::stoul(argv[i + 1]);
    if (!std::strcmp(argv[i], "--threads")) threads = std::stoi(argv[i + 1]);
  }
  spdlog::set_level(spdlog::level::warn);
  PluginSources sources;
  sources.use_env = false;
  sources.builtin_dir = GRPO_PLUGIN_BUILD_DIR;
  PluginRegistry registry = PluginRegistry::discover(sources);
  std::vector<RewardInput> inputs = make_inputs(n);
  size_t chars = 0;
  for (const auto& in : inputs) chars += in.completion.size();
  std::printf("%zu completions, %.0f characters and 500 tokens each on average; %d threads available\n\n", n,
              static_cast<double>(chars) / static_cast<double>(n), threads);
  std::printf("%-14s %12s %14s %14s %8s\n", "reward", "mean reward", "1 thread /s", "N threads /s", "ratio");
  for (const char* name : {"accuracy", "format", "cosine", "repetition", "soft_overlong"}) {
    ResolvedPlugin p = registry.require(name, GRPO_REWARD_INTERFACE);
    nlohmann::json opts =
        resolve_plugin_options(p.info, {{"max_completion_length", 1024}, {"soft_cache_length", 256}}, nullptr);
    auto one = RewardFunction::create(p, opts, nullptr, "{}", 1);
    Measured single = measure(*one, inputs);
    if (one->thread_safe() && threads > 1) {
      auto many = RewardFunction::create(p, opts, nullptr, "{}", threads);
      Measured parallel = measure(*many, inputs);
      std::printf("%-14s %12.3f %14.0f %14.0f %7.2fx\n", name, single.mean_reward, single.per_s, parallel.per_s,
                  parallel.per_s / single.per_s);
    } else {
      std::printf("%-14s %12.3f %14.0f %14s %8s  (not thread-safe)\n", name, single.mean_reward, single.per_s, "-",
                  "-");
    }
  }
  // --plugin_isolation process: the same batches scored in grpo-plugin-worker.
  std::printf("\n%-14s %14s %14s %10s   (batches of 64, one thread, best of 20)\n", "reward", "in process ms",
              "isolated ms", "overhead");
  for (const char* name : {"accuracy", "format", "cosine", "repetition", "soft_overlong"}) {
    ResolvedPlugin p = registry.require(name, GRPO_REWARD_INTERFACE);
    nlohmann::json opts =
        resolve_plugin_options(p.info, {{"max_completion_length", 1024}, {"soft_cache_length", 256}}, nullptr);
    auto local = RewardFunction::create(p, opts, nullptr, "{}", 1);
    Isolation isolation;
    isolation.process = true;
    auto isolated = RewardFunction::create(p, opts, nullptr, "{}", 1, {}, isolation);
    const double a = seconds_per_batch_of_64(*local, inputs, 20), b = seconds_per_batch_of_64(*isolated, inputs, 20);
    std::printf("%-14s %14.3f %14.3f %9.1f%%\n", name, a * 1e3, b * 1e3, (b / a - 1.0) * 100.0);
  }
  return 0;
}
