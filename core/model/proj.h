// The projection linears of a decoder layer (q/k/v/o_proj, gate/up/down_proj):
// x W^T + b, plus an optional LoRA adapter scaling * B(A(dropout(x))).
// Without an adapter the forward is torch::nn::Linear's, kernel for kernel.
// With one, the parameters are named as PEFT names them once its adapter name
// is dropped (q_proj.weight, q_proj.lora_A.weight, q_proj.lora_B.weight), so
// adapter files map onto them one to one.
#pragma once

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

namespace grpo::model {

class ProjImpl : public torch::nn::Module {
 public:
  // Initialised as torch::nn::Linear is (same values from the same global
  // generator), so a model built without a checkpoint is unchanged.
  ProjImpl(int64_t in_features, int64_t out_features, bool bias);

  at::Tensor forward(const at::Tensor& x);  // x: [.., in] -> [.., out]

  // Registers lora_A.weight = a [rank, in] and lora_B.weight = b [out, rank].
  // The adapter computes in their dtype (float32 under a bfloat16 base keeps
  // small updates from rounding away) and adds its result in x's dtype.
  // Throws if an adapter is already attached or the shapes do not fit.
  void attach_adapter(at::Tensor a, at::Tensor b, double scaling, double dropout);
  bool has_adapter() const { return lora_A.defined(); }

  // scaling * B(A(dropout(x))) in the adapter's dtype, or an undefined
  // tensor without an enabled adapter: what forward adds to x W^T + b.
  at::Tensor adapter_term(const at::Tensor& x);

  // Disabled, the forward is the base linear's exactly (the KL reference).
  void set_adapter_enabled(bool enabled) { adapter_enabled_ = enabled; }
  bool adapter_enabled() const { return adapter_enabled_; }

  double scaling() const { return scaling_; }
  double dropout() const { return dropout_; }
  int64_t in_features() const { return weight.size(1); }
  int64_t out_features() const { return weight.size(0); }

  at::Tensor weight;          // [out, in]
  at::Tensor bias;            // [out]; undefined without bias
  at::Tensor lora_A, lora_B;  // [rank, in], [out, rank]; undefined without an adapter

 private:
  double scaling_ = 0.0;
  double dropout_ = 0.0;
  bool adapter_enabled_ = true;
};
TORCH_MODULE(Proj);

}  // namespace grpo::model
