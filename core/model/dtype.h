// Torch dtype names, in one place: `torch_dtype` flags and options
// ("bfloat16"), config.json's torch_dtype, and the rollout protocol's
// "torch.bfloat16". Header-only, so the weight-transfer library and plugins
// use it without linking the model library.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

#include <c10/core/ScalarType.h>

namespace grpo::model {

// Any dtype the weight transfer moves; "torch." is optional. Throws
// std::invalid_argument listing the names it knows.
inline at::ScalarType dtype_from_name(std::string_view name) {
  const size_t dot = name.rfind('.');
  const std::string_view base = dot == std::string_view::npos ? name : name.substr(dot + 1);
  if (base == "float32" || base == "float") return at::kFloat;
  if (base == "bfloat16") return at::kBFloat16;
  if (base == "float16" || base == "half") return at::kHalf;
  if (base == "float64" || base == "double") return at::kDouble;
  if (base == "int64" || base == "long") return at::kLong;
  if (base == "int32" || base == "int") return at::kInt;
  if (base == "uint8") return at::kByte;
  if (base == "int8") return at::kChar;
  if (base == "bool") return at::kBool;
  throw std::invalid_argument("unknown dtype '" + std::string(name) +
                              "'; expected torch.float32, torch.bfloat16, torch.float16, torch.float64, torch.int64, "
                              "torch.int32, torch.int8, torch.uint8 or torch.bool");
}

// "torch.float32" and so on; throws for a dtype without such a name.
inline std::string dtype_to_name(at::ScalarType type) {
  switch (type) {
    case at::kFloat: return "torch.float32";
    case at::kBFloat16: return "torch.bfloat16";
    case at::kHalf: return "torch.float16";
    case at::kDouble: return "torch.float64";
    case at::kLong: return "torch.int64";
    case at::kInt: return "torch.int32";
    case at::kByte: return "torch.uint8";
    case at::kChar: return "torch.int8";
    case at::kBool: return "torch.bool";
    default: throw std::invalid_argument(std::string("dtype ") + c10::toString(type) + " has no protocol name");
  }
}

// The dtypes model weights are computed in: float32, bfloat16, float16
// (empty: float32, the CPU default). Throws std::invalid_argument naming
// `what` (e.g. "--torch_dtype") and the valid names.
inline at::ScalarType weight_dtype_from_name(std::string_view name, std::string_view what = "torch_dtype") {
  if (name.empty() || name == "float32") return at::kFloat;
  if (name == "bfloat16") return at::kBFloat16;
  if (name == "float16") return at::kHalf;
  throw std::invalid_argument(std::string(what) + " must be float32, bfloat16 or float16, got '" + std::string(name) +
                              "'");
}

// The name weight_dtype_from_name reads back: "float32", "bfloat16", "float16".
inline std::string weight_dtype_name(at::ScalarType type) {
  switch (type) {
    case at::kBFloat16: return "bfloat16";
    case at::kHalf: return "float16";
    case at::kFloat: return "float32";
    default: throw std::invalid_argument(std::string("dtype ") + c10::toString(type) + " is not a weight dtype");
  }
}

}  // namespace grpo::model
