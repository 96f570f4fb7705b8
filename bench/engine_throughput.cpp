// Generation engine throughput for a ~25M-parameter model (preset base25m),
// each number next to the roofline measured in the same run:
//  - decode tokens/s at batch 1, 16, 64 vs the matmul GFLOP/s of the model's
//    own layer shapes at that batch, and vs memory bandwidth (weights read per step);
//  - prefill and log-probability pass tokens/s;
//  - prefix sharing: a G=8 group prefilled once vs eight times;
//  - peak RSS.
//   bench_engine [--dtype float32|bfloat16|both] [--device cpu|cuda] [--new_tokens 32] [--threads N]
//                [--profile_batch B]  (decode at batch B only, repeated: for perf record)
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include <torch/types.h>
#include <torch/utils.h>

#include "model/engine.h"
#include "model/logprobs.h"
#include "model/presets.h"
#include "model/threads.h"

using namespace grpo::model;

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

at::Device g_device = at::kCPU;

// Waits for the device's queued work (a read back is queued behind it).
void sync() {
  if (g_device.is_cuda()) at::zeros({1}, at::TensorOptions().device(g_device)).item<float>();
}

// Best of `runs` timings of fn().
template <class F>
double best_time(int runs, F fn) {
  double best = 1e30;
  for (int i = 0; i < runs; ++i) {
    sync();
    double t0 = now_s();
    fn();
    sync();
    best = std::min(best, now_s() - t0);
  }
  return best;
}

at::TensorOptions on_device() { return at::TensorOptions().device(g_device); }

// GFLOP/s of the model's matmuls ([B, in] x [in, out] for every linear layer) at batch B.
double matmul_gflops(const ModelConfig& c, int64_t B, at::ScalarType dtype) {
  const int64_t H = c.hidden_size, I = c.intermediate_size, D = c.head_dim;
  std::vector<std::pair<int64_t, int64_t>> shapes = {
      {H, c.num_attention_heads * D}, {H, c.num_key_value_heads * D}, {H, c.num_key_value_heads * D},
      {c.num_attention_heads * D, H}, {H, I}, {H, I}, {I, H}};
  std::vector<at::Tensor> xs, ws;
  double flops = 0;
  for (auto [in, out] : shapes) {
    xs.push_back(at::randn({B, in}, on_device()).to(dtype));
    ws.push_back(at::randn({out, in}, on_device()).to(dtype));
    flops += 2.0 * static_cast<double>(B * in * out);
  }
  flops *= static_cast<double>(c.num_hidden_layers);
  double t = best_time(5, [&] {
    for (int64_t l = 0; l < c.num_hidden_layers; ++l)
      for (size_t i = 0; i < xs.size(); ++i) at::linear(xs[i], ws[i]);
  });
  return flops / t / 1e9;
}

// Memory bandwidth, GB/s: copying a 256 MB buffer (read + write).
double stream_gbps() {
  at::Tensor a = at::ones({64 << 20}, on_device()), b = at::empty_like(a);
  double t = best_time(5, [&] { b.copy_(a); });
  return 2.0 * static_cast<double>(a.nbytes()) / t / 1e9;
}

long peak_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss / 1024;
}

int64_t g_profile_batch = 0;

void run(at::ScalarType dtype, int64_t new_tokens) {
  nlohmann::json json = preset_config("qwen2", "base25m", 512);
  CausalLM lm(ModelConfig::from_json(json, "base25m"));
  init_weights(*lm, 0);
  lm->to(g_device, dtype);
  const ModelConfig& c = lm->config();
  int64_t params = 0, body = 0;
  for (auto& p : lm->named_parameters()) {
    params += p.value().numel();
    if (p.key().find("embed_tokens") == std::string::npos) body += p.value().numel();
  }
  const double bytes_per_param = dtype == at::kFloat ? 4.0 : 2.0;
  const double gbps = stream_gbps();
  std::printf("\n== %s on %s: %lld parameters (%lld outside the embedding), %d CPU threads, memory %.1f GB/s\n",
              c10::toString(dtype), g_device.str().c_str(), static_cast<long long>(params), static_cast<long long>(body),
              at::get_num_threads(), gbps);

  Engine engine(lm);
  SamplingParams sp;
  sp.max_new_tokens = new_tokens;
  if (g_profile_batch > 0) {
    GenerateRequest req{std::vector<int32_t>(16, 7), g_profile_batch, 1, {}};
    double t = best_time(10, [&] { engine.generate({req}, sp); });
    std::printf("batch %lld: %.0f tokens/s\n", static_cast<long long>(g_profile_batch),
                static_cast<double>(g_profile_batch * new_tokens) / t);
    return;
  }
  std::printf("%-8s %12s %14s %16s %12s %14s\n", "batch", "tokens/s", "model GFLOP/s", "matmul GFLOP/s", "of matmul",
              "of memory bw");
  for (int64_t B : {1, 16, 64}) {
    GenerateRequest req{std::vector<int32_t>(16, 7), B, 1, {}};
    double t = best_time(2, [&] { engine.generate({req}, sp); });
    const double tokens_s = static_cast<double>(B * new_tokens) / t;
    const double model_gflops = 2.0 * static_cast<double>(body) * tokens_s / 1e9;
    const double peak = matmul_gflops(c, B, dtype);
    // Each decoding step reads every weight once: bandwidth bound at batch 1.
    const double bw_fraction = static_cast<double>(body) * bytes_per_param * (tokens_s / B) / 1e9 / gbps;
    std::printf("%-8lld %12.0f %14.1f %16.1f %11.0f%% %13.0f%%\n", static_cast<long long>(B), tokens_s, model_gflops,
                peak, 100 * model_gflops / peak, 100 * bw_fraction);
  }

  torch::NoGradGuard no_grad;
  at::Tensor prompts = at::randint(0, 512, {8, 256}, on_device().dtype(at::kLong));
  double prefill = best_time(2, [&] {
    KvCache cache = lm->new_cache();
    lm->hidden_states(prompts, {}, {}, &cache);
  });
  at::Tensor seqs = at::randint(0, 512, {8, 512}, on_device().dtype(at::kLong));
  double logprob = best_time(2, [&] { sequence_logprobs(*lm, seqs, {}, {1.0, 256, false}); });
  std::printf("prefill %.0f tokens/s (8 x 256); log-prob pass %.0f tokens/s (8 x 512, no grad)\n",
              8 * 256 / prefill, 8 * 512 / logprob);

  // A G=8 group: its prompt prefilled once and shared, vs eight separate prefills.
  at::Tensor one = at::randint(0, 512, {1, 256}, on_device().dtype(at::kLong));
  double shared = best_time(3, [&] {
    KvCache cache = lm->new_cache();
    lm->hidden_states(one, {}, {}, &cache);
    cache.select_rows(at::zeros({8}, on_device().dtype(at::kLong)));
  });
  double unshared = best_time(3, [&] {
    KvCache cache = lm->new_cache();
    lm->hidden_states(one.expand({8, 256}).contiguous(), {}, {}, &cache);
  });
  std::printf("G=8 prefix sharing: shared prefill costs %.2f of unshared (target <= 0.25)\n", shared / unshared);
  std::printf("peak RSS %ld MB\n", peak_rss_mb());
}

}  // namespace

int main(int argc, char** argv) {
  std::string dtype = "both";
  int64_t new_tokens = 32;
  int threads = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--dtype")) dtype = argv[i + 1];
    if (!std::strcmp(argv[i], "--new_tokens")) new_tokens = std::stoll(argv[i + 1]);
    if (!std::strcmp(argv[i], "--threads")) threads = std::stoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--device")) g_device = at::Device(argv[i + 1]);
    if (!std::strcmp(argv[i], "--profile_batch")) g_profile_batch = std::stoll(argv[i + 1]);
  }
  configure_cpu_threads(threads);
  if (dtype == "float32" || dtype == "both") run(at::kFloat, new_tokens);
  if (dtype == "bfloat16" || dtype == "both") run(at::kBFloat16, new_tokens);
  return 0;
}
