// A model's parameters as DLPack-layout views for a sampler plugin: the
// in-process sampler aliases them, so later in-place optimizer updates need
// no transfer.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <grpo/tensor.h>

#include "model/transformer.h"

namespace grpo::trainer {

class WeightViews {
 public:
  // The model's parameters by Hugging Face name; LoRA adapter parameters are
  // not part of a sampler's model and are left out.
  explicit WeightViews(model::CausalLMImpl& model);
  explicit WeightViews(const std::vector<std::pair<std::string, at::Tensor>>& named);
  const std::vector<grpo_named_tensor>& tensors() const { return tensors_; }

 private:
  std::vector<at::Tensor> keep_;  // the viewed tensors (the parameters themselves)
  std::vector<std::string> names_;
  std::vector<std::vector<int64_t>> shapes_, strides_;
  std::vector<grpo_named_tensor> tensors_;
};

}  // namespace grpo::trainer
