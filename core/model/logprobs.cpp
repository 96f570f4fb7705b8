#include "model/logprobs.h"

#include <ATen/core/grad_mode.h>
#include <torch/autograd.h>

namespace grpo::model {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Chunk [r0, r0 + n) of the flattened rows: float32 logits / temperature.
at::Tensor chunk_logits(const at::Tensor& h2, const at::Tensor& weight, int64_t r0, int64_t n, double temperature) {
  return at::matmul(h2.narrow(0, r0, n), weight.t()).to(at::kFloat).div_(temperature);  // [n, V]
}

// *entropy, when given ([rows], float32, no gradient), gets each row's
// entropy from the same chunk of logits: at a 151,936-token vocabulary the
// lm_head matmul of a chunk costs as much as the rest of its row's work.
class ChunkedLogprobFn : public torch::autograd::Function<ChunkedLogprobFn> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& h2, const at::Tensor& weight,
                            const at::Tensor& targets, double temperature, int64_t chunk, at::Tensor* entropy) {
    at::NoGradGuard no_grad;
    const int64_t rows = h2.size(0);
    at::Tensor out = at::empty({rows}, h2.options().dtype(at::kFloat));
    for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
      const int64_t n = std::min(chunk, rows - r0);
      at::Tensor logp = at::log_softmax(chunk_logits(h2, weight, r0, n, temperature), -1);
      out.narrow(0, r0, n).copy_(logp.gather(1, targets.narrow(0, r0, n).unsqueeze(1)).squeeze(1));
      if (entropy) entropy->narrow(0, r0, n).copy_(-(logp.exp() * logp).sum(-1));
    }
    ctx->save_for_backward({h2, weight, targets});
    ctx->saved_data["temperature"] = temperature;
    ctx->saved_data["chunk"] = chunk;
    return out;
  }

  // d logp[target] / d logits = onehot(target) - softmax, scaled by 1/temperature.
  // The products run in the weight's dtype, as autograd runs a bfloat16
  // model's (bfloat16 matmuls accumulate in float32); the weight's gradient
  // is summed over the chunks in float32, and only when the weight trains
  // (under LoRA it is frozen: no [V, H] product per chunk).
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const at::Tensor &h2 = saved[0], &weight = saved[1], &targets = saved[2];
    const double temperature = ctx->saved_data["temperature"].toDouble();
    const int64_t chunk = ctx->saved_data["chunk"].toInt();
    const bool want_h = ctx->needs_input_grad(0), want_w = ctx->needs_input_grad(1);
    const at::Tensor g = grads[0];  // [rows]
    at::Tensor grad_h = want_h ? at::empty_like(h2) : at::Tensor();
    at::Tensor grad_w = want_w ? at::zeros(weight.sizes(), weight.options().dtype(at::kFloat)) : at::Tensor();
    for (int64_t r0 = 0; r0 < h2.size(0); r0 += chunk) {
      const int64_t n = std::min(chunk, h2.size(0) - r0);
      at::Tensor d = at::softmax(chunk_logits(h2, weight, r0, n, temperature), -1).neg_();  // [n, V]
      d.scatter_add_(1, targets.narrow(0, r0, n).unsqueeze(1), at::ones({n, 1}, d.options()));
      d.mul_(g.narrow(0, r0, n).unsqueeze(1) / temperature);
      d = d.to(weight.scalar_type());
      if (want_h) {
        at::Tensor rows = grad_h.narrow(0, r0, n);
        at::mm_out(rows, d, weight);
      }
      if (!want_w) continue;
      if (weight.scalar_type() == at::kFloat) grad_w.addmm_(d.t(), h2.narrow(0, r0, n));  // in place: no [V, H] temporary
      else grad_w.add_(at::matmul(d.t(), h2.narrow(0, r0, n)));
    }
    return {grad_h, want_w ? grad_w.to(weight.scalar_type()) : at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(),
            at::Tensor()};
  }
};

}  // namespace

TokenLogprobs chunked_logprobs(const at::Tensor& hidden, const at::Tensor& weight, const at::Tensor& targets,
                               const LogprobOptions& options) {
  const int64_t B = hidden.size(0), T = hidden.size(1);
  at::Tensor h2 = hidden.reshape({B * T, hidden.size(2)});
  at::Tensor t1 = targets.reshape({B * T}).to(at::kLong);
  const int64_t chunk = std::max<int64_t>(1, options.chunk_tokens);
  TokenLogprobs out;
  at::Tensor entropy = options.entropy ? at::empty({B * T}, hidden.options().dtype(at::kFloat)) : at::Tensor();
  out.logprobs = ChunkedLogprobFn::apply(h2, weight, t1, options.temperature, chunk,
                                         options.entropy ? &entropy : nullptr)
                     .view({B, T});
  if (options.entropy) out.entropy = entropy.view({B, T});
  return out;
}

TokenLogprobs sequence_logprobs(CausalLMImpl& model, const at::Tensor& ids, const at::Tensor& attention_mask,
                                const LogprobOptions& options) {
  const int64_t L = ids.size(1);
  at::Tensor hidden = model.hidden_states(ids, attention_mask);  // [B, L, H]
  const at::Tensor& weight = model.lm_head ? model.lm_head->weight : model.model->embed_tokens->weight;
  return chunked_logprobs(hidden.narrow(1, 0, L - 1), weight, ids.narrow(1, 1, L - 1), options);
}

}  // namespace grpo::model
