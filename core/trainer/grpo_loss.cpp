#include "trainer/grpo_loss.h"

#include <ATen/core/grad_mode.h>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>

namespace grpo::trainer {
namespace {

std::string shape_str(const at::Tensor& t) {
  std::ostringstream os;
  os << t.sizes();
  return os.str();
}

void require(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument("grpo_loss: " + what);
}

void check_inputs(const LossInputs& in, const LossOptions& opt) {
  require(in.logp.defined() && in.logp.dim() == 2, "logp must be a [B, T] tensor");
  const auto same = [&](const at::Tensor& t, const char* name) {
    require(t.sizes() == in.logp.sizes(),
            std::string(name) + " has shape " + shape_str(t) + " but logp has " + shape_str(in.logp));
  };
  require(in.mask.defined(), "mask is required");
  same(in.mask, "mask");
  if (in.old_logp.defined()) same(in.old_logp, "old_logp");
  if (opt.beta != 0.0) {
    require(in.ref_logp.defined(), "beta = " + std::to_string(opt.beta) +
                                       " needs ref_logp (reference log-probs); pass them or set beta 0");
    same(in.ref_logp, "ref_logp");
  }
  const int64_t b = in.logp.size(0);
  const at::Tensor& a = in.advantages;
  require(a.defined(), "advantages are required");
  const bool per_seq = (a.dim() == 1 && a.size(0) == b) || (a.dim() == 2 && a.size(0) == b && a.size(1) == 1);
  const bool per_token = a.dim() == 2 && a.sizes() == in.logp.sizes();
  require(per_seq || per_token, "advantages have shape " + shape_str(a) + "; expected [" + std::to_string(b) +
                                    "], [" + std::to_string(b) + ", 1] or logp's " + shape_str(in.logp));
  if (in.is_weight.defined()) {
    const at::Tensor& w = in.is_weight;
    require(w.dim() == 2 && w.size(0) == b && (w.size(1) == 1 || w.size(1) == in.logp.size(1)),
            "is_weight has shape " + shape_str(w) + "; expected [" + std::to_string(b) + ", 1] or logp's " +
                shape_str(in.logp));
  }
  require(opt.epsilon_low >= 0.0 && opt.epsilon_high >= 0.0, "epsilon and epsilon_high must be >= 0");
  require(!opt.delta || *opt.delta > 0.0, "delta must be > 0");
  require(opt.gradient_accumulation_steps >= 1, "gradient_accumulation_steps must be >= 1");
  require(opt.loss_type != LossType::DrGrpo || opt.max_completion_length >= 1,
          "dr_grpo needs max_completion_length >= 1");
}

// Mean of a 0/1 indicator the way TRL's `masked_batch_mean` takes it: a
// per-sequence indicator [B, 1] is averaged over sequences, a per-token one
// [B, T] over the active tokens.
at::Tensor indicator_mean(const at::Tensor& x, const at::Tensor& m) {
  if (x.size(1) == 1) return x.mean();
  return (x * m).sum() / m.sum();
}

// Fraction of each sequence's active tokens where the indicator holds, [B];
// `empty` on rows without an active token (so that min and max pass over
// them without a host read of how many rows there are).
at::Tensor per_sequence_fraction(const at::Tensor& x, const at::Tensor& m, double empty) {
  at::Tensor tokens = m.sum(1);                               // [B]
  at::Tensor frac = (x.expand_as(m) * m).sum(1) / tokens;     // [B], NaN on empty rows
  return at::where(tokens > 0, frac, at::full({}, empty, frac.options()));
}

}  // namespace

LossOutput grpo_loss(const LossInputs& in, const LossOptions& opt) {
  check_inputs(in, opt);
  const int64_t b = in.logp.size(0);

  // Ratios of nearly equal probabilities cancel digits: never in 16 bits.
  at::ScalarType dtype = in.logp.scalar_type();
  if (dtype == at::kHalf || dtype == at::kBFloat16) dtype = at::kFloat;
  at::Tensor logp = in.logp.to(dtype);                                      // [B, T]
  at::Tensor m = in.mask.to(logp.device(), dtype);                          // [B, T]
  at::Tensor active = in.mask.to(logp.device()) != 0;                       // [B, T] bool
  at::Tensor zero = at::zeros({}, logp.options());
  at::Tensor old = in.old_logp.defined() ? in.old_logp.to(dtype).detach() : logp.detach();  // [B, T]
  at::Tensor adv = in.advantages.to(logp.device(), dtype);
  if (adv.dim() == 1) adv = adv.unsqueeze(1);                               // [B, 1] or [B, T]

  // Masked positions get a log-ratio of 0 through `where`, not `* m`: a
  // padding position with -inf log-probs then contributes neither NaN to the
  // forward pass nor 0 * inf to the backward pass.
  at::Tensor log_ratio = at::where(active, logp - old, zero);               // [B, T]
  at::Tensor log_s = log_ratio;
  if (opt.level == IsLevel::Sequence) {
    log_s = (log_ratio * m).sum(1, /*keepdim=*/true) / m.sum(1, /*keepdim=*/true).clamp_min(1.0);  // [B, 1]
  }
  at::Tensor ratio = log_s.exp();                                           // [B, T] or [B, 1]
  at::Tensor clipped = ratio.clamp(1.0 - opt.epsilon_low, 1.0 + opt.epsilon_high);
  // delta caps the unclipped ratio only, after `clipped` is taken from the
  // uncapped one (INTELLECT-2's two-sided clipping, as TRL orders it).
  at::Tensor capped = opt.delta ? ratio.clamp_max(*opt.delta) : ratio;
  at::Tensor loss_tok = -at::minimum(capped * adv, clipped * adv).expand_as(logp);  // [B, T]
  if (in.is_weight.defined()) loss_tok = loss_tok * in.is_weight.to(logp.device(), dtype).detach();  // not the KL

  at::Tensor kl;
  if (opt.beta != 0.0) {
    at::Tensor ref = in.ref_logp.to(dtype).detach();
    at::Tensor d = at::where(active, ref - logp, zero);                     // [B, T]
    kl = d.exp() - d - 1.0;                                                  // k3 estimator, >= 0
    if (opt.use_bias_correction_kl) kl = kl * ratio;
    loss_tok = loss_tok + opt.beta * kl;
  }
  at::Tensor per_token = at::where(active, loss_tok, zero) * m;             // [B, T]

  at::Tensor loss;
  const double ga = static_cast<double>(opt.gradient_accumulation_steps);
  if (b == 0) {
    loss = per_token.sum();  // an empty micro-batch: 0, still attached to logp
  } else {
    switch (opt.loss_type) {
      case LossType::Grpo:
        loss = (per_token.sum(1) / m.sum(1).clamp_min(1.0)).mean() / ga;
        break;
      case LossType::Bnpo:
        loss = per_token.sum() / m.sum().clamp_min(1.0) / ga;
        break;
      case LossType::DrGrpo:
        loss = per_token.sum() / (static_cast<double>(b) * static_cast<double>(opt.max_completion_length)) / ga;
        break;
      case LossType::Dapo: {
        // The caller's count makes the loss a token mean over the whole
        // generation batch once DDP averages the ranks' gradients.
        at::Tensor normaliser = opt.dapo_active_tokens > 0.0 ? at::full({}, opt.dapo_active_tokens, logp.options())
                                                              : m.sum().clamp_min(1.0);
        loss = per_token.sum() / normaliser;
        break;
      }
    }
  }

  LossOutput out;
  out.loss = loss;
  out.per_token_loss = per_token.detach();
  out.ratio = capped.detach();
  if (kl.defined()) out.per_token_kl = at::where(active, kl, zero).detach();

  // Metrics in float64 from detached values, left on the device (read once
  // per step: device_metrics.h); NaN when no token is active.
  at::NoGradGuard no_grad;
  at::Tensor md = m.to(at::kDouble);
  const at::Tensor any = md.sum() > 0;
  const at::Tensor nan = at::full({}, std::numeric_limits<double>::quiet_NaN(), md.options());
  auto metric = [&](const char* name, const at::Tensor& v) { out.metrics[name] = at::where(any, v, nan); };
  if (kl.defined()) metric("kl", (kl.detach().to(at::kDouble) * md).sum() / md.sum());
  // TRL counts clipping on the ratio after the delta cap (its coef_1).
  at::Tensor r = out.ratio;
  at::Tensor a = adv.detach();
  at::Tensor low = ((r < 1.0 - opt.epsilon_low) & (a < 0)).to(at::kDouble);    // [B, T] or [B, 1]
  at::Tensor high = ((r > 1.0 + opt.epsilon_high) & (a > 0)).to(at::kDouble);  // [B, T] or [B, 1]
  at::Tensor region = at::maximum(low, high);
  metric("clip_ratio/low_mean", indicator_mean(low, md));
  metric("clip_ratio/high_mean", indicator_mean(high, md));
  metric("clip_ratio/region_mean", indicator_mean(region, md));
  // TRL takes min / max over the values it gathers; the reference values
  // take them over the sequences, each with its own clipped fraction.
  const double inf = std::numeric_limits<double>::infinity();
  metric("clip_ratio/low_min", per_sequence_fraction(low, md, inf).min());
  metric("clip_ratio/high_max", per_sequence_fraction(high, md, -inf).max());
  return out;
}

}  // namespace grpo::trainer
