#include "model/rope.h"

#include <cmath>

#include "model/cpu_kernels.h"
#include "model/cuda_kernels.h"

namespace grpo::model {

at::Tensor rope_inv_freq(const ModelConfig& config) {
  const int64_t dim = config.head_dim;
  at::Tensor exponents = at::arange(0, dim, 2, at::kDouble) / static_cast<double>(dim);
  at::Tensor inv_freq = at::pow(config.rope_theta, exponents).reciprocal();  // [D/2]
  if (config.rope_scaling && config.rope_scaling->type == "llama3") {
    // Llama 3: long wavelengths slowed by `factor`, short ones kept, a smooth ramp between.
    const RopeScaling& s = *config.rope_scaling;
    const double old_len = static_cast<double>(s.original_max_position_embeddings);
    const double low_wavelen = old_len / s.low_freq_factor, high_wavelen = old_len / s.high_freq_factor;
    at::Tensor wavelen = 2 * M_PI / inv_freq;
    at::Tensor scaled = at::where(wavelen > low_wavelen, inv_freq / s.factor, inv_freq);
    at::Tensor smooth = (old_len / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
    at::Tensor smoothed = (1 - smooth) * scaled / s.factor + smooth * scaled;
    at::Tensor medium = (wavelen >= high_wavelen).logical_and(wavelen <= low_wavelen);
    inv_freq = at::where(medium, smoothed, scaled);
  }
  return inv_freq.to(at::kFloat);
}

std::pair<at::Tensor, at::Tensor> rope_cos_sin(const at::Tensor& inv_freq, const at::Tensor& position_ids,
                                               at::ScalarType dtype) {
  at::Tensor freqs = position_ids.to(at::kFloat).unsqueeze(-1) * inv_freq.to(position_ids.device());  // [B, T, D/2]
  at::Tensor emb = at::cat({freqs, freqs}, -1);                                                       // [B, T, D]
  return {emb.cos().to(dtype), emb.sin().to(dtype)};
}

at::Tensor apply_rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  if (x.stride(-1) == 1 && cpu::applies({x, cos, sin})) return cpu::rope(x, cos, sin);
  const bool fits = x.dim() == 4 && x.size(3) % 2 == 0 && cos.dim() == 3 && cos.sizes() == sin.sizes() &&
                    (cos.size(0) == x.size(0) || cos.size(0) == 1) && cos.size(1) == x.size(2) &&
                    cos.size(2) == x.size(3);
  if (fits && gpu::applies({x, cos, sin})) return gpu::rope(x, cos, sin);
  const int64_t half = x.size(-1) / 2;
  at::Tensor rotated = at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
  return x * cos.unsqueeze(1) + rotated * sin.unsqueeze(1);
}

}  // namespace grpo::model
