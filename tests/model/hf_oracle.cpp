#include "hf_oracle.h"

#include <gtest/gtest.h>
#include <torch/types.h>
#include <torch/utils.h>

#include <ATen/CPUGeneratorImpl.h>

#include <filesystem>
#include <limits>

#include "model/safetensors.h"
#include "oracles/python_oracle.h"
#include "model/weights.h"

namespace grpo::test {

namespace fs = std::filesystem;

std::string fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("grpo_hf_oracle_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

void run_hf_oracle(const std::string& args, const std::string& log_dir) {
  const std::string failure =
      run_python(oracle_script("hf_models.py") + " " + args, fs::path(log_dir) / "oracle.log");
  ASSERT_TRUE(failure.empty()) << failure;
}

HfLogits read_hf_logits(const std::string& path) {
  auto file = model::SafetensorsFile::open(path);
  auto get = [&](const char* name) {
    const model::TensorView* v = file->find(name);
    if (v == nullptr) throw std::runtime_error(path + ": no tensor " + name);
    return model::tensor_view(*v).clone();
  };
  return {get("input_ids"), get("attention_mask"), get("logits")};
}

double max_logit_difference(model::CausalLMImpl& model, const HfLogits& want) {
  torch::NoGradGuard no_grad;
  const at::Tensor ours = model.forward(want.input_ids, want.attention_mask);
  if (ours.sizes() != want.logits.sizes()) return std::numeric_limits<double>::infinity();
  const at::Tensor tokens = want.attention_mask.to(at::kBool).unsqueeze(-1);  // [B, T, 1]
  return (ours - want.logits).abs().masked_select(tokens).max().item<double>();
}

void randomize_all(model::CausalLMImpl& model, uint64_t seed) {
  torch::NoGradGuard no_grad;
  at::Generator gen = at::detail::createCPUGenerator(seed);
  for (auto& item : model.named_parameters()) {
    at::Tensor& p = item.value();
    const std::string& name = item.key();
    const at::Tensor draw = at::normal(0.0, 1.0, p.sizes(), gen, p.options());
    if (p.dim() == 2) {
      p.copy_(0.2 * draw);
    } else if (name.size() >= 5 && name.compare(name.size() - 5, 5, ".bias") == 0) {
      p.copy_(0.5 * draw);
    } else {
      p.copy_(1 + 0.2 * draw);  // RMSNorm weights
    }
  }
}

}  // namespace grpo::test
