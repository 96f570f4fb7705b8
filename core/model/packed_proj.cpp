#include "model/packed_proj.h"

#include <torch/autograd.h>

#include <atomic>

#include "model/cpu_small_matmul.h"
#include "model/cuda_kernels.h"
#include "model/fused_scope.h"

namespace grpo::model {

namespace {

std::atomic<int64_t> g_count{0};

int64_t rows_of(const ProjGroup& projs) {
  int64_t rows = 0;
  for (const ProjImpl* p : projs) rows += p->out_features();
  return rows;
}

// t lies `offset` elements after the start of `first`, in its dtype and on its device.
bool lies_after(const at::Tensor& t, const at::Tensor& first, int64_t offset) {
  return t.is_contiguous() && t.scalar_type() == first.scalar_type() && t.device() == first.device() &&
         static_cast<const char*>(t.const_data_ptr()) ==
             static_cast<const char*>(first.const_data_ptr()) + offset * first.element_size();
}

// The packed memory from first's start: [rows, in] (in 0: a vector of rows).
// Made over the memory rather than a storage: the group's parameters may be
// tensors of their own lying side by side (a sampler aliasing a packed
// model's tensors). It holds no reference; the parameters keep it alive.
at::Tensor over(const at::Tensor& first, int64_t rows, int64_t in) {
  const std::vector<int64_t> sizes = in > 0 ? std::vector<int64_t>{rows, in} : std::vector<int64_t>{rows};
  return at::for_blob(first.data_ptr(), sizes).options(first.options()).target_device(first.device()).make_tensor();
}

// Whether a pass through any of them would want a gradient.
bool wants_gradient(const ProjGroup& projs, const at::Tensor& x) {
  if (!at::GradMode::is_enabled()) return false;
  if (x.requires_grad()) return true;
  for (const ProjImpl* p : projs)
    for (const at::Tensor* t : {&p->weight, &p->bias, &p->lora_A, &p->lora_B})
      if (t->defined() && t->requires_grad()) return true;
  return false;
}

}  // namespace

bool packed(const ProjGroup& projs) {
  const ProjImpl& first = *projs.front();
  const int64_t in = first.in_features();
  int64_t rows = 0;
  for (const ProjImpl* p : projs) {
    if (p->bias.defined() != first.bias.defined() || p->weight.dim() != 2 || p->in_features() != in) return false;
    if (!lies_after(p->weight, first.weight, rows * in)) return false;
    if (p->bias.defined() && !lies_after(p->bias, first.bias, rows)) return false;
    rows += p->out_features();
  }
  return true;
}

void pack(const ProjGroup& projs, const at::TensorOptions& options, bool keep_values) {
  const ProjImpl& first = *projs.front();
  if (packed(projs) && first.weight.device() == options.device() &&
      first.weight.scalar_type() == options.dtype().toScalarType())
    return;
  for (const ProjImpl* p : projs)
    TORCH_CHECK(p->in_features() == first.in_features() && p->bias.defined() == first.bias.defined(),
                "pack: projections of ", first.in_features(), " inputs", first.bias.defined() ? " with" : " without",
                " a bias and of ", p->in_features(), p->bias.defined() ? " with" : " without", " one do not pack");
  torch::NoGradGuard no_grad;
  const int64_t rows = rows_of(projs);
  const at::Tensor weights = at::empty({rows, first.in_features()}, options);
  const at::Tensor biases = first.bias.defined() ? at::empty({rows}, options) : at::Tensor();
  int64_t offset = 0;
  for (ProjImpl* p : projs) {
    const int64_t out = p->out_features();
    // set_data keeps the parameter's tensor object (what modules, optimizers
    // and gradient hooks hold) and its version counter; only its memory moves.
    const at::Tensor w = weights.narrow(0, offset, out);
    if (keep_values) w.copy_(p->weight);
    p->weight.set_data(w);
    if (biases.defined()) {
      const at::Tensor b = biases.narrow(0, offset, out);
      if (keep_values) b.copy_(p->bias);
      p->bias.set_data(b);
    }
    offset += out;
  }
}

at::Tensor packed_forward(const ProjGroup& projs, const at::Tensor& x) {
  if (!FusedScope::open() || (x.is_cuda() && !gpu::enabled()) || wants_gradient(projs, x) || !packed(projs))
    return {};
  const ProjImpl& first = *projs.front();
  const int64_t rows = rows_of(projs);
  const at::Tensor weight = over(first.weight, rows, first.in_features());
  const at::Tensor bias = first.bias.defined() ? over(first.bias, rows, 0) : at::Tensor();
  at::Tensor y = cpu::small_linear(x, weight, bias);
  if (!y.defined()) y = at::linear(x, weight, bias);
  int64_t offset = 0;
  for (ProjImpl* p : projs) {
    if (const at::Tensor term = p->adapter_term(x); term.defined())
      y.narrow(-1, offset, p->out_features()).add_(term.to(y.scalar_type()));
    offset += p->out_features();
  }
  g_count.fetch_add(1, std::memory_order_relaxed);
  return y;
}

int64_t packed_forward_count() { return g_count.load(std::memory_order_relaxed); }

}  // namespace grpo::model
