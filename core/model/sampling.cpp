#include "model/sampling.h"

#include <limits>
#include <tuple>

#include "model/cpu_sampling.h"
#include "model/cuda_kernels.h"

namespace grpo::model {

uint64_t sequence_seed(uint64_t seed, uint64_t index) {
  // splitmix64 of (seed, index): well-spread seeds from consecutive inputs.
  uint64_t z = seed + 0x9e3779b97f4a7c15ULL * (index + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t seed_of_copies(uint64_t seed, uint64_t first) { return seed + 0x9e3779b97f4a7c15ULL * first; }

// Each row's own draw (what makes a sequence's samples independent of the
// batch it runs in).
std::vector<float> uniform_draws(std::vector<std::mt19937_64*>& rngs) {
  std::vector<float> u;
  for (std::mt19937_64* rng : rngs) u.push_back(std::uniform_real_distribution<float>(0.0f, 1.0f)(*rng));
  return u;
}

namespace {

constexpr float kMasked = -std::numeric_limits<float>::infinity();

// Keeps the smallest set of most likely tokens whose probability reaches top_p.
void mask_top_p(at::Tensor& scaled, double top_p) {
  auto [sorted, order] = scaled.sort(-1, /*descending=*/true);
  at::Tensor cumulative = sorted.softmax(-1).cumsum(-1);
  // Drop a token when the tokens before it already reach top_p (the first always stays).
  at::Tensor drop_sorted = (cumulative - sorted.softmax(-1)) >= top_p;
  at::Tensor drop = at::zeros_like(drop_sorted).scatter_(-1, order, drop_sorted);
  scaled.masked_fill_(drop, kMasked);
}

// Logits and settings a fused sampler takes: no filter but temperature and
// top-k, the usual RL rollout settings; the others keep the tensor ops below.
bool fusable(const at::Tensor& logits, const at::Tensor& seen, const SamplingParams& p) {
  const at::ScalarType t = logits.scalar_type();
  return (t == at::kFloat || t == at::kBFloat16 || t == at::kHalf) &&
         (p.repetition_penalty == 1.0 || !seen.defined()) && p.top_p >= 1.0 && p.min_p <= 0.0 && p.top_logprobs <= 0;
}

// On the CPU, the fused kernel with top-k.
bool fused_applies(const at::Tensor& logits, const at::Tensor& seen, const SamplingParams& p) {
  return logits.device().is_cpu() && fusable(logits, seen, p);
}

// On a GPU, the fused kernel without a top-k below the vocabulary (its
// threshold would need a selection the kernel does not make).
bool gpu_fused_applies(const at::Tensor& logits, const at::Tensor& seen, const SamplingParams& p) {
  return logits.is_cuda() && gpu::enabled() && logits.dim() == 2 && fusable(logits, seen, p) &&
         (p.top_k <= 0 || p.top_k >= logits.size(-1));
}

}  // namespace

Sampled sample_next(const at::Tensor& logits, const at::Tensor& seen, const SamplingParams& params,
                    std::vector<std::mt19937_64*>& rngs) {
  const std::vector<float> draws = uniform_draws(rngs);
  return sample_with_draws(logits, seen, params, at::tensor(draws, at::kFloat).to(logits.device()));
}

Sampled sample_with_draws(const at::Tensor& logits_in, const at::Tensor& seen, const SamplingParams& params,
                          const at::Tensor& draws) {
  if (fused_applies(logits_in, seen, params)) {
    const int64_t B = logits_in.size(0);
    const at::Tensor u = draws.contiguous();
    Sampled out;
    out.tokens = at::empty({B}, at::kLong);
    out.logprobs = at::empty({B}, at::kFloat);
    cpu::sample_rows(logits_in, params.temperature, params.top_k,
                     std::vector<float>(u.data_ptr<float>(), u.data_ptr<float>() + B), out.tokens.data_ptr<int64_t>(),
                     out.logprobs.data_ptr<float>());
    return out;
  }
  if (gpu_fused_applies(logits_in, seen, params)) {
    Sampled out;
    std::tie(out.tokens, out.logprobs) =
        gpu::sample_rows(logits_in, params.temperature, draws.to(logits_in.device(), at::kFloat).contiguous());
    return out;
  }
  at::Tensor logits = logits_in.to(at::kFloat);  // [B, V]
  if (params.repetition_penalty != 1.0 && seen.defined()) {
    at::Tensor penalised =
        at::where(logits > 0, logits / params.repetition_penalty, logits * params.repetition_penalty);
    logits = at::where(seen, penalised, logits);
  }
  at::Tensor scaled = logits / params.temperature;
  Sampled out;
  at::Tensor logp = scaled.log_softmax(-1);

  if (params.top_k > 0 && params.top_k < scaled.size(-1)) {
    at::Tensor kth = std::get<0>(scaled.topk(params.top_k, -1)).narrow(-1, params.top_k - 1, 1);  // [B, 1]
    scaled = scaled.masked_fill(scaled < kth, kMasked);
  }
  if (params.top_p < 1.0) mask_top_p(scaled, params.top_p);
  if (params.min_p > 0.0) {
    at::Tensor probs = scaled.softmax(-1);
    at::Tensor floor = std::get<0>(probs.max(-1, /*keepdim=*/true)) * params.min_p;
    scaled = scaled.masked_fill(probs < floor, kMasked);
  }

  // Inverse-CDF sampling with each row's own uniform draw: reproducible per
  // sequence whatever the batch it runs in, on any device. The token is the
  // first whose cumulative probability exceeds draw * total.
  at::Tensor cdf = scaled.softmax(-1).cumsum(-1);  // [B, V]
  const int64_t V = cdf.size(1);
  at::Tensor target = (draws.to(cdf.device(), at::kFloat) * cdf.select(1, V - 1)).unsqueeze(1);  // [B, 1]
  out.tokens = at::searchsorted(cdf, target, /*out_int32=*/false, /*right=*/true).squeeze(1).clamp_max(V - 1);
  out.logprobs = logp.gather(1, out.tokens.unsqueeze(1)).squeeze(1);
  if (params.top_logprobs > 0) {
    auto [values, ids] = logp.topk(std::min(params.top_logprobs, V), -1);
    out.top_logprobs = values;
    out.top_ids = ids;
  }
  return out;
}

}  // namespace grpo::model
