#include "model/presets.h"

#include <algorithm>
#include <stdexcept>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <torch/types.h>
#include <torch/utils.h>

namespace grpo::model {

namespace {

struct Preset {
  const char* name;
  int64_t hidden, intermediate, layers, heads, kv_heads;
  int64_t vocab;  // 0: the tokenizer's size
  double rope_theta;
  int64_t max_positions;
  const char* purpose;
  bool untied = false;  // an lm_head of its own
};

// ~parameters without embeddings: tiny 0.1M, small 3.1M, base25m 25M. The
// qwen2.5-* shapes are those models' exact configs (vocabulary 151,936, or
// 152,064 for 7B, padded past the tokenizer's 151,665), for benchmarks at a
// real model's size.
const Preset kPresets[] = {
    {"tiny", 64, 128, 2, 4, 2, 0, 10000.0, 4096, "unit tests"},
    {"small", 256, 768, 4, 4, 2, 0, 10000.0, 4096, "the quickstart demo"},
    {"base25m", 512, 1536, 8, 8, 4, 0, 10000.0, 4096, "benchmarks (~25M parameters)"},
    {"qwen2.5-0.5b", 896, 4864, 24, 14, 2, 151936, 1000000.0, 32768, "Qwen2.5-0.5B's shape (494M parameters)"},
    {"qwen2.5-1.5b", 1536, 8960, 28, 12, 2, 151936, 1000000.0, 32768, "Qwen2.5-1.5B's shape (1.54B parameters)"},
    {"qwen2.5-7b", 3584, 18944, 28, 28, 4, 152064, 1000000.0, 131072, "Qwen2.5-7B's shape (7.62B parameters)", true},
};

}  // namespace

std::vector<std::string> preset_names() {
  std::vector<std::string> out;
  for (const Preset& p : kPresets) out.push_back(p.name);
  return out;
}

nlohmann::json preset_config(const std::string& arch, const std::string& preset, int64_t vocab_size) {
  const Preset* p = nullptr;
  for (const Preset& candidate : kPresets)
    if (preset == candidate.name) p = &candidate;
  if (!p) {
    std::string names;
    for (const Preset& candidate : kPresets) names += std::string(names.empty() ? "" : ", ") + candidate.name;
    throw std::invalid_argument("unknown preset '" + preset + "'; choose one of " + names);
  }
  nlohmann::json c = {{"hidden_size", p->hidden},
                      {"intermediate_size", p->intermediate},
                      {"num_hidden_layers", p->layers},
                      {"num_attention_heads", p->heads},
                      {"num_key_value_heads", p->kv_heads},
                      {"vocab_size", std::max(vocab_size, p->vocab)},
                      {"max_position_embeddings", p->max_positions},
                      {"rms_norm_eps", 1e-6},
                      {"rope_theta", p->rope_theta},
                      {"hidden_act", "silu"},
                      {"initializer_range", 0.02},
                      {"tie_word_embeddings", !p->untied},
                      {"torch_dtype", "float32"},
                      {"use_cache", true},
                      {"bos_token_id", nullptr},
                      {"eos_token_id", nullptr}};
  if (arch == "qwen2") {
    c["architectures"] = {"Qwen2ForCausalLM"};
    c["model_type"] = "qwen2";
  } else if (arch == "llama") {
    c["architectures"] = {"LlamaForCausalLM"};
    c["model_type"] = "llama";
    c["attention_bias"] = false;
    c["mlp_bias"] = false;
  } else if (arch == "qwen3") {
    c["architectures"] = {"Qwen3ForCausalLM"};
    c["model_type"] = "qwen3";
    c["head_dim"] = p->hidden / p->heads;
    c["attention_bias"] = false;
  } else {
    throw std::invalid_argument("unknown architecture '" + arch + "'; choose qwen2, llama or qwen3");
  }
  return c;
}

void init_weights(CausalLMImpl& model, uint64_t seed, double std) {
  torch::NoGradGuard no_grad;
  const at::Device device = model.parameters().at(0).device();
  // On a GPU a generator of its own, seeded: the CPU's draws, serial, take about a minute at 7B.
  at::Generator gen = device.is_cpu() ? at::detail::createCPUGenerator(seed)
                                      : at::globalContext().defaultGenerator(device).clone();
  if (!device.is_cpu()) gen.set_current_seed(seed);
  for (auto& item : model.named_parameters()) {
    at::Tensor& p = item.value();
    const std::string& name = item.key();
    if (p.dim() == 2) {
      p.copy_(at::normal(0.0, std, p.sizes(), gen, p.options().device(gen.device())));
    } else if (name.size() >= 5 && name.compare(name.size() - 5, 5, ".bias") == 0) {
      p.zero_();
    } else {
      p.fill_(1.0);  // RMSNorm weights
    }
  }
}

}  // namespace grpo::model
