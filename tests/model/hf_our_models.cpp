#include "hf_our_models.h"

#include <cctype>

#include "hf_oracle.h"
#include "model/presets.h"

namespace grpo::test {

model::CausalLM our_model(const std::string& arch, uint64_t seed) {
  const std::string base = arch == "llama3" ? "llama" : arch == "qwen2.5" ? "qwen2" : arch;
  nlohmann::json c = model::preset_config(base, "tiny", 257);
  c["num_hidden_layers"] = 3;
  c["rope_theta"] = 1e6;
  if (arch == "qwen2.5") {
    c["tie_word_embeddings"] = false;
    c["use_sliding_window"] = false;
    c["sliding_window"] = 131072;
    c["bos_token_id"] = 1;
    c["eos_token_id"] = 2;
  } else if (arch == "qwen3") {
    c["head_dim"] = 32;  // wider than hidden_size / heads
  } else if (arch == "llama3") {
    c["tie_word_embeddings"] = false;
    c["rope_theta"] = 500000.0;
    c["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0},
                         {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 64}};
  }
  model::CausalLM lm(model::ModelConfig::from_json(c, "hf_our_models"));
  randomize_all(*lm, seed);
  return lm;
}

std::string arch_test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = info.param;
  for (char& ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return name;
}

}  // namespace grpo::test
