#include "model/activation_checkpoint.h"

#include <ATen/core/grad_mode.h>
#include <torch/autograd.h>
#include <torch/custom_class.h>

namespace grpo::model {

namespace {

// What backward needs besides the input: the block and the random state it
// started from. Held in the autograd context as a capsule.
struct Replay : torch::CustomClassHolder {
  Block block;
  at::Tensor rng_state;
};

struct CheckpointFunction : torch::autograd::Function<CheckpointFunction> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, Block block) {
    auto replay = c10::make_intrusive<Replay>();
    replay->rng_state = at::globalContext().defaultGenerator(x.device()).get_state();
    at::Tensor out;
    {
      at::NoGradGuard no_grad;  // the whole point: nothing inside is kept for backward
      out = block(x);
    }
    replay->block = std::move(block);
    ctx->saved_data["replay"] = c10::IValue::make_capsule(replay);
    ctx->save_for_backward({x});
    return out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_out) {
    auto replay = c10::static_intrusive_pointer_cast<Replay>(ctx->saved_data["replay"].toCapsule());
    at::Tensor x = ctx->get_saved_variables()[0].detach().requires_grad_(true);
    at::Generator gen = at::globalContext().defaultGenerator(x.device());
    at::Tensor now = gen.get_state();
    gen.set_state(replay->rng_state);
    at::Tensor out;
    {
      at::AutoGradMode grad(true);
      out = replay->block(x);
    }
    gen.set_state(now);  // the rest of the run continues its own random sequence
    // Parameters are leaves: their .grad accumulates here, as in a normal backward.
    torch::autograd::backward({out}, {grad_out[0]});
    return {x.grad(), at::Tensor()};
  }
};

}  // namespace

at::Tensor checkpointed(const Block& block, const at::Tensor& x) {
  // An input without grad (frozen embeddings under LoRA) would leave the
  // output without grad, and the adapters inside the block without gradients.
  return CheckpointFunction::apply(x.requires_grad() ? x : x.detach().requires_grad_(true), block);
}

}  // namespace grpo::model
