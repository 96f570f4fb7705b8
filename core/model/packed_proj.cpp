#include "model/packed_proj.h"

#include <torch/autograd.h>

#include "model/cpu_small_matmul.h"
#include "model/cuda_kernels.h"
#include "model/fused_scope.h"

namespace grpo::model {

namespace {

int64_t rows_of(std::initializer_list<ProjImpl*> projs) {
  int64_t rows = 0;
  for (const ProjImpl* p : projs) rows += p->out_features();
  return rows;
}

// t is the `rows`-th row onward of first's storage (a matrix of `width` columns, or a vector for width 1).
bool next_in(const at::Tensor& t, const at::Tensor& first, int64_t rows, int64_t width) {
  return t.is_contiguous() && t.is_alias_of(first) && t.scalar_type() == first.scalar_type() &&
         t.device() == first.device() && t.storage_offset() == first.storage_offset() + rows * width;
}

// Whether a pass through any of them would want a gradient.
bool wants_gradient(std::initializer_list<ProjImpl*> projs, const at::Tensor& x) {
  if (!at::GradMode::is_enabled()) return false;
  if (x.requires_grad()) return true;
  for (const ProjImpl* p : projs)
    for (const at::Tensor* t : {&p->weight, &p->bias, &p->lora_A, &p->lora_B})
      if (t->defined() && t->requires_grad()) return true;
  return false;
}

}  // namespace

bool packed(std::initializer_list<ProjImpl*> projs) {
  const ProjImpl& first = **projs.begin();
  const int64_t in = first.in_features();
  int64_t rows = 0;
  for (const ProjImpl* p : projs) {
    if (p->bias.defined() != first.bias.defined() || p->weight.dim() != 2 || p->in_features() != in) return false;
    if (!next_in(p->weight, first.weight, rows, in)) return false;
    if (p->bias.defined() && !next_in(p->bias, first.bias, rows, 1)) return false;
    rows += p->out_features();
  }
  return true;
}

void pack(std::initializer_list<ProjImpl*> projs, bool keep_values) {
  if (packed(projs)) return;
  const ProjImpl& first = **projs.begin();
  for (const ProjImpl* p : projs)
    TORCH_CHECK(p->in_features() == first.in_features() && p->bias.defined() == first.bias.defined() &&
                    p->weight.scalar_type() == first.weight.scalar_type() && p->weight.device() == first.weight.device(),
                "pack: projections of ", first.in_features(), " inputs (", first.weight.scalar_type(), ", ",
                first.weight.device(), ") and ", p->in_features(), " (", p->weight.scalar_type(), ", ",
                p->weight.device(), ") do not share an input");
  torch::NoGradGuard no_grad;
  const int64_t rows = rows_of(projs);
  const at::Tensor weights = at::empty({rows, first.in_features()}, first.weight.options());
  const at::Tensor biases = first.bias.defined() ? at::empty({rows}, first.bias.options()) : at::Tensor();
  int64_t offset = 0;
  for (ProjImpl* p : projs) {
    const int64_t out = p->out_features();
    // set_data keeps the parameter's tensor object (what modules, optimizers
    // and gradient hooks hold) and its version counter; only its storage moves.
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

at::Tensor packed_forward(std::initializer_list<ProjImpl*> projs, const at::Tensor& x) {
  if (!FusedScope::open() || (x.is_cuda() && !gpu::enabled()) || wants_gradient(projs, x) || !packed(projs))
    return {};
  const ProjImpl& first = **projs.begin();
  const int64_t rows = rows_of(projs), in = first.in_features();
  const at::Tensor weight = first.weight.as_strided({rows, in}, {in, 1});
  const at::Tensor bias = first.bias.defined() ? first.bias.as_strided({rows}, {1}) : at::Tensor();
  at::Tensor y = cpu::small_linear(x, weight, bias);
  if (!y.defined()) y = at::linear(x, weight, bias);
  int64_t offset = 0;
  for (ProjImpl* p : projs) {
    if (const at::Tensor term = p->adapter_term(x); term.defined())
      y.narrow(-1, offset, p->out_features()).add_(term.to(y.scalar_type()));
    offset += p->out_features();
  }
  return y;
}

}  // namespace grpo::model
