#include "model/weights.h"

#include <fmt/format.h>
#include <torch/nn/module.h>
#include <torch/types.h>
#include <torch/utils.h>

#include <filesystem>
#include <fstream>

#include "model/checkpoint_files.h"
#include "model/lora.h"
#include "model/skip_init.h"

namespace grpo::model {

namespace fs = std::filesystem;

at::ScalarType to_scalar_type(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return at::kFloat;
    case DType::F16:
      return at::kHalf;
    case DType::BF16:
      return at::kBFloat16;
    case DType::F64:
      return at::kDouble;
    case DType::I64:
      return at::kLong;
    case DType::I32:
      return at::kInt;
    case DType::I16:
      return at::kShort;
    case DType::I8:
      return at::kChar;
    case DType::U8:
      return at::kByte;
    case DType::Bool:
      return at::kBool;
  }
  throw std::invalid_argument("unknown dtype");
}

DType to_dtype(at::ScalarType type) {
  switch (type) {
    case at::kFloat:
      return DType::F32;
    case at::kHalf:
      return DType::F16;
    case at::kBFloat16:
      return DType::BF16;
    case at::kDouble:
      return DType::F64;
    case at::kLong:
      return DType::I64;
    case at::kInt:
      return DType::I32;
    case at::kShort:
      return DType::I16;
    case at::kChar:
      return DType::I8;
    case at::kByte:
      return DType::U8;
    case at::kBool:
      return DType::Bool;
    default:
      throw std::invalid_argument(fmt::format("dtype {} cannot be saved", c10::toString(type)));
  }
}

namespace {

// config.json's spelling of a dtype.
std::string torch_dtype_name(at::ScalarType type) {
  switch (type) {
    case at::kBFloat16:
      return "bfloat16";
    case at::kHalf:
      return "float16";
    default:
      return "float32";
  }
}

}  // namespace

at::Tensor tensor_view(const TensorView& view) {
  // from_blob never writes; the const_cast only satisfies its signature.
  return at::from_blob(const_cast<void*>(view.data), view.shape, at::TensorOptions().dtype(to_scalar_type(view.dtype)));
}

TensorView writable_view(std::string name, const at::Tensor& t) {
  TensorView view{std::move(name), to_dtype(t.scalar_type()), t.sizes().vec(), nullptr,
                  static_cast<size_t>(t.nbytes())};
  view.read = [t = t.detach()](void* dst) {
    at::from_blob(dst, t.sizes(), at::TensorOptions().dtype(t.scalar_type())).copy_(t);
  };
  return view;
}

void load_weights(CausalLMImpl& model, const CheckpointFiles& files) {
  check_tensors(model.config(), files);
  torch::NoGradGuard no_grad;
  for (auto& item : model.named_parameters()) {
    if (is_adapter_parameter(item.key())) continue;
    const TensorView& view = files.require(item.key());
    item.value().copy_(tensor_view(view));
  }
}

CausalLM build_empty(const ModelConfig& config, const at::Device& device, at::ScalarType dtype) {
  CausalLM model = [&] {
    SkipInit skip;
    return CausalLM(config);
  }();
  model->pack_projections_empty(device, dtype);  // first, so no weight is allocated twice on the device
  empty_on(*model, device, dtype);
  return model;
}

CausalLM load_model(const std::string& dir, at::ScalarType dtype, at::Device device) {
  ModelConfig config = ModelConfig::load((fs::path(dir) / "config.json").string());
  CheckpointFiles files = CheckpointFiles::open(dir);
  CausalLM model = build_empty(config, device, dtype);
  load_weights(*model, files);  // every parameter: check_tensors has made sure the files have them all
  return model;
}

CausalLM copy_model(CausalLMImpl& model) {
  torch::NoGradGuard no_grad;
  const at::Tensor first = model.parameters().at(0);
  CausalLM copy = build_empty(model.config(), first.device(), first.scalar_type());
  auto from = model.named_parameters();
  for (auto& item : copy->named_parameters()) {
    item.value().copy_(from[item.key()]);
    item.value().set_requires_grad(false);
  }
  return copy;
}

void copy_tokenizer_files(const std::string& from_dir, const std::string& to_dir) {
  if (fs::equivalent(from_dir, to_dir)) return;
  for (const char* name : {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja",
                           "generation_config.json", "vocab.json", "merges.txt", "added_tokens.json"}) {
    fs::path src = fs::path(from_dir) / name;
    if (fs::exists(src)) fs::copy_file(src, fs::path(to_dir) / name, fs::copy_options::overwrite_existing);
  }
}

void save_model(CausalLMImpl& model, const std::string& dir, const std::string& tokenizer_dir, size_t max_shard_bytes) {
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  for (auto& item : model.named_parameters())
    if (!is_adapter_parameter(item.key())) tensors.emplace_back(item.key(), item.value());
  save_model_tensors(model.config(), tensors, dir, tokenizer_dir, max_shard_bytes);
}

void save_model_tensors(const ModelConfig& config, const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                        const std::string& dir, const std::string& tokenizer_dir, size_t max_shard_bytes) {
  fs::create_directories(dir);
  std::vector<TensorView> views;
  for (const auto& [name, value] : tensors) views.push_back(writable_view(name, value));
  write_sharded(dir, views, max_shard_bytes);
  nlohmann::json json = config.to_json();
  if (!tensors.empty()) json["torch_dtype"] = torch_dtype_name(tensors[0].second.scalar_type());
  write_text_atomically((fs::path(dir) / "config.json").string(), json.dump(2) + "\n");
  if (!tokenizer_dir.empty()) copy_tokenizer_files(tokenizer_dir, dir);
}

}  // namespace grpo::model
