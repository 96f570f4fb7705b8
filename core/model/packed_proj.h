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
// parameters into a flat buffer. What counts is where the weights lie, not
// which storage object holds them: a sampler that aliases a packed model's
// tensors (each handed over as a tensor of its own) reads them packed too.
// Anything that gives a parameter memory of its own (Module::to, offloading)
// just ends the packing: packed_forward() then declines and the projections
// run one by one, as before. Training's passes never use it (outside a
// FusedScope), so their bits do not change.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "model/proj.h"

namespace grpo::model {

// Projections of one input, in the order their rows are packed.
using ProjGroup = std::vector<ProjImpl*>;

// Gives the group (same input size; all with a bias or none) one matrix
// [sum of outs, in] and one bias vector of `options` (device, dtype), each
// parameter becoming its rows. keep_values: copy what they hold (false for
// weights about to be loaded). Nothing happens where they are packed already
// with those options. A model whose parameters alias another's tensors is
// given memory of its own by this: it no longer sees the other's updates.
void pack(const ProjGroup& projs, const at::TensorOptions& options, bool keep_values);

// Whether the group's weights (and biases) lie as pack() leaves them: each
// the next rows of memory after the one before, in one dtype on one device.
bool packed(const ProjGroup& projs);

// Inside a FusedScope with no gradient wanted, and where packed(): the
// projections of x side by side [.., sum of outs] from one product, each
// enabled LoRA adapter's term added to its own columns. Otherwise an
// undefined tensor, and the caller runs them one by one. On a GPU the
// kernels' switch (gpu::set_enabled, GRPO_FUSED_KERNELS=0) turns it off too.
at::Tensor packed_forward(const ProjGroup& projs, const at::Tensor& x);

// How many products packed_forward has computed in this process: tests
// check that sampling goes through it.
int64_t packed_forward_count();

}  // namespace grpo::model
