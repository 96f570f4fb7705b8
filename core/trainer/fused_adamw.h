// AdamW in one pass over each parameter.
#pragma once

#include <torch/optim/adamw.h>

#include <string>
#include <type_traits>
#include <utility>

namespace grpo::trainer {

namespace detail {
template <class Map>
struct StateKeyOf;
template <class K, class... Rest>
struct StateKeyOf<ska::flat_hash_map<K, Rest...>> {
  using type = K;
};
}  // namespace detail

// The key under which torch::optim keeps a parameter's state: the address of
// its TensorImpl.
using OptimizerStateKey = typename detail::StateKeyOf<
    std::remove_reference_t<decltype(std::declval<torch::optim::Optimizer&>().state())>>::type;
inline OptimizerStateKey optimizer_state_key(const at::Tensor& p) {
  return static_cast<OptimizerStateKey>(p.unsafeGetTensorImpl());
}

// torch::optim::AdamW's update (decoupled weight decay, bias-corrected
// moments, epsilon added after the square root) with the same state, so
// checkpoints, ZeRO's shards and a plain AdamW read each other's. LibTorch
// runs the update as nine tensor ops, each a pass over memory, and over
// bfloat16 tensors each op rounds its result: on Qwen2.5-0.5B's 494M weights
// the step took 1.4 s in float32 and 2.6 s in bfloat16 on 2 cores. Here a
// float32 or bfloat16 parameter on the CPU is read and written once, the
// arithmetic in float32 (as PyTorch's fused AdamW does for bfloat16), each of
// weight and moments rounded once. On a GPU (or for float16, or strided
// tensors) the step is LibTorch's fused kernel, torch.optim.AdamW(fused=True)'s
// update; with amsgrad or sparse gradients, LibTorch's own step.
class FusedAdamW : public torch::optim::AdamW {
 public:
  using torch::optim::AdamW::AdamW;
  at::Tensor step(LossClosure closure = nullptr) override;

  // Gives every parameter without state its zero moments now, as its first
  // step would. Made before the first forward, the moments lie below the
  // activations in the heap (which is never trimmed: model/threads.cpp).
  // Made by the first step, they take the space its activations freed, and
  // the second step grows the heap by their size again, faulting in every
  // new page: 2 GB of moments in bfloat16 at Qwen2.5-0.5B's size.
  void allocate_state();

  // The update by LibTorch's fused kernel, whatever the device: what step()
  // runs for parameters on a GPU. Public so that the kernel's CPU build is
  // tested against the CPU loop and the exact update.
  void kernel_step();

 private:
  // Whether `takes` takes every parameter that has a gradient.
  bool all_of(bool (*takes)(const at::Tensor&, const torch::optim::OptimizerParamState*, bool));
  // p's state, made as torch::optim::AdamW makes it when p has none.
  torch::optim::OptimizerParamState* state_of(const at::Tensor& p);
};

}  // namespace grpo::trainer
