#pragma once
// config.json of the decoder-only architectures we train: Qwen2 (Qwen2.5), Llama (3.x, with llama3
// RoPE scaling) and Qwen3. Keys absent from the file take the defaults of transformers' config
// classes, so a file means here what it means to transformers.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "model/checkpoint_files.h"
#include "util/user_error.h"

namespace grpo::model {

// Messages name the file and the key at fault.
class ModelConfigError : public ::grpo::UserError {
 public:
  using UserError::UserError;
};

enum class Arch { Qwen2, Llama, Qwen3 };

// RoPE frequency scaling; only "llama3" (Llama 3.1+) is accepted: it slows low frequencies by
// factor and interpolates between the low_freq_factor and high_freq_factor wavelengths.
struct RopeScaling {
  std::string type;  // "llama3"
  double factor = 1, low_freq_factor = 1, high_freq_factor = 4;
  int64_t original_max_position_embeddings = 8192;
};

struct ModelConfig {
  Arch arch = Arch::Qwen2;
  std::string model_type;    // "qwen2", "llama", "qwen3"
  std::string architecture;  // "Qwen2ForCausalLM"
  int64_t vocab_size = 0, hidden_size = 0, intermediate_size = 0, num_hidden_layers = 0;
  int64_t num_attention_heads = 0, num_key_value_heads = 0;
  int64_t head_dim = 0;  // may differ from hidden_size / num_attention_heads (Qwen3)
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6, rope_theta = 10000;
  std::optional<RopeScaling> rope_scaling;  // none for plain RoPE (also rope_type "default")
  bool tie_word_embeddings = false;
  bool attention_bias = false;         // q/k/v projections have a bias (always for Qwen2)
  bool o_proj_bias = false;            // o_proj has one too (Llama and Qwen3 with attention_bias)
  bool qk_norm = false;                // RMSNorm over head_dim on queries and keys (Qwen3)
  std::string torch_dtype;             // "bfloat16", ... ("" when unset); newer files call the key "dtype"
  std::vector<int64_t> eos_token_ids;  // config.json may give an int, a list or null
  std::optional<int64_t> bos_token_id;
  nlohmann::json raw;  // the whole file, written back on save

  static ModelConfig load(const std::string& config_json_path);
  // `source` names the origin in messages (a path, or "<test>").
  static ModelConfig from_json(const nlohmann::json& config, const std::string& source);
  // raw, with the fields above written over it.
  nlohmann::json to_json() const;

  // Every parameter of the architecture with its shape, HF names, in the order transformers lists
  // them (lm_head.weight only when the embeddings are not tied).
  std::vector<std::pair<std::string, std::vector<int64_t>>> parameter_shapes() const;
  int64_t num_parameters() const;
};

std::string_view arch_name(Arch arch);  // "Qwen2ForCausalLM", ...

// Every parameter of `config` exists in `files` with its shape and a floating dtype; extra tensors
// are ignored (lm_head.weight of a tied checkpoint, rotary_emb.inv_freq of old Llama exports). Throws
// CheckpointError listing each problem with the tensor, its file and the expected and actual shapes.
void check_tensors(const ModelConfig& config, const CheckpointFiles& files);

}  // namespace grpo::model
