#include "model/lora.h"

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <torch/utils.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace grpo::model {

namespace {

constexpr const char* kAllLinear = "all-linear";

// "model.layers.0.self_attn.q_proj" -> "q_proj"
std::string leaf_name(const std::string& qualified) {
  const size_t dot = qualified.rfind('.');
  return dot == std::string::npos ? qualified : qualified.substr(dot + 1);
}

void check_options(const LoraOptions& o) {
  if (o.rank <= 0) throw std::invalid_argument(fmt::format("lora_rank must be a positive integer, got {}", o.rank));
  if (!(o.alpha > 0)) throw std::invalid_argument(fmt::format("lora_alpha must be > 0, got {}", o.alpha));
  if (!(o.dropout >= 0 && o.dropout < 1))
    throw std::invalid_argument(fmt::format("lora_dropout must lie in [0, 1), got {}", o.dropout));
}

}  // namespace

const std::vector<std::string>& lora_module_names() {
  static const std::vector<std::string> names = {"q_proj", "k_proj", "v_proj", "o_proj",
                                                 "gate_proj", "up_proj", "down_proj"};
  return names;
}

std::vector<std::string> resolve_target_modules(const std::vector<std::string>& target_modules) {
  const auto& valid = lora_module_names();
  if (target_modules.empty())
    throw std::invalid_argument(
        fmt::format("target_modules is empty; give all-linear or names among {}", fmt::join(valid, ", ")));
  std::vector<std::string> out;
  for (const std::string& name : target_modules) {
    if (name == kAllLinear) {
      out.insert(out.end(), valid.begin(), valid.end());
    } else if (std::find(valid.begin(), valid.end(), name) != valid.end()) {
      out.push_back(name);
    } else {
      throw std::invalid_argument(fmt::format(
          "target_modules: unknown module '{}'; valid names are all-linear or {} (lm_head and the embeddings "
          "are not adapted)",
          name, fmt::join(valid, ", ")));
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<std::pair<std::string, std::shared_ptr<ProjImpl>>> projections(CausalLMImpl& model, bool adapted_only) {
  std::vector<std::pair<std::string, std::shared_ptr<ProjImpl>>> out;
  for (const auto& item : model.named_modules("", /*include_self=*/false)) {
    auto proj = std::dynamic_pointer_cast<ProjImpl>(item.value());
    if (proj && (!adapted_only || proj->has_adapter())) out.emplace_back(item.key(), std::move(proj));
  }
  return out;
}

bool has_adapters(CausalLMImpl& model) { return !projections(model, true).empty(); }

std::string adapter_mismatch(CausalLMImpl& model, const LoraOptions& options) {
  std::vector<std::string> targets;
  try {
    targets = resolve_target_modules(options.target_modules);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  std::vector<std::string> attached;
  for (auto& [name, proj] : projections(model, true)) {
    attached.push_back(leaf_name(name));
    if (proj->lora_A.size(0) != options.rank || std::abs(proj->scaling() - options.scaling()) > 1e-12)
      return fmt::format("lora rank {} / alpha {} (scaling {}) differ from the adapter of {} (rank {}, scaling {})",
                         options.rank, options.alpha, options.scaling(), name, proj->lora_A.size(0), proj->scaling());
  }
  std::sort(attached.begin(), attached.end());
  attached.erase(std::unique(attached.begin(), attached.end()), attached.end());
  if (attached != targets)
    return fmt::format("target_modules ({}) differ from the adapted modules ({})", fmt::join(targets, ", "),
                       fmt::join(attached, ", "));
  return "";
}

bool is_adapter_parameter(const std::string& name) {
  return name.find(".lora_A.") != std::string::npos || name.find(".lora_B.") != std::string::npos;
}

std::vector<at::Tensor> adapter_parameters(CausalLMImpl& model) {
  std::vector<at::Tensor> out;
  for (const auto& item : model.named_parameters())
    if (is_adapter_parameter(item.key())) out.push_back(item.value());
  return out;
}

void apply_lora(CausalLMImpl& model, const LoraOptions& options) {
  check_options(options);
  const std::vector<std::string> targets = resolve_target_modules(options.target_modules);
  if (has_adapters(model))
    throw std::logic_error("apply_lora: the model already carries LoRA adapters; apply it once, to a base model");
  torch::NoGradGuard no_grad;
  for (at::Tensor& p : model.parameters()) p.requires_grad_(false);
  // One generator drawn in layer order: the same seed gives the same adapters
  // whatever the device.
  at::Generator gen = at::detail::createCPUGenerator(options.seed);
  int64_t trainable = 0;
  size_t attached = 0;
  for (auto& [name, proj] : projections(model, false)) {
    if (!std::binary_search(targets.begin(), targets.end(), leaf_name(name))) continue;
    const at::ScalarType dtype = proj->weight.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
    const auto opts = at::TensorOptions().dtype(dtype).device(proj->weight.device());
    const int64_t in = proj->in_features(), out = proj->out_features();
    // PEFT's kaiming_uniform_(a = sqrt(5)) on [rank, in]: U(-1/sqrt(in), 1/sqrt(in)).
    const double bound = 1.0 / std::sqrt(static_cast<double>(in));
    at::Tensor a = at::empty({options.rank, in}, at::kFloat).uniform_(-bound, bound, gen).to(opts);
    proj->attach_adapter(a, at::zeros({out, options.rank}, opts), options.scaling(), options.dropout);
    trainable += (in + out) * options.rank;
    ++attached;
  }
  for (at::Tensor& p : adapter_parameters(model)) p.requires_grad_(true);
  int64_t total = 0;
  for (const at::Tensor& p : model.parameters()) total += p.numel();
  spdlog::info("LoRA rank {} alpha {} on {} projections ({}): {} trainable parameters of {} ({:.3f}%)", options.rank,
               options.alpha, attached, fmt::join(targets, ", "), trainable, total,
               100.0 * static_cast<double>(trainable) / static_cast<double>(std::max<int64_t>(total, 1)));
}

void set_adapters_enabled(CausalLMImpl& model, bool enabled) {
  for (auto& item : projections(model, true)) item.second->set_adapter_enabled(enabled);
}

AdaptersDisabled::AdaptersDisabled(CausalLMImpl& model) {
  for (auto& item : projections(model, true)) {
    saved_.emplace_back(item.second, item.second->adapter_enabled());
    item.second->set_adapter_enabled(false);
  }
}

AdaptersDisabled::~AdaptersDisabled() {
  for (auto& [proj, enabled] : saved_) proj->set_adapter_enabled(enabled);
}

std::map<std::string, at::Tensor> merged_weight_buffers(CausalLMImpl& model) {
  std::map<const ProjImpl*, std::string> adapted;
  for (auto& [name, proj] : projections(model, true)) adapted.emplace(proj.get(), name + ".weight");
  std::map<std::string, at::Tensor> out;
  // A group whose every projection is adapted (all-linear LoRA) gets its
  // buffers side by side, as the packed weights lie (packed_proj.h): a
  // sampler reading the merged weights multiplies by them in one product.
  for (const ProjGroup& group : model.projection_groups()) {
    int64_t rows = 0;
    bool all = true;
    for (const ProjImpl* p : group) {
      all = all && adapted.count(p) > 0;
      rows += p->out_features();
    }
    if (!all) continue;
    const at::Tensor buffer = at::empty({rows, group.front()->in_features()}, group.front()->weight.options());
    int64_t offset = 0;
    for (const ProjImpl* p : group) {
      out.emplace(adapted.at(p), buffer.narrow(0, offset, p->out_features()));
      offset += p->out_features();
    }
  }
  for (auto& [proj, name] : adapted)
    if (!out.count(name)) out.emplace(name, at::empty_like(proj->weight));
  return out;
}

void merge_lora_into(CausalLMImpl& model, std::map<std::string, at::Tensor>& out) {
  torch::NoGradGuard no_grad;
  for (auto& [name, proj] : projections(model, true)) {
    const std::string key = name + ".weight";
    auto it = out.find(key);
    if (it == out.end())
      throw std::invalid_argument("merge_lora_into: no buffer for '" + key + "'; make them with merged_weight_buffers");
    at::Tensor& dst = it->second;
    if (dst.sizes() != proj->weight.sizes())
      throw std::invalid_argument("merge_lora_into: buffer '" + key + "' has shape " + c10::str(dst.sizes()) +
                                  ", the weight " + c10::str(proj->weight.sizes()));
    // The factors are small ([out, r], [r, in]); converting them is cheap,
    // and addmm_ accumulates into dst without an [out, in] temporary.
    const auto opts = dst.options();
    dst.copy_(proj->weight);
    dst.addmm_(proj->lora_B.to(opts), proj->lora_A.to(opts), /*beta=*/1.0, /*alpha=*/proj->scaling());
  }
}

std::vector<std::pair<std::string, at::Tensor>> merged_state(CausalLMImpl& model) {
  std::map<std::string, at::Tensor> merged = merged_weight_buffers(model);
  merge_lora_into(model, merged);
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const auto& item : model.named_parameters()) {
    if (is_adapter_parameter(item.key())) continue;
    auto it = merged.find(item.key());
    out.emplace_back(item.key(), it != merged.end() ? it->second : item.value().detach());
  }
  return out;
}

}  // namespace grpo::model
