// Generation engine throughput at a model's shape (default: preset base25m,
// ~25M parameters; --shape qwen2.5-0.5b|qwen2.5-1.5b|qwen2.5-7b: those
// models' exact configs with random weights; --model DIR: a checkpoint), each
// number next to the roofline measured in the same run:
//  - decode tokens/s per batch size vs the matmul GFLOP/s of the model's own
//    layer and lm_head shapes at that batch, and vs memory bandwidth (weights
//    read per step); for each way of decoding asked for (--decode: eager, in
//    slots with CUDA graphs on a GPU, or both), with the first call of a fresh
//    engine against a warm one;
//  - with --unfused (on a GPU), the same decoding on LibTorch's ops instead of
//    our fused CUDA kernels (model/cuda_kernels.h), in an engine of its own;
//  - with --hf, Hugging Face transformers' generate at the same shape on the
//    same device (bench/peer/hf_generate.py) and our/HF ratios; with --peer,
//    the plain PyTorch eager peer (bench/peer/qwen2_peer.py);
//  - prefill and log-probability pass tokens/s;
//  - prefix sharing: a G=8 group prefilled once vs eight times;
//  - peak RSS.
//   bench_engine [--shape NAME | --model DIR] [--dtype float32|bfloat16|both] [--device cpu|cuda]
//                [--batches 1,16,64] [--prompt 16] [--new_tokens 32] [--decode eager|slots|both]
//                [--threads N] [--hf] [--peer] [--unfused] [--skip_passes]
//                [--profile_batch B]  (decode at batch B only, repeated: for perf record)
//                [--kernel_profile 1,64]  (one call at each batch under LibTorch's profiler, for
//                                          each way of decoding: kernels per step, device time)
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>

#include <torch/cuda.h>
#include <torch/types.h>
#include <torch/utils.h>

#include "model/cpu_kernels.h"
#include "model/cpu_small_matmul.h"
#include "model/cuda_kernels.h"
#include "model/engine.h"
#include "model/logprobs.h"
#include "model/presets.h"
#include "model/threads.h"
#include "model/weights.h"
#include "kernel_profile.h"
#include "peer.h"

using namespace grpo::model;
using grpo::bench::hf_generate_decode;
using grpo::bench::peer_decode;

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

// GFLOP/s of the model's matmuls at batch B: [B, in] x [in, out] for every
// linear layer of every decoder layer, then the lm_head once, by the faster of
// LibTorch's at::linear and the decode kernel (cpu::small_linear, where it
// takes the shape): the best this machine does at those shapes.
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
  at::Tensor head_x = at::randn({B, H}, on_device()).to(dtype), head_w = at::randn({c.vocab_size, H}, on_device()).to(dtype);
  flops += 2.0 * static_cast<double>(B * H * c.vocab_size);
  torch::NoGradGuard no_grad;
  auto linear = [](const at::Tensor& x, const at::Tensor& w, bool decode_kernel) {
    if (decode_kernel) {
      FusedScope fused;
      if (cpu::small_linear(x, w, {}).defined()) return;
    }
    at::linear(x, w);
  };
  double best = 0;
  for (bool decode_kernel : {false, true}) {
    double t = best_time(3, [&] {
      for (int64_t l = 0; l < c.num_hidden_layers; ++l)
        for (size_t i = 0; i < xs.size(); ++i) linear(xs[i], ws[i], decode_kernel);
      linear(head_x, head_w, decode_kernel);
    });
    best = std::max(best, flops / t / 1e9);
  }
  return best;
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

int64_t g_profile_batch = 0, g_prompt = 16;
std::string g_shape = "base25m", g_model_dir, g_decode;
std::vector<int64_t> g_batches = {1, 16, 64}, g_kernel_profile;
bool g_peer = false, g_hf = false, g_unfused = false, g_skip_passes = false;

std::vector<int64_t> parse_list(const std::string& text) {
  std::vector<int64_t> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find(',', start), text.size());
    out.push_back(std::stoll(text.substr(start, end - start)));
    start = end + 1;
  }
  return out;
}

// The model under test, in `dtype`: a checkpoint, or a preset shape with random weights.
CausalLM make_model(at::ScalarType dtype) {
  if (!g_model_dir.empty()) {
    CausalLM lm = load_model(g_model_dir, dtype);
    lm->to(g_device);
    return lm;
  }
  const ModelConfig config = ModelConfig::from_json(preset_config("qwen2", g_shape, 512), g_shape);
  if (g_device.is_cpu()) {  // drawn in float32, as every CPU measurement so far
    CausalLM lm = build_empty(config, at::kCPU, at::kFloat);
    init_weights(*lm, 0);
    lm->to(g_device, dtype);
    return lm;
  }
  CausalLM lm = build_empty(config, g_device, dtype);  // drawn on the GPU: the same distribution, other values
  init_weights(*lm, 0);
  return lm;
}

void run(at::ScalarType dtype, int64_t new_tokens) {
  CausalLM lm = make_model(dtype);
  const ModelConfig& c = lm->config();
  // Weights each decoded token multiplies: every matrix outside the embedding,
  // plus the embedding again when it is also the lm_head.
  int64_t params = 0, per_token = 0;
  for (auto& p : lm->named_parameters()) {
    params += p.value().numel();
    if (p.key().find("embed_tokens") == std::string::npos) per_token += p.value().numel();
  }
  if (c.tie_word_embeddings) per_token += c.vocab_size * c.hidden_size;
  const double bytes_per_param = dtype == at::kFloat ? 4.0 : 2.0;
  const double gbps = stream_gbps();
  std::printf("\n== %s, %s on %s: %lld parameters (%lld multiplied per token, lm_head included), vocabulary %lld, "
              "%d CPU threads, memory %.1f GB/s\n",
              g_model_dir.empty() ? g_shape.c_str() : g_model_dir.c_str(), c10::toString(dtype),
              g_device.str().c_str(), static_cast<long long>(params), static_cast<long long>(per_token),
              static_cast<long long>(c.vocab_size), at::get_num_threads(), gbps);

  SamplingParams sp;
  sp.max_new_tokens = new_tokens;
  const std::vector<int32_t> prompt(static_cast<size_t>(g_prompt), 7);
  // The ways of decoding compared: eager and in slots (CUDA graphs on a GPU).
  std::vector<std::pair<std::string, EngineOptions::Decode>> modes;
  const std::string decode = g_decode.empty() ? (g_device.is_cuda() ? "both" : "eager") : g_decode;
  if (decode == "eager" || decode == "both") modes.emplace_back("eager", EngineOptions::Decode::Eager);
  if (decode == "slots" || decode == "both") modes.emplace_back("slots", EngineOptions::Decode::Slots);
  if (g_profile_batch > 0) {
    EngineOptions o;
    o.decode = modes.back().second;
    Engine engine(lm, nullptr, o);
    GenerateRequest req{prompt, g_profile_batch, 1, {}};
    double t = best_time(10, [&] { engine.generate({req}, sp); });
    std::printf("batch %lld: %.0f tokens/s\n", static_cast<long long>(g_profile_batch),
                static_cast<double>(g_profile_batch * new_tokens) / t);
    return;
  }
  if (!g_kernel_profile.empty()) {
    // A fresh engine per table, built and warmed inside the profiler's session
    // (kernel_profile.h): the measured call replays what the warm-up captured.
    for (const auto& [name, mode] : modes)
      for (int64_t B : g_kernel_profile) {
        std::unique_ptr<Engine> engine;
        const GenerateRequest req{prompt, B, 1, {}};
        const std::string title = name + " decoding, batch " + std::to_string(B) + ", prompt " +
                                  std::to_string(g_prompt) + ", " + std::to_string(new_tokens) +
                                  " new tokens (a step: one token of every row; the prefill counted in)";
        grpo::bench::print_kernel_profile(
            title, g_device.is_cuda(), new_tokens,
            [&] {
              EngineOptions o;
              o.decode = mode;
              engine = std::make_unique<Engine>(lm, nullptr, o);
              engine->generate({req}, sp);
            },
            [&] { engine->generate({req}, sp); });
      }
    return;
  }
  // The first call of a fresh engine, as a one-shot `grpo-host generate` pays
  // it (and the captures of the graphs it replays), against the same call warm.
  std::vector<std::unique_ptr<Engine>> engines;
  for (const auto& [name, mode] : modes) {
    EngineOptions o;
    o.decode = mode;
    engines.push_back(std::make_unique<Engine>(lm, nullptr, o));
    GenerateRequest req{prompt, 1, 1, {}};
    const double t0 = now_s();
    engines.back()->generate({req}, sp);
    sync();
    const double first = now_s() - t0;
    const double warm = best_time(2, [&] { engines.back()->generate({req}, sp); });
    std::printf("%s: first call (batch 1): %.3f s, warm %.3f s: %.2fx (target <= 1.5x)\n", name.c_str(), first, warm,
                first / warm);
  }
  // The peers run after the first calls: right after another process has filled the caches and
  // memory, a first call measures that process as much as this one (1.6x then, 1.04x without).
  std::map<int64_t, double> peer;
  if (g_peer) peer = peer_decode(c, dtype, g_batches, g_prompt, new_tokens);
  std::map<int64_t, grpo::bench::HfDecode> hf;
  if (g_hf) hf = hf_generate_decode(c, dtype, g_device.str(), g_batches, g_prompt, new_tokens);
  for (const auto& [batch, h] : hf)
    std::printf("transformers generate, batch %lld: first call %.3f s, warm %.3f s\n", static_cast<long long>(batch),
                h.first_s, h.warm_s);
  std::vector<double> peaks;
  for (int64_t B : g_batches) peaks.push_back(matmul_gflops(c, B, dtype));
  const bool unfused = g_unfused && g_device.is_cuda();
  for (size_t m = 0; m < modes.size(); ++m) {
    Engine& engine = *engines[m];
    // The same decoding on LibTorch's ops: an engine of its own, whose graphs
    // are captured while the fused kernels are off.
    std::unique_ptr<Engine> plain;
    if (unfused) {
      EngineOptions o;
      o.decode = modes[m].second;
      plain = std::make_unique<Engine>(lm, nullptr, o);
    }
    std::printf("decode %s, prompt %lld, %lld new tokens\n", modes[m].first.c_str(), static_cast<long long>(g_prompt),
                static_cast<long long>(new_tokens));
    std::printf("%-6s %10s %12s %12s %10s %10s %8s %10s %9s %10s %9s%s\n", "batch", "tokens/s", "model GF/s",
                "matmul GF/s", "of matmul", "of mem bw", "graphs", "HF tok/s", "ours/HF", "peer tok/s", "ours/peer",
                unfused ? "   at:: tok/s  fused/at::" : "");
    for (size_t k = 0; k < g_batches.size(); ++k) {
      const int64_t B = g_batches[k];
      GenerateRequest req{prompt, B, 1, {}};
      engine.generate({req}, sp);  // warm-up: the first call pays for kernels, buffers and graphs
      double t = best_time(2, [&] { engine.generate({req}, sp); });
      const double tokens_s = static_cast<double>(B * new_tokens) / t;
      const double model_gflops = 2.0 * static_cast<double>(per_token) * tokens_s / 1e9;
      // Each decoding step reads every weight once: bandwidth bound at batch 1.
      const double bw_fraction = static_cast<double>(per_token) * bytes_per_param * (tokens_s / B) / 1e9 / gbps;
      const DecodeStats& stats = engine.decode_stats();
      std::printf("%-6lld %10.1f %12.1f %12.1f %9.0f%% %9.0f%% %8lld", static_cast<long long>(B), tokens_s,
                  model_gflops, peaks[k], 100 * model_gflops / peaks[k], 100 * bw_fraction,
                  static_cast<long long>(stats.graphs));
      if (hf.count(B)) std::printf(" %10.1f %8.2fx", hf[B].tokens_per_s, tokens_s / hf[B].tokens_per_s);
      else std::printf(" %10s %9s", "-", "-");
      if (peer.count(B)) std::printf(" %10.1f %8.2fx", peer[B], tokens_s / peer[B]);
      else std::printf(" %10s %9s", "-", "-");
      if (plain) {
        const bool fused = gpu::enabled();  // off already under GRPO_FUSED_KERNELS=0: left so
        gpu::set_enabled(false);
        plain->generate({req}, sp);
        const double t_plain = best_time(2, [&] { plain->generate({req}, sp); });
        gpu::set_enabled(fused);
        std::printf(" %12.1f %10.2fx", static_cast<double>(B * new_tokens) / t_plain, t_plain / t);
      }
      std::printf("\n");
    }
  }
  if (g_skip_passes) return;

  torch::NoGradGuard no_grad;
  // Fewer rows at a real model's size, where one row of 512 tokens is already seconds.
  const int64_t rows = c.vocab_size > 4096 ? 2 : 8;
  at::Tensor prompts = at::randint(0, c.vocab_size, {rows, 256}, on_device().dtype(at::kLong));
  double prefill = best_time(2, [&] {
    KvCache cache = lm->new_cache();
    lm->hidden_states(prompts, {}, {}, &cache);
  });
  at::Tensor seqs = at::randint(0, c.vocab_size, {rows, 512}, on_device().dtype(at::kLong));
  double logprob = best_time(2, [&] { sequence_logprobs(*lm, seqs, {}, {1.0, 256, false}); });
  std::printf("prefill %.0f tokens/s (%lld x 256); log-prob pass %.0f tokens/s (%lld x 512, no grad)\n",
              static_cast<double>(rows * 256) / prefill, static_cast<long long>(rows),
              static_cast<double>(rows * 512) / logprob, static_cast<long long>(rows));

  // A G=8 group through the engine (prefill and each row's first id): its
  // prompt prefilled once and given to its eight rows, vs eight distinct
  // prompts of the same length prefilled as one batch.
  SamplingParams first_id = sp;
  first_id.max_new_tokens = 1;
  std::vector<GenerateRequest> group = {{std::vector<int32_t>(256, 7), 8, 1, {}}}, distinct;
  for (int32_t i = 0; i < 8; ++i) distinct.push_back({std::vector<int32_t>(256, 8 + i), 1, 1, {}});
  for (size_t m = 0; m < modes.size(); ++m) {
    Engine& engine = *engines[m];
    const double shared = best_time(3, [&] { engine.generate(group, first_id); });
    const double unshared = best_time(3, [&] { engine.generate(distinct, first_id); });
    std::printf("%s: G=8 prefix sharing (prompt 256): the group costs %.2f of eight prompts (target <= 0.25)\n",
                modes[m].first.c_str(), shared / unshared);
  }
  std::printf("peak RSS %ld MB\n", peak_rss_mb());
}

}  // namespace

int main(int argc, char** argv) {
  // Line by line into a file too: a deadline's SIGTERM loses no finished line.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  std::string dtype = "both";
  int64_t new_tokens = 32;
  int threads = 0;
  for (int i = 1; i < argc; ++i) {
    bool* switch_flag = !std::strcmp(argv[i], "--peer")          ? &g_peer
                        : !std::strcmp(argv[i], "--hf")          ? &g_hf
                        : !std::strcmp(argv[i], "--unfused")     ? &g_unfused
                        : !std::strcmp(argv[i], "--skip_passes") ? &g_skip_passes
                                                                 : nullptr;
    if (switch_flag) {
      *switch_flag = true;
      continue;
    }
    if (i + 1 >= argc) break;
    if (!std::strcmp(argv[i], "--shape")) g_shape = argv[i + 1];
    if (!std::strcmp(argv[i], "--model")) g_model_dir = argv[i + 1];
    if (!std::strcmp(argv[i], "--dtype")) dtype = argv[i + 1];
    if (!std::strcmp(argv[i], "--new_tokens")) new_tokens = std::stoll(argv[i + 1]);
    if (!std::strcmp(argv[i], "--threads")) threads = std::stoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--device")) g_device = at::Device(argv[i + 1]);
    if (!std::strcmp(argv[i], "--profile_batch")) g_profile_batch = std::stoll(argv[i + 1]);
    if (!std::strcmp(argv[i], "--batches")) g_batches = parse_list(argv[i + 1]);
    if (!std::strcmp(argv[i], "--kernel_profile")) g_kernel_profile = parse_list(argv[i + 1]);
    if (!std::strcmp(argv[i], "--prompt")) g_prompt = std::stoll(argv[i + 1]);
    if (!std::strcmp(argv[i], "--decode")) g_decode = argv[i + 1];
    ++i;
  }
  if (g_device.is_cuda() && !torch::cuda::is_available()) {
    std::fprintf(stderr, "bench_engine: --device %s, but LibTorch sees no CUDA device on this machine\n",
                 g_device.str().c_str());
    return 2;
  }
  configure_cpu_threads(threads);
  if (dtype == "float32" || dtype == "both") run(at::kFloat, new_tokens);
  if (dtype == "bfloat16" || dtype == "both") run(at::kBFloat16, new_tokens);
  return 0;
}
