#include "trainer/importance_sampling.h"

#include <ATen/core/grad_mode.h>
#include <limits>
#include <stdexcept>

namespace grpo::trainer {

IsCorrectionMode is_correction_mode(const std::string& name) {
  for (const auto& [spelled, mode] : is_correction_mode_names())
    if (spelled == name) return mode;
  throw std::invalid_argument("unknown importance sampling mode '" + name +
                              "': token_truncate, token_mask, sequence_truncate or sequence_mask");
}

at::Tensor importance_weights(const at::Tensor& old, const at::Tensor& sampler, const at::Tensor& mask,
                              IsCorrectionMode mode, double cap, MetricTensors& metrics) {
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
  // Left on the device (device_metrics.h); NaN when no token is active.
  at::Tensor abs_diff = diff.abs().to(at::kDouble);
  at::Tensor per_token = rho.expand_as(m).to(at::kDouble);
  const at::Tensor tokens = m.sum().to(at::kDouble), any = tokens > 0;
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  auto over_active = [&](const at::Tensor& x, double fill) {
    return at::where(active, x, at::full({}, fill, x.options()));
  };
  auto metric = [&](const char* name, const at::Tensor& v) {
    metrics[name] = at::where(any, v, at::full({}, nan, v.options()));
  };
  metric("sampling/sampling_logp_difference/mean", abs_diff.sum() / tokens);
  metric("sampling/sampling_logp_difference/max", over_active(abs_diff, -inf).max());
  metric("sampling/importance_sampling_ratio/min", over_active(per_token, inf).min());
  metric("sampling/importance_sampling_ratio/mean", over_active(per_token, 0.0).sum() / tokens);
  metric("sampling/importance_sampling_ratio/max", over_active(per_token, -inf).max());
  return rho;
}

}  // namespace grpo::trainer
