// Projections that read the same input — a layer's q/k/v, an MLP's gate/up —
// stored as the rows of one matrix, so that sampling multiplies by them in
// one product instead of two or three. At batch 1 each product is a kernel
// of a few microseconds whatever its size (k_proj and v_proj of Qwen2.5-0.5B
// are 896 x 128): two fewer per attention and one fewer per MLP is 72 fewer
// launches per decoded token at 24 layers, in a step whose weights stream in
// about 250 us on an H200.
//
// Each parameter stays a parameter of its own (same name, shape, values and
// tensor object, a leaf for autograd and the optimizer) whose storage is its
// rows of the shared matrix — as set_data leaves it, the way FSDP lays
// parameters into a flat buffer. Anything that gives a parameter storage of
// its own (Module::to, offloading, a sampler aliasing another model's
// tensors) just ends the sharing: packed_forward() then declines and the
// projections run one by one, as before. Training's passes never use it
// (outside a FusedScope), so their bits do not change.
#pragma once

#include <ATen/ATen.h>

#include <initializer_list>

#include "model/proj.h"

namespace grpo::model {

// Gives the projections (same input size, dtype and device; all with a bias
// or none) one matrix [sum of outs, in] and one bias vector, each parameter
// becoming its rows. keep_values: copy what they hold (false for weights
// about to be loaded). Nothing happens where they are packed already.
void pack(std::initializer_list<ProjImpl*> projs, bool keep_values = true);

// Whether the projections are laid out as pack() leaves them: one storage,
// each weight (and bias) the next rows after the one before.
bool packed(std::initializer_list<ProjImpl*> projs);

// Inside a FusedScope with no gradient wanted, and where packed(): the
// projections of x side by side [.., sum of outs] from one product, each
// enabled LoRA adapter's term added to its own columns. Otherwise an
// undefined tensor, and the caller runs them one by one. On a GPU the
// kernels' switch (gpu::set_enabled, GRPO_FUSED_KERNELS=0) turns it off too.
at::Tensor packed_forward(std::initializer_list<ProjImpl*> projs, const at::Tensor& x);

}  // namespace grpo::model
