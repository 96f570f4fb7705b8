#include "model/model_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <fstream>

#include "util/dangling_link.h"
#include "util/json_input.h"

namespace grpo::model {
namespace {

using nlohmann::json;

struct ArchInfo {
  Arch arch;
  const char* model_type;
  const char* architecture;
  int64_t default_max_position_embeddings;  // transformers' defaults for the config class
};

constexpr std::array<ArchInfo, 3> kArchs{{
    {Arch::Qwen2, "qwen2", "Qwen2ForCausalLM", 32768},
    {Arch::Llama, "llama", "LlamaForCausalLM", 2048},
    {Arch::Qwen3, "qwen3", "Qwen3ForCausalLM", 32768},
}};

std::string supported_archs() {
  std::string out;
  for (const ArchInfo& a : kArchs)
    out += fmt::format("{}{} ({})", out.empty() ? "" : ", ", a.architecture, a.model_type);
  return out;
}

const ArchInfo& info(Arch arch) {
  for (const ArchInfo& a : kArchs) {
    if (a.arch == arch) return a;
  }
  throw std::invalid_argument("invalid Arch value");
}

// Typed access to one JSON object; null counts as absent, as transformers treats None.
class Reader {
 public:
  Reader(const json& object, std::string source, std::string prefix = "")
      : object_(object), source_(std::move(source)), prefix_(std::move(prefix)) {}

  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw ModelConfigError(fmt::format("{}: key '{}{}': {}", source_, prefix_, key, what));
  }

  const json* get(const std::string& key) const {
    const auto it = object_.find(key);
    return it == object_.end() || it->is_null() ? nullptr : &*it;
  }
  const json& require(const std::string& key) const {
    const json* value = get(key);
    if (value == nullptr) fail(key, "missing (required)");
    return *value;
  }

  int64_t as_int(const std::string& key, const json& value) const {
    if (!value.is_number_integer() ||
        (value.is_number_unsigned() && value.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))) {
      fail(key, fmt::format("expected an integer, got {} {}", value.type_name(), value.dump()));
    }
    return value.get<int64_t>();
  }
  int64_t positive_int(const std::string& key, const json& value) const {
    const int64_t n = as_int(key, value);
    if (n <= 0) fail(key, fmt::format("must be positive, got {}", n));
    return n;
  }
  int64_t required_positive(const std::string& key) const { return positive_int(key, require(key)); }
  int64_t optional_positive(const std::string& key, int64_t fallback) const {
    const json* value = get(key);
    return value == nullptr ? fallback : positive_int(key, *value);
  }
  double number(const std::string& key, double fallback) const {
    const json* value = get(key);
    if (value == nullptr) return fallback;
    if (!value->is_number()) fail(key, fmt::format("expected a number, got {} {}", value->type_name(), value->dump()));
    return value->get<double>();
  }
  double required_number(const std::string& key) const {
    require(key);
    return number(key, 0);
  }
  bool boolean(const std::string& key, bool fallback) const {
    const json* value = get(key);
    if (value == nullptr) return fallback;
    if (!value->is_boolean()) {
      fail(key, fmt::format("expected true or false, got {} {}", value->type_name(), value->dump()));
    }
    return value->get<bool>();
  }
  std::string string(const std::string& key, const std::string& fallback) const {
    const json* value = get(key);
    if (value == nullptr) return fallback;
    if (!value->is_string()) fail(key, fmt::format("expected a string, got {} {}", value->type_name(), value->dump()));
    return value->get<std::string>();
  }

 private:
  const json& object_;
  std::string source_;
  std::string prefix_;
};

const ArchInfo& resolve_arch(const Reader& r) {
  const std::string model_type = r.string("model_type", "");
  std::string architecture;
  if (const json* list = r.get("architectures")) {
    if (!list->is_array() || list->empty() || !(*list)[0].is_string()) {
      r.fail("architectures", fmt::format("expected a list of class names, got {}", list->dump()));
    }
    architecture = (*list)[0].get<std::string>();
  }
  if (model_type.empty() && architecture.empty()) r.fail("model_type", "missing (and no architectures either)");
  for (const ArchInfo& a : kArchs) {
    const bool type_matches = model_type.empty() || model_type == a.model_type;
    const bool class_matches = architecture.empty() || architecture == a.architecture;
    if (type_matches && class_matches) return a;
  }
  const bool known_type =
      std::any_of(kArchs.begin(), kArchs.end(), [&](const ArchInfo& a) { return model_type == a.model_type; });
  if (model_type.empty() || known_type) {
    r.fail("architectures", fmt::format("'{}' is not supported (supported: {})", architecture, supported_archs()));
  }
  r.fail("model_type", fmt::format("'{}' is not supported (supported: {})", model_type, supported_archs()));
}

// transformers 5 writes RoPE settings as rope_parameters {rope_type, rope_theta, factor, ...}; older
// files as rope_scaling beside a top-level rope_theta. transformers 5 reads a non-null rope_scaling
// before rope_parameters, and a rope_theta inside that object before the top-level one.
const char* rope_key(const Reader& top) { return top.get("rope_scaling") ? "rope_scaling" : "rope_parameters"; }

std::optional<RopeScaling> parse_rope_scaling(const Reader& top, const std::string& source) {
  const std::string key = rope_key(top);
  const json* value = top.get(key);
  if (value == nullptr) return std::nullopt;
  if (!value->is_object()) top.fail(key, fmt::format("expected an object or null, got {}", value->dump()));
  const Reader r(*value, source, key + ".");
  // transformers renamed "type" to "rope_type" and still reads both.
  std::string type = r.string("rope_type", r.string("type", ""));
  if (type.empty() && key == "rope_parameters") {
    for (const auto& [name, nested] : value->items())
      if (nested.is_object()) r.fail(name, "RoPE parameters per layer type are not supported");
    type = "default";  // as transformers 5 fills it in
  }
  if (type.empty()) r.fail("rope_type", "missing");
  if (type == "default") return std::nullopt;
  RopeScaling out;
  out.type = type;
  // Other schemes (linear, dynamic, yarn, ...) change the rotary frequencies too: refusing them beats
  // silently computing different logits than transformers.
  if (type == "llama3") {
    out.factor = r.required_number("factor");
    out.low_freq_factor = r.required_number("low_freq_factor");
    out.high_freq_factor = r.required_number("high_freq_factor");
    out.original_max_position_embeddings = r.required_positive("original_max_position_embeddings");
    if (out.low_freq_factor >= out.high_freq_factor) {
      r.fail("low_freq_factor",
             fmt::format("{} must be below high_freq_factor {}", out.low_freq_factor, out.high_freq_factor));
    }
  } else {
    r.fail("rope_type", fmt::format("'{}' is not supported (supported: default, llama3)", type));
  }
  if (!(out.factor >= 1)) r.fail("factor", fmt::format("must be at least 1, got {}", out.factor));
  return out;
}

double parse_rope_theta(const Reader& top, const std::string& source) {
  const double theta = top.number("rope_theta", 10000.0);
  const std::string key = rope_key(top);
  const json* value = top.get(key);
  if (value == nullptr || !value->is_object()) return theta;
  return Reader(*value, source, key + ".").number("rope_theta", theta);
}

std::vector<int64_t> parse_token_ids(const Reader& r, const std::string& key) {
  const json* value = r.get(key);
  if (value == nullptr) return {};
  if (!value->is_array()) return {r.as_int(key, *value)};
  std::vector<int64_t> ids;
  for (const json& id : *value) ids.push_back(r.as_int(key, id));
  return ids;
}

// Writes only values that differ, so that an unchanged config saves as the same file (1000000 stays an
// integer rather than becoming 1000000.0).
void set_if_changed(json& out, const char* key, const json& value) {
  const auto it = out.find(key);
  if (it == out.end() || *it != value) out[key] = value;
}

// The scaling's fields written over `object` (a rope_scaling or rope_parameters object).
json with_scaling(json object, const std::optional<RopeScaling>& scaling) {
  object.erase("type");
  for (const char* key : {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"})
    object.erase(key);
  object["rope_type"] = scaling ? scaling->type : "default";
  if (scaling) object["factor"] = scaling->factor;
  if (scaling && scaling->type == "llama3") {
    object["low_freq_factor"] = scaling->low_freq_factor;
    object["high_freq_factor"] = scaling->high_freq_factor;
    object["original_max_position_embeddings"] = scaling->original_max_position_embeddings;
  }
  return object;
}

// In the layout the file came in (see rope_key), so that transformers 4 and 5 read back what was read.
void write_rope(json& out, double theta, const std::optional<RopeScaling>& scaling) {
  const bool legacy_scaling = out.contains("rope_scaling") && !out["rope_scaling"].is_null();
  if (!legacy_scaling && out.contains("rope_parameters") && out["rope_parameters"].is_object()) {
    json params = with_scaling(out["rope_parameters"], scaling);
    params["rope_theta"] = theta;
    set_if_changed(out, "rope_parameters", params);
    if (out.contains("rope_theta")) set_if_changed(out, "rope_theta", theta);
    return;
  }
  set_if_changed(out, "rope_theta", theta);
  if (scaling) {
    const bool has_object = legacy_scaling && out["rope_scaling"].is_object();
    set_if_changed(out, "rope_scaling", with_scaling(has_object ? out["rope_scaling"] : json::object(), scaling));
  } else if (out.contains("rope_scaling")) {
    // Keep an explicit {"rope_type": "default"}: it means the same as null.
    const json& old = out["rope_scaling"];
    const bool is_default = old.is_object() && old.value("rope_type", old.value("type", "")) == "default";
    if (!is_default) out["rope_scaling"] = nullptr;
  }
}

}  // namespace

std::string_view arch_name(Arch arch) { return info(arch).architecture; }

ModelConfig ModelConfig::load(const std::string& config_json_path) {
  if (const std::string dangling = util::dangling_link_problem(config_json_path); !dangling.empty())
    throw ModelConfigError(dangling);
  std::ifstream in(config_json_path);
  if (!in) throw ModelConfigError(fmt::format("{}: cannot open the model config", config_json_path));
  json config;
  try {
    config = util::parse_json_file(config_json_path);
  } catch (const util::JsonInputError& e) {
    throw ModelConfigError(e.what());
  }
  return from_json(config, config_json_path);
}

ModelConfig ModelConfig::from_json(const json& config, const std::string& source) {
  if (!config.is_object()) throw ModelConfigError(fmt::format("{}: the model config is not a JSON object", source));
  const Reader r(config, source);
  ModelConfig c;
  c.raw = config;
  const ArchInfo& arch = resolve_arch(r);
  c.arch = arch.arch;
  c.model_type = arch.model_type;
  c.architecture = arch.architecture;

  c.vocab_size = r.required_positive("vocab_size");
  c.hidden_size = r.required_positive("hidden_size");
  c.intermediate_size = r.required_positive("intermediate_size");
  c.num_hidden_layers = r.required_positive("num_hidden_layers");
  c.num_attention_heads = r.required_positive("num_attention_heads");
  c.num_key_value_heads = r.optional_positive("num_key_value_heads", c.num_attention_heads);
  if (c.num_attention_heads % c.num_key_value_heads != 0) {
    r.fail("num_key_value_heads", fmt::format("num_attention_heads {} is not divisible by num_key_value_heads {}",
                                              c.num_attention_heads, c.num_key_value_heads));
  }
  if (r.get("head_dim") != nullptr) {
    c.head_dim = r.optional_positive("head_dim", 0);
  } else if (c.arch == Arch::Qwen3) {
    c.head_dim = 128;  // Qwen3Config's default, independent of hidden_size
  } else {
    if (c.hidden_size % c.num_attention_heads != 0) {
      r.fail("hidden_size", fmt::format("{} is not divisible by num_attention_heads {} (and head_dim is not given)",
                                        c.hidden_size, c.num_attention_heads));
    }
    c.head_dim = c.hidden_size / c.num_attention_heads;
  }
  // RoPE rotates pairs of dimensions.
  if (c.head_dim % 2 != 0) r.fail("head_dim", fmt::format("{} must be even for rotary embeddings", c.head_dim));

  c.max_position_embeddings = r.optional_positive("max_position_embeddings", arch.default_max_position_embeddings);
  c.rms_norm_eps = r.number("rms_norm_eps", 1e-6);
  if (!(c.rms_norm_eps > 0)) r.fail("rms_norm_eps", fmt::format("must be positive, got {}", c.rms_norm_eps));
  c.rope_theta = parse_rope_theta(r, source);
  if (!(c.rope_theta > 0)) r.fail("rope_theta", fmt::format("must be positive, got {}", c.rope_theta));
  c.rope_scaling = parse_rope_scaling(r, source);
  c.tie_word_embeddings = r.boolean("tie_word_embeddings", false);

  if (c.arch == Arch::Qwen2) {
    c.attention_bias = true;  // Qwen2Attention hard-codes bias on q/k/v and none on o_proj
    c.o_proj_bias = false;
  } else {
    c.attention_bias = r.boolean("attention_bias", false);
    c.o_proj_bias = c.attention_bias;
  }
  if (c.arch == Arch::Llama && r.boolean("mlp_bias", false)) r.fail("mlp_bias", "true is not supported");
  c.qk_norm = c.arch == Arch::Qwen3;

  c.torch_dtype = r.string("torch_dtype", r.string("dtype", ""));
  c.eos_token_ids = parse_token_ids(r, "eos_token_id");
  if (const json* bos = r.get("bos_token_id")) c.bos_token_id = r.as_int("bos_token_id", *bos);
  return c;
}

json ModelConfig::to_json() const {
  json out = raw.is_object() ? raw : json::object();
  const bool same_class = out.contains("architectures") && out["architectures"].is_array() &&
                          !out["architectures"].empty() && out["architectures"][0] == architecture;
  if (!same_class) out["architectures"] = {architecture};
  set_if_changed(out, "model_type", model_type);
  set_if_changed(out, "vocab_size", vocab_size);
  set_if_changed(out, "hidden_size", hidden_size);
  set_if_changed(out, "intermediate_size", intermediate_size);
  set_if_changed(out, "num_hidden_layers", num_hidden_layers);
  set_if_changed(out, "num_attention_heads", num_attention_heads);
  set_if_changed(out, "num_key_value_heads", num_key_value_heads);
  // Written only where needed, so that a file without it keeps meaning the same to older readers.
  const bool head_dim_derived = arch != Arch::Qwen3 && head_dim * num_attention_heads == hidden_size;
  if (out.contains("head_dim") || !head_dim_derived) set_if_changed(out, "head_dim", head_dim);
  set_if_changed(out, "max_position_embeddings", max_position_embeddings);
  set_if_changed(out, "rms_norm_eps", rms_norm_eps);
  write_rope(out, rope_theta, rope_scaling);
  set_if_changed(out, "tie_word_embeddings", tie_word_embeddings);
  if (arch != Arch::Qwen2) set_if_changed(out, "attention_bias", attention_bias);
  if (!torch_dtype.empty()) {
    // Newer transformers write "dtype"; keep whichever name the file used.
    set_if_changed(out, out.contains("dtype") && !out.contains("torch_dtype") ? "dtype" : "torch_dtype", torch_dtype);
  }
  if (eos_token_ids.empty()) {
    if (out.contains("eos_token_id")) out["eos_token_id"] = nullptr;
  } else if (eos_token_ids.size() == 1 && !(out.contains("eos_token_id") && out["eos_token_id"].is_array())) {
    set_if_changed(out, "eos_token_id", eos_token_ids[0]);
  } else {
    set_if_changed(out, "eos_token_id", eos_token_ids);
  }
  if (bos_token_id) {
    set_if_changed(out, "bos_token_id", *bos_token_id);
  } else if (out.contains("bos_token_id")) {
    out["bos_token_id"] = nullptr;
  }
  return out;
}

std::vector<std::pair<std::string, std::vector<int64_t>>> ModelConfig::parameter_shapes() const {
  const int64_t q_dim = num_attention_heads * head_dim, kv_dim = num_key_value_heads * head_dim;
  std::vector<std::pair<std::string, std::vector<int64_t>>> out;
  out.push_back({"model.embed_tokens.weight", {vocab_size, hidden_size}});
  for (int64_t i = 0; i < num_hidden_layers; ++i) {
    const std::string layer = fmt::format("model.layers.{}.", i);
    out.push_back({layer + "input_layernorm.weight", {hidden_size}});
    const std::array<std::pair<const char*, int64_t>, 3> projections{
        {{"q_proj", q_dim}, {"k_proj", kv_dim}, {"v_proj", kv_dim}}};
    for (const auto& [proj, rows] : projections) {
      out.push_back({layer + "self_attn." + proj + ".weight", {rows, hidden_size}});
      if (attention_bias) out.push_back({layer + "self_attn." + proj + ".bias", {rows}});
    }
    out.push_back({layer + "self_attn.o_proj.weight", {hidden_size, q_dim}});
    if (o_proj_bias) out.push_back({layer + "self_attn.o_proj.bias", {hidden_size}});
    if (qk_norm) {
      out.push_back({layer + "self_attn.q_norm.weight", {head_dim}});
      out.push_back({layer + "self_attn.k_norm.weight", {head_dim}});
    }
    out.push_back({layer + "post_attention_layernorm.weight", {hidden_size}});
    out.push_back({layer + "mlp.gate_proj.weight", {intermediate_size, hidden_size}});
    out.push_back({layer + "mlp.up_proj.weight", {intermediate_size, hidden_size}});
    out.push_back({layer + "mlp.down_proj.weight", {hidden_size, intermediate_size}});
  }
  out.push_back({"model.norm.weight", {hidden_size}});
  if (!tie_word_embeddings) out.push_back({"lm_head.weight", {vocab_size, hidden_size}});
  return out;
}

int64_t ModelConfig::num_parameters() const {
  int64_t total = 0;
  for (const auto& [name, shape] : parameter_shapes()) total += shape_numel(shape);
  return total;
}

}  // namespace grpo::model
