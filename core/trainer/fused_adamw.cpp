#include "trainer/fused_adamw.h"

#include <ATen/core/grad_mode.h>
#include <ATen/Parallel.h>

#include <cmath>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ops/_fused_adamw.h>

#include "model/cpu_float_math.h"

namespace grpo::trainer {

namespace {

using model::cpu::detail::bf16_bits;
using model::cpu::detail::bits_to_float;
using torch::optim::OptimizerParamState;

// Element types by their bits, so that the loop below vectorises.
inline float widen(float x) { return x; }
inline float widen(uint16_t bf16) { return bits_to_float(static_cast<uint32_t>(bf16) << 16); }
inline void narrow(float f, float& out) { out = f; }
inline void narrow(float f, uint16_t& out) { out = bf16_bits(f); }

struct Coefficients {
  float decay;  // 1 - lr * weight_decay
  float beta1, one_minus_beta1, beta2, one_minus_beta2;  // each rounded from double, as LibTorch's scalars are
  float sqrt_bias_correction2;
  float eps;
  float step_size;  // lr / bias_correction1
};

// The order of operations is LibTorch's: p *= decay; m = m * b1 + (1 - b1) g;
// v = v * b2 + (1 - b2) g g; p += (-step_size m) / (sqrt(v) / sqrt(bc2) + eps).
template <class T>
GRPO_VECTOR_CLONES void adamw_span(T* p, const T* g, T* m, T* v, int64_t n, Coefficients c) {
  for (int64_t i = 0; i < n; ++i) {
    const float gi = widen(g[i]);
    const float mi = std::fma(gi, c.one_minus_beta1, widen(m[i]) * c.beta1);  // add_'s alpha is fused
    const float vi = std::fma(c.one_minus_beta2 * gi, gi, widen(v[i]) * c.beta2);
    const float denom = std::sqrt(vi) / c.sqrt_bias_correction2 + c.eps;
    const float pi = widen(p[i]) * c.decay;
    narrow(pi + ((-c.step_size) * mi) / denom, p[i]);
    narrow(mi, m[i]);
    narrow(vi, v[i]);
  }
}

template <class T>
void fused_update(at::Tensor& p, const at::Tensor& g, at::Tensor& m, at::Tensor& v, const Coefficients& c) {
  T* pp = reinterpret_cast<T*>(p.data_ptr());
  const T* gp = reinterpret_cast<const T*>(g.data_ptr());
  T* mp = reinterpret_cast<T*>(m.data_ptr());
  T* vp = reinterpret_cast<T*>(v.data_ptr());
  at::parallel_for(0, p.numel(), 1 << 15, [&](int64_t begin, int64_t end) {
    adamw_span(pp + begin, gp + begin, mp + begin, vp + begin, end - begin, c);
  });
}

// Whether p's gradient and moments (when they exist yet) are dense and laid
// out as p is: its dtype, device and shape, contiguous.
bool laid_out_as_it(const at::Tensor& p, const OptimizerParamState* state) {
  std::vector<const at::Tensor*> others = {&p.grad()};
  if (state) {
    const auto& s = static_cast<const torch::optim::AdamWParamState&>(*state);
    others.push_back(&s.exp_avg());
    others.push_back(&s.exp_avg_sq());
  }
  for (const at::Tensor* t : others)
    if (t->is_sparse() || t->scalar_type() != p.scalar_type() || t->device() != p.device() ||
        t->sizes() != p.sizes() || !t->is_contiguous())
      return false;
  return true;
}

// Whether the loop takes p: a contiguous float32 or bfloat16 CPU tensor.
bool fusable(const at::Tensor& p, const OptimizerParamState* state, bool amsgrad) {
  const auto dtype = p.scalar_type();
  return !amsgrad && p.device().is_cpu() && p.is_contiguous() && (dtype == at::kFloat || dtype == at::kBFloat16) &&
         laid_out_as_it(p, state);
}

// Whether LibTorch's fused kernel (torch.optim.AdamW(fused=True)'s) takes p:
// a dense, contiguous floating-point tensor. It runs on CUDA and, since
// LibTorch 2.4, on the CPU.
bool kernel_fusable(const at::Tensor& p, const OptimizerParamState* state, bool amsgrad) {
  return !amsgrad && !p.is_sparse() && at::isFloatingType(p.scalar_type()) && p.is_contiguous() &&
         laid_out_as_it(p, state);
}

// On a GPU: the kernel. On the CPU, what the loop does not take stays
// LibTorch's unfused step, whose rounding the tests pin down bitwise.
bool gpu_fusable(const at::Tensor& p, const OptimizerParamState* state, bool amsgrad) {
  return !p.device().is_cpu() && kernel_fusable(p, state, amsgrad);
}

}  // namespace

torch::optim::OptimizerParamState* FusedAdamW::state_of(const at::Tensor& p) {
  // Keyed as torch::optim::AdamW keys it: its save() and load() find the state.
  auto& slot = state_[optimizer_state_key(p)];
  if (!slot) {
    auto fresh = std::make_unique<torch::optim::AdamWParamState>();
    fresh->exp_avg(at::zeros_like(p, at::MemoryFormat::Preserve));
    fresh->exp_avg_sq(at::zeros_like(p, at::MemoryFormat::Preserve));
    slot = std::move(fresh);
  }
  return slot.get();
}

void FusedAdamW::allocate_state() {
  at::NoGradGuard no_grad;
  for (auto& group : param_groups_) {
    if (static_cast<const torch::optim::AdamWOptions&>(group.options()).amsgrad()) continue;  // LibTorch's step makes its state
    for (auto& p : group.params()) state_of(p);
  }
}

bool FusedAdamW::all_of(bool (*takes)(const at::Tensor&, const OptimizerParamState*, bool)) {
  for (auto& group : param_groups_) {
    const bool amsgrad = static_cast<const torch::optim::AdamWOptions&>(group.options()).amsgrad();
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      const auto it = state_.find(optimizer_state_key(p));
      if (!takes(p, it == state_.end() ? nullptr : it->second.get(), amsgrad)) return false;
    }
  }
  return true;
}

at::Tensor FusedAdamW::step(LossClosure closure) {
  if (!all_of(fusable)) {
    // On a GPU, LibTorch's fused kernel: one launch per group and device,
    // where its unfused step would launch nine kernels per parameter.
    // Anything else (amsgrad, sparse gradients): LibTorch's own step.
    if (!all_of(gpu_fusable)) return torch::optim::AdamW::step(std::move(closure));
    at::Tensor loss;
    if (closure) {
      at::AutoGradMode enable_grad(true);
      loss = closure();
    }
    kernel_step();
    return loss;
  }
  at::NoGradGuard no_grad;
  at::Tensor loss;
  if (closure) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  for (auto& group : param_groups_) {
    const auto& o = static_cast<const torch::optim::AdamWOptions&>(group.options());
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      auto& s = static_cast<torch::optim::AdamWParamState&>(*state_of(p));
      s.step(s.step() + 1);
      const auto [beta1, beta2] = o.betas();
      const double bias_correction1 = 1 - std::pow(beta1, s.step());
      const double bias_correction2 = 1 - std::pow(beta2, s.step());
      const Coefficients c{static_cast<float>(1 - o.lr() * o.weight_decay()),
                           static_cast<float>(beta1),
                           static_cast<float>(1 - beta1),
                           static_cast<float>(beta2),
                           static_cast<float>(1 - beta2),
                           static_cast<float>(std::sqrt(bias_correction2)),
                           static_cast<float>(o.eps()),
                           static_cast<float>(o.lr() / bias_correction1)};
      if (p.scalar_type() == at::kFloat) fused_update<float>(p, p.grad(), s.exp_avg(), s.exp_avg_sq(), c);
      else fused_update<uint16_t>(p, p.grad(), s.exp_avg(), s.exp_avg_sq(), c);
    }
  }
  return loss;
}

void FusedAdamW::kernel_step() {
  at::NoGradGuard no_grad;
  for (auto& group : param_groups_) {
    const auto& o = static_cast<const torch::optim::AdamWOptions&>(group.options());
    // The kernel takes one device and dtype per call.
    std::map<std::pair<std::string, at::ScalarType>, std::vector<at::Tensor>> by_kind;
    for (auto& p : group.params())
      if (p.grad().defined()) by_kind[{p.device().str(), p.scalar_type()}].push_back(p);
    for (auto& [kind, params] : by_kind) {
      std::vector<at::Tensor> grads, exp_avgs, exp_avg_sqs;
      std::vector<float> steps;
      for (at::Tensor& p : params) {
        auto& s = static_cast<torch::optim::AdamWParamState&>(*state_of(p));
        s.step(s.step() + 1);  // counted on the host, as torch::optim keeps it (checkpoints read it there)
        grads.push_back(p.grad());
        exp_avgs.push_back(s.exp_avg());
        exp_avg_sqs.push_back(s.exp_avg_sq());
        steps.push_back(static_cast<float>(s.step()));
      }
      // The kernel reads each parameter's step from a tensor on its device:
      // all of them in one transfer.
      const at::Tensor step_values = at::tensor(steps, at::kFloat).to(params.front().device());
      const std::vector<at::Tensor> state_steps = step_values.unbind(0);
      const auto [beta1, beta2] = o.betas();
      at::_fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, /*max_exp_avg_sqs=*/{}, state_steps, o.lr(), beta1, beta2,
                        o.weight_decay(), o.eps(), /*amsgrad=*/false, /*maximize=*/false);
    }
  }
}

}  // namespace grpo::trainer
