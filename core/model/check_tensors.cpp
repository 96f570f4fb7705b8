// check_tensors: a checkpoint's tensors against the shapes its config.json implies.
#include <fmt/format.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "model/model_config.h"
#include "model/safetensors.h"

namespace grpo::model {

void check_tensors(const ModelConfig& config, const CheckpointFiles& files) {
  std::vector<std::string> problems;
  for (const auto& [name, shape] : config.parameter_shapes()) {
    const TensorView* t = files.find(name);
    if (t == nullptr) {
      const char* hint = name == "lm_head.weight" ? " (config.json has tie_word_embeddings false)" : "";
      problems.push_back(fmt::format("missing tensor '{}' of shape {}{}", name, shape_to_string(shape), hint));
    } else if (t->shape != shape) {
      problems.push_back(fmt::format("tensor '{}' in {} has shape {}, expected {}", name, files.file_of(name),
                                     shape_to_string(t->shape), shape_to_string(shape)));
    } else if (!is_floating(t->dtype)) {
      problems.push_back(fmt::format("tensor '{}' in {} has dtype {}, expected a floating type", name,
                                     files.file_of(name), dtype_name(t->dtype)));
    }
  }
  // Layers beyond num_hidden_layers mean config.json belongs to another model size.
  const std::string layer_prefix = "model.layers.";
  for (const std::string& name : files.names()) {
    if (name.rfind(layer_prefix, 0) != 0) continue;
    const int64_t layer = std::strtoll(name.c_str() + layer_prefix.size(), nullptr, 10);
    if (layer >= config.num_hidden_layers) {
      problems.push_back(fmt::format("tensor '{}' in {} belongs to layer {}, but config.json has num_hidden_layers {}",
                                     name, files.file_of(name), layer, config.num_hidden_layers));
    }
  }
  if (problems.empty()) return;
  constexpr size_t kMaxListed = 20;
  std::string message = fmt::format("{}: the checkpoint does not match its config ({} {}):", files.dir(),
                                    problems.size(), problems.size() == 1 ? "problem" : "problems");
  for (size_t i = 0; i < problems.size() && i < kMaxListed; ++i) message += "\n  " + problems[i];
  if (problems.size() > kMaxListed) message += fmt::format("\n  ... and {} more", problems.size() - kMaxListed);
  throw CheckpointError(message);
}

}  // namespace grpo::model
