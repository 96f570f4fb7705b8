#include "trainer/weight_views.h"

#include <stdexcept>

#include "model/lora.h"

namespace grpo::trainer {

namespace {

grpo_dl_dtype dl_dtype(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return {GRPO_DTYPE_FLOAT, 32, 1};
    case at::kHalf: return {GRPO_DTYPE_FLOAT, 16, 1};
    case at::kBFloat16: return {GRPO_DTYPE_BFLOAT, 16, 1};
    case at::kDouble: return {GRPO_DTYPE_FLOAT, 64, 1};
    default: throw std::invalid_argument("parameters must be floating point");
  }
}

}  // namespace

namespace {

std::vector<std::pair<std::string, at::Tensor>> base_parameters(model::CausalLMImpl& model) {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const auto& p : model.named_parameters())
    if (!model::is_adapter_parameter(p.key())) out.emplace_back(p.key(), p.value());
  return out;
}

}  // namespace

WeightViews::WeightViews(model::CausalLMImpl& model) : WeightViews(base_parameters(model)) {}

WeightViews::WeightViews(const std::vector<std::pair<std::string, at::Tensor>>& params) {
  // Reserve first: the views point into these vectors' elements.
  keep_.reserve(params.size());
  names_.reserve(params.size());
  shapes_.reserve(params.size());
  strides_.reserve(params.size());
  for (const auto& [name, t] : params) {
    keep_.push_back(t);
    names_.push_back(name);
    shapes_.push_back(t.sizes().vec());
    strides_.push_back(t.strides().vec());
    grpo_dl_device device{t.is_cuda() ? GRPO_DEVICE_CUDA : GRPO_DEVICE_CPU,
                          t.is_cuda() ? static_cast<int32_t>(t.get_device()) : 0};
    grpo_dl_tensor view{t.data_ptr(), device, static_cast<int32_t>(t.dim()), dl_dtype(t.scalar_type()),
                        shapes_.back().data(), strides_.back().data(), 0};
    tensors_.push_back({{names_.back().data(), names_.back().size()}, view});
  }
}

}  // namespace grpo::trainer
