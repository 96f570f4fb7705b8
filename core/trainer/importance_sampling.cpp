#include "trainer/importance_sampling.h"

#include <ATen/core/grad_mode.h>
#include <stdexcept>

namespace grpo::trainer {

IsCorrectionMode is_correction_mode(const std::string& name) {
  for (const auto& [spelled, mode] : is_correction_mode_names())
    if (spelled == name) return mode;
  throw std::invalid_argument("unknown importance sampling mode '" + name +
                              "': token_truncate, token_mask, sequence_truncate or sequence_mask");
}

at::Tensor importance_weights(const at::Tensor& old, const at::Tensor& sampler, const at::Tensor& mask,
                              IsCorrectionMode mode, double cap, std::map<std::string, double>& metrics) {
  at::NoGradGuard no_grad;
  at::Tensor m = mask.to(at::kFloat);
  at::Tensor active = m > 0;
  at::Tensor diff = at::where(active, old.to(at::kFloat) - sampler.to(at::kFloat), at::zeros({}, m.options()));
  const bool per_sequence = mode == IsCorrectionMode::SequenceTruncate || mode == IsCorrectionMode::SequenceMask;
  at::Tensor rho = per_sequence ? diff.sum(1, /*keepdim=*/true).exp() : diff.exp();  // [B, 1] or [B, T]
  if (mode == IsCorrectionMode::TokenTruncate || mode == IsCorrectionMode::SequenceTruncate)
    rho = rho.clamp_max(cap);
  else
    rho = rho.masked_fill(rho > cap, 0.0);
  const double tokens = m.sum().item<double>();
  if (tokens > 0) {
    at::Tensor abs_diff = diff.abs();
    metrics["sampling/sampling_logp_difference/mean"] = (abs_diff.sum() / tokens).item<double>();
    metrics["sampling/sampling_logp_difference/max"] = abs_diff.max().item<double>();
    at::Tensor per_token = rho.expand_as(m).masked_select(active);
    metrics["sampling/importance_sampling_ratio/min"] = per_token.min().item<double>();
    metrics["sampling/importance_sampling_ratio/mean"] = per_token.mean().item<double>();
    metrics["sampling/importance_sampling_ratio/max"] = per_token.max().item<double>();
  }
  return rho;
}

}  // namespace grpo::trainer
