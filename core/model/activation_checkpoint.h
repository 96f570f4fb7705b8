// Gradient (activation) checkpointing: run a block without keeping its
// activations, and run it again in backward to get them. Memory per layer
// drops to the block's input; the price is one more forward per block.
#pragma once

#include <functional>

#include <ATen/ATen.h>

namespace grpo::model {

using Block = std::function<at::Tensor(const at::Tensor&)>;

// block(x), differentiable w.r.t. x and every parameter block uses (their
// gradients accumulate in backward, as a normal backward would). The random
// state (dropout) is replayed so the recomputation draws the same masks.
at::Tensor checkpointed(const Block& block, const at::Tensor& x);

}  // namespace grpo::model
