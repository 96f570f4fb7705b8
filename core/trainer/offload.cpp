#include "trainer/offload.h"

#include <spdlog/spdlog.h>
#include <torch/optim/adamw.h>

#include <utility>

#include "model/device_memory.h"

namespace grpo::trainer {

namespace {

int64_t bytes_of(const at::Tensor& t) { return t.defined() ? static_cast<int64_t>(t.nbytes()) : 0; }

// `t` on `device`: from pinned host memory the copy is asynchronous.
at::Tensor onto(const at::Tensor& t, const at::Device& device, HostArena* arena = nullptr) {
  if (!t.defined() || t.device() == device) return t;
  return device.is_cpu() ? host_copy(t, arena) : t.to(device, /*non_blocking=*/true);
}

// An arena about to take a whole set of copies starts over: the last set's are gone.
HostArena* rewound(HostArena* arena, const at::Device& device) {
  if (arena && device.is_cpu()) arena->rewind();
  return arena;
}

// Each AdamW moment of every parameter with state, moved by `move(moment, parameter)`.
template <class Move>
int64_t move_moments(torch::optim::Optimizer& optimizer, Move&& move) {
  int64_t moved = 0;
  auto& states = optimizer.state();
  for (auto& group : optimizer.param_groups())
    for (const at::Tensor& p : group.params()) {
      const auto it = states.find(p.unsafeGetTensorImpl());
      if (it == states.end()) continue;
      auto* adam = dynamic_cast<torch::optim::AdamWParamState*>(it->second.get());
      if (!adam) continue;
      auto moved_from = [&](const at::Tensor& m) {
        at::Tensor to = move(m, p);
        if (!to.is_same(m)) moved += bytes_of(m);
        return to;
      };
      adam->exp_avg(moved_from(adam->exp_avg()));
      adam->exp_avg_sq(moved_from(adam->exp_avg_sq()));
      if (adam->max_exp_avg_sq().defined()) adam->max_exp_avg_sq(moved_from(adam->max_exp_avg_sq()));
    }
  return moved;
}

}  // namespace

at::Tensor host_copy(const at::Tensor& t, HostArena* arena) {
  if (arena) return arena->copy_of(t);
  if (!t.is_cuda()) return t.to(at::kCPU, /*non_blocking=*/false, /*copy=*/true);  // a copy all the same
  at::Tensor host = at::empty_strided(t.sizes(), t.strides(), t.options().device(at::kCPU).pinned_memory(true));
  host.copy_(t, /*non_blocking=*/true);
  return host;
}

int64_t optimizer_state_to(torch::optim::Optimizer& optimizer, const at::Device& device, HostArena* arena) {
  arena = rewound(arena, device);
  return move_moments(optimizer, [&](const at::Tensor& m, const at::Tensor&) { return onto(m, device, arena); });
}

int64_t optimizer_state_to_devices(torch::optim::Optimizer& optimizer) {
  // Onto a CPU parameter (GPU-saved moments resumed with --use_cpu) the copy is a blocking one: the
  // CPU's AdamW reads them next, with nothing to wait for an asynchronous copy.
  return move_moments(optimizer, [](const at::Tensor& m, const at::Tensor& p) {
    return p.is_cpu() && m.defined() && !m.is_cpu() ? m.to(at::kCPU) : onto(m, p.device());
  });
}

int64_t move_module(torch::nn::Module& module, const at::Device& device, HostArena* arena) {
  torch::NoGradGuard no_grad;
  arena = rewound(arena, device);
  int64_t moved = 0;
  auto move = [&](at::Tensor t) {
    if (t.device() == device) return;
    moved += bytes_of(t);
    t.set_data(onto(t, device, arena));
  };
  for (const at::Tensor& p : module.parameters()) move(p);
  for (const at::Tensor& b : module.buffers()) move(b);
  return moved;
}

ParkedGradients::ParkedGradients(std::vector<at::Tensor> params, bool all_zero, HostArena* arena)
    : params_(std::move(params)), host_(params_.size()), had_gradient_(params_.size()), all_zero_(all_zero) {
  arena = rewound(arena, at::kCPU);
  size_t i = 0;
  try {
    for (; i < params_.size(); ++i) {
      at::Tensor& grad = params_[i].mutable_grad();
      if (!grad.defined()) continue;
      if (!all_zero_) host_[i] = host_copy(grad, arena);
      had_gradient_[i] = true;
      bytes_ += bytes_of(grad);
      grad.reset();  // freed once the copy has run: the allocator orders its reuse after it
    }
  } catch (...) {  // host memory ran out: what was parked goes back, the rest never left
    restore();
    throw;
  }
}

void ParkedGradients::restore() {
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!had_gradient_[i]) continue;
    at::Tensor& p = params_[i];
    // A copy even onto the CPU: the host tensor may be an arena's, whose memory the next park reuses.
    p.mutable_grad() =
        all_zero_ ? at::zeros_like(p) : host_[i].to(p.device(), /*non_blocking=*/true, /*copy=*/true);
    host_[i].reset();
  }
}

AwayForSampling::AwayForSampling(torch::nn::Module* reference, const at::Device& home, std::vector<at::Tensor> params,
                                 bool gradients_zero, OffloadArenas* arenas)
    : reference_(reference), home_(home) {
  if (reference_) bytes_ += move_module(*reference_, at::kCPU, arenas ? &arenas->reference : nullptr);
  try {
    gradients_.emplace(std::move(params), gradients_zero, arenas ? &arenas->gradients : nullptr);
  } catch (...) {  // no destructor runs for a constructor that throws: the reference goes back here
    restore();
    throw;
  }
  bytes_ += gradients_->bytes();
}

AwayForSampling::AwayForSampling(AwayForSampling&& other) noexcept
    : reference_(std::exchange(other.reference_, nullptr)), home_(other.home_),
      gradients_(std::move(other.gradients_)), bytes_(other.bytes_) {
  other.gradients_.reset();  // a moved-from optional still holds a (moved-from) value
}

AwayForSampling::~AwayForSampling() {
  try {
    restore();
  } catch (const std::exception& e) {  // already unwinding from the phase's own error, which says more
    spdlog::error("bringing the offloaded reference model and gradients back failed: {}", e.what());
  }
}

void AwayForSampling::restore() {
  if (torch::nn::Module* reference = std::exchange(reference_, nullptr)) move_module(*reference, home_);
  if (gradients_) {
    std::optional<ParkedGradients> parked = std::move(gradients_);
    gradients_.reset();
    parked->restore();
  }
}

}  // namespace grpo::trainer
