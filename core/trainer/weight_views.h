// A model's parameters as DLPack-layout views for a sampler plugin: the
// in-process sampler aliases them, so later in-place optimizer updates need
// no transfer.
#pragma once

#include <string>
#include <vector>

#include <grpo/tensor.h>

#include "model/transformer.h"

namespace grpo::trainer {

class WeightViews {
 public:
  explicit WeightViews(model::CausalLMImpl& model);
  const std::vector<grpo_named_tensor>& tensors() const { return tensors_; }

 private:
  std::vector<at::Tensor> keep_;  // the viewed tensors (the parameters themselves)
  std::vector<std::string> names_;
  std::vector<std::vector<int64_t>> shapes_, strides_;
  std::vector<grpo_named_tensor> tensors_;
};

}  // namespace grpo::trainer
