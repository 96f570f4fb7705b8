#include "model/lora_files.h"

#include <fmt/format.h>
#include <torch/utils.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "model/safetensors.h"
#include "model/weights.h"
#include "util/json_input.h"

namespace grpo::model {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// PEFT prefixes the wrapped model's parameter names with this.
constexpr const char* kPeftPrefix = "base_model.model.";

[[noreturn]] void fail(const fs::path& file, const std::string& what) {
  throw AdapterFileError(fmt::format("{}: {}", file.string(), what));
}

json read_json(const fs::path& path) {
  std::ifstream in(path);
  if (!in) fail(path, "cannot open (is this a PEFT adapter directory?)");
  try {
    return util::parse_json_file(path.string());
  } catch (const util::JsonInputError& e) {
    throw AdapterFileError(e.what());
  }
}

// The config fields PEFT allows that change what an adapter computes or
// holds, and that this implementation does not: refused rather than ignored.
void check_supported(const json& config, const fs::path& path) {
  if (config.value("peft_type", "") != "LORA")
    fail(path, fmt::format("peft_type is {}, only LORA adapters can be loaded", config.value("peft_type", json()).dump()));
  auto is_set = [&](const char* key) {
    auto it = config.find(key);
    return it != config.end() && !it->is_null() && !(it->is_boolean() && !it->get<bool>()) &&
           !((it->is_object() || it->is_array()) && it->empty());
  };
  for (const char* key : {"use_rslora", "use_dora", "fan_in_fan_out", "rank_pattern", "alpha_pattern",
                          "layers_to_transform", "modules_to_save"})
    if (is_set(key)) fail(path, fmt::format("'{}' = {} is not supported; train the adapter without it", key,
                                            config[key].dump()));
  if (config.contains("bias") && config["bias"] != "none")
    fail(path, fmt::format("'bias' = {} is not supported (only \"none\": no trained biases)", config["bias"].dump()));
}

std::vector<std::string> read_targets(const json& config, const fs::path& path) {
  const json& t = config.value("target_modules", json());
  std::vector<std::string> names;
  if (t.is_string()) {
    // PEFT reads a string as a regular expression over module names; only the
    // plain forms are understood here.
    names.push_back(t.get<std::string>());
  } else if (t.is_array()) {
    for (const json& n : t) {
      if (!n.is_string()) fail(path, "target_modules holds a non-string " + n.dump());
      // PEFT matches an entry as a module name's dotted suffix, and saves
      // "all-linear" as the qualified names ("model.layers.0.self_attn.q_proj").
      // Adapters attach here to every layer, so a file that adapts only some
      // fails on its missing tensors below rather than loading wrongly.
      const std::string name = n.get<std::string>();
      names.push_back(name.substr(name.rfind('.') + 1));
    }
  } else {
    fail(path, "target_modules must be a list of module names or \"all-linear\", got " + t.dump());
  }
  try {
    return resolve_target_modules(names);
  } catch (const std::invalid_argument& e) {
    fail(path, e.what());
  }
}

void write_text(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out.flush()) fail(path, "cannot write");
  }
  fs::rename(tmp, path);
}

}  // namespace

void save_peft_adapter(CausalLMImpl& model, const LoraOptions& options, const std::string& dir,
                       const std::string& base_model) {
  if (!has_adapters(model)) throw std::logic_error("save_peft_adapter: the model carries no LoRA adapters");
  // The config must describe the tensors, or PEFT would load them wrongly scaled or not at all.
  const std::string mismatch = adapter_mismatch(model, options);
  if (!mismatch.empty()) throw std::invalid_argument("save_peft_adapter: " + mismatch);
  fs::create_directories(dir);
  std::vector<TensorView> views;
  for (const auto& item : model.named_parameters())
    if (is_adapter_parameter(item.key())) views.push_back(writable_view(kPeftPrefix + item.key(), item.value()));
  write_safetensors((fs::path(dir) / kAdapterWeightsName).string(), views);
  json config = {{"peft_type", "LORA"},
                 {"task_type", "CAUSAL_LM"},
                 {"base_model_name_or_path", base_model},
                 {"r", options.rank},
                 // An integral alpha as an integer, as PEFT writes it.
                 {"lora_alpha", options.alpha == std::floor(options.alpha) ? json(static_cast<int64_t>(options.alpha))
                                                                           : json(options.alpha)},
                 {"lora_dropout", options.dropout},
                 {"target_modules", resolve_target_modules(options.target_modules)},
                 {"bias", "none"},
                 {"fan_in_fan_out", false},
                 {"inference_mode", true},
                 {"init_lora_weights", true},
                 {"use_rslora", false},
                 {"use_dora", false},
                 {"modules_to_save", nullptr},
                 {"layers_to_transform", nullptr},
                 {"layers_pattern", nullptr},
                 {"rank_pattern", json::object()},
                 {"alpha_pattern", json::object()},
                 {"revision", nullptr}};
  write_text(fs::path(dir) / kAdapterConfigName, config.dump(2) + "\n");
}

LoraOptions load_peft_adapter(CausalLMImpl& model, const std::string& dir) {
  const fs::path config_path = fs::path(dir) / kAdapterConfigName;
  const fs::path weights_path = fs::path(dir) / kAdapterWeightsName;
  const json config = read_json(config_path);
  check_supported(config, config_path);
  LoraOptions options;
  try {
    options.rank = config.at("r").get<int64_t>();
    options.alpha = config.at("lora_alpha").get<double>();
    options.dropout = config.value("lora_dropout", 0.0);
  } catch (const json::exception& e) {
    fail(config_path, std::string("needs integer 'r' and numeric 'lora_alpha': ") + e.what());
  }
  options.target_modules = read_targets(config, config_path);
  // Opened before anything is attached, so a missing file leaves the model as it was.
  auto file = SafetensorsFile::open(weights_path.string());

  if (!has_adapters(model)) {
    try {
      apply_lora(model, options);
    } catch (const std::invalid_argument& e) {
      fail(config_path, e.what());
    }
  } else {
    // Adapters already attached (e.g. resuming): they must be the file's.
    const std::string mismatch = adapter_mismatch(model, options);
    if (!mismatch.empty()) fail(config_path, mismatch);
  }

  std::set<std::string> unused;
  for (const TensorView& v : file->tensors()) unused.insert(v.name);
  torch::NoGradGuard no_grad;
  for (auto& item : model.named_parameters()) {
    if (!is_adapter_parameter(item.key())) continue;
    const std::string key = kPeftPrefix + item.key();
    const TensorView* view = file->find(key);
    if (!view) fail(weights_path, fmt::format("tensor '{}' is missing", key));
    if (view->shape != item.value().sizes().vec())
      fail(weights_path, fmt::format("tensor '{}' has shape {}, the model expects {}", key,
                                     shape_to_string(view->shape), shape_to_string(item.value().sizes().vec())));
    if (!is_floating(view->dtype))
      fail(weights_path, fmt::format("tensor '{}' has dtype {}, not a floating type", key, dtype_name(view->dtype)));
    item.value().copy_(tensor_view(*view));
    unused.erase(key);
  }
  if (!unused.empty())
    fail(weights_path, fmt::format("tensor '{}' matches no adapter of this model (adapter for another model, or "
                                   "for modules not in target_modules?)",
                                   *unused.begin()));
  return options;
}

void save_merged_model(CausalLMImpl& model, const std::string& dir, const std::string& tokenizer_dir,
                       size_t max_shard_bytes) {
  save_model_tensors(model.config(), merged_state(model), dir, tokenizer_dir, max_shard_bytes);
}

CausalLM load_model_or_adapter(const std::string& dir, at::ScalarType dtype, at::Device device) {
  const fs::path config_path = fs::path(dir) / kAdapterConfigName;
  if (fs::exists(fs::path(dir) / "config.json") || !fs::exists(config_path)) return load_model(dir, dtype, device);
  const std::string base = read_json(config_path).value("base_model_name_or_path", "");
  if (base.empty() || !fs::exists(fs::path(base) / "config.json"))
    fail(config_path, "a LoRA adapter whose base model '" + base +
                          "' is not a local model directory: give the base with --model, or use the checkpoint's "
                          "merged/ directory (written with --merge_lora true)");
  CausalLM model = load_model(base, dtype, device);
  load_peft_adapter(*model, dir);
  model->eval();  // inference: no adapter dropout
  return model;
}

}  // namespace grpo::model
