#include "trainer/gradient_buckets.h"

#include <ATen/core/grad_mode.h>

namespace grpo::trainer {

std::vector<ParamRange> runs(const std::vector<at::Tensor>& params, const std::vector<int>& owner, int64_t bytes) {
  std::vector<ParamRange> out;
  for (size_t i = 0; i < params.size();) {
    size_t j = i;
    int64_t n = 0;
    while (j < params.size() && owner[j] == owner[i] && (j == i || n + params[j].nbytes() <= bytes))
      n += params[j++].nbytes();
    out.emplace_back(i, j);
    i = j;
  }
  return out;
}

std::vector<ParamRange> runs_from_last(const std::vector<at::Tensor>& params, int64_t bytes) {
  std::vector<ParamRange> out;
  for (size_t j = params.size(); j > 0;) {
    size_t i = j;
    int64_t n = 0;
    while (i > 0 && (i == j || n + params[i - 1].nbytes() <= bytes)) n += params[--i].nbytes();
    out.emplace_back(i, j);
    j = i;
  }
  return out;
}

at::Tensor flat_gradients(const std::vector<at::Tensor>& params, ParamRange range) {
  std::vector<at::Tensor> parts;
  for (size_t i = range.first; i < range.second; ++i) {
    const at::Tensor& g = params[i].grad();
    // A missing gradient's zeros on its parameter's device: the bucket is one device's tensor (NCCL's, or Gloo's on the CPU).
    parts.push_back(g.defined() ? g.detach().reshape({-1}).to(at::kFloat)
                                : at::zeros({params[i].numel()}, params[i].options().dtype(at::kFloat)));
  }
  return at::cat(parts).contiguous();
}

void set_gradients(const std::vector<at::Tensor>& params, ParamRange range, const at::Tensor& flat, double scale) {
  at::NoGradGuard no_grad;
  int64_t offset = 0;
  for (size_t i = range.first; i < range.second; ++i) {
    const at::Tensor& p = params[i];
    at::Tensor value = flat.narrow(0, offset, p.numel()).view(p.sizes()).mul(scale);
    offset += p.numel();
    if (p.grad().defined()) p.grad().copy_(value);
    else p.mutable_grad() = value.to(p.scalar_type());
  }
}

}  // namespace grpo::trainer
