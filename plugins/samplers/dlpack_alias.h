// For sampler plugins built on LibTorch: a tensor over the memory a
// grpo_dl_tensor view describes, without a copy (the host keeps the memory
// alive for as long as the view is valid).
#pragma once

#include <cstring>

#include <ATen/DLConvertor.h>
#include <grpo/tensor.h>

namespace grpo::samplers {

inline at::Tensor alias_of(const grpo_dl_tensor& view) {
  auto* managed = new DLManagedTensor{};
  std::memcpy(&managed->dl_tensor, &view, sizeof(DLTensor));  // layout-identical (tests/sdk/dlpack_layout_test.cpp)
  managed->deleter = [](DLManagedTensor* self) { delete self; };
  return at::fromDLPack(managed);
}

}  // namespace grpo::samplers
