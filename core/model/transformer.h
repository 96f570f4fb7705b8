// Decoder-only transformers of the Qwen2 / Llama / Qwen3 families, in the
// LibTorch C++ frontend's style. Parameters carry Hugging Face's names
// (model.layers.0.self_attn.q_proj.weight, ...), so checkpoints load and save
// by name. The projections of the decoder layers may carry LoRA adapters
// (model/lora.h); lm_head never does.
#pragma once

#include <utility>
#include <vector>

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include "model/kv_cache.h"
#include "model/model_config.h"
#include "model/packed_proj.h"
#include "model/proj.h"
#include "model/slot_cache.h"

namespace grpo::model {

class RMSNormImpl : public torch::nn::Module {
 public:
  RMSNormImpl(int64_t dim, double eps);
  at::Tensor forward(const at::Tensor& x);
  // (x + residual, forward(x + residual)): one kernel on a GPU while decoding.
  std::pair<at::Tensor, at::Tensor> add_forward(const at::Tensor& x, const at::Tensor& residual);
  at::Tensor weight;

 private:
  double eps_;
};
TORCH_MODULE(RMSNorm);

class AttentionImpl : public torch::nn::Module {
 public:
  explicit AttentionImpl(const ModelConfig& config);
  // x: [B, T, H]; cos/sin: [B, T, D]; mask: additive [B, 1, T, S]. With a
  // cache, this call's keys/values are appended to layer `layer` first.
  at::Tensor forward(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, const at::Tensor& mask,
                     LayerKv* cache, size_t layer);

  Proj q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, o_proj{nullptr};
  RMSNorm q_norm{nullptr}, k_norm{nullptr};  // Qwen3 only

 private:
  int64_t heads_, kv_heads_, head_dim_;
};
TORCH_MODULE(Attention);

class MlpImpl : public torch::nn::Module {
 public:
  explicit MlpImpl(const ModelConfig& config);
  at::Tensor forward(const at::Tensor& x);  // down(silu(gate(x)) * up(x))
  Proj gate_proj{nullptr}, up_proj{nullptr}, down_proj{nullptr};
};
TORCH_MODULE(Mlp);

class DecoderLayerImpl : public torch::nn::Module {
 public:
  explicit DecoderLayerImpl(const ModelConfig& config);
  at::Tensor forward(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, const at::Tensor& mask,
                     LayerKv* cache, size_t layer);
  // The same layer with each residual add left to the normalisation after
  // it (RMSNorm::add_forward): the input is x + pending (x alone while
  // pending is undefined), and on return x + pending is the output.
  void decode(at::Tensor& x, at::Tensor& pending, const at::Tensor& cos, const at::Tensor& sin, const at::Tensor& mask,
              LayerKv* cache, size_t layer);
  Attention self_attn{nullptr};
  Mlp mlp{nullptr};
  RMSNorm input_layernorm{nullptr}, post_attention_layernorm{nullptr};
};
TORCH_MODULE(DecoderLayer);

// The body ("model." in Hugging Face names).
class DecoderImpl : public torch::nn::Module {
 public:
  explicit DecoderImpl(const ModelConfig& config);
  torch::nn::Embedding embed_tokens{nullptr};
  torch::nn::ModuleList layers{nullptr};
  RMSNorm norm{nullptr};
};
TORCH_MODULE(Decoder);

class CausalLMImpl : public torch::nn::Module {
 public:
  explicit CausalLMImpl(ModelConfig config);

  // Final hidden states [B, T, H] for input_ids [B, T].
  // attention_mask [B, T]: 1 = token, 0 = padding (left or right); undefined = all tokens.
  // position_ids [B, T]: undefined = counted from the mask.
  // cache: when given, input_ids continue the cached sequences (prefill or
  // one decoding step) and the cache grows by T.
  at::Tensor hidden_states(const at::Tensor& input_ids, const at::Tensor& attention_mask = {},
                           const at::Tensor& position_ids = {}, KvCache* cache = nullptr);

  // Logits [.., V] of hidden states [.., H] (the tied embedding when tie_word_embeddings).
  at::Tensor logits(const at::Tensor& hidden);

  at::Tensor forward(const at::Tensor& input_ids, const at::Tensor& attention_mask = {}) {
    return logits(hidden_states(input_ids, attention_mask));
  }

  // An empty cache for this model.
  KvCache new_cache() const;

  // Logits [b, V] of one decoding step of the first b slots of `cache`:
  // tokens [b] int64 fed at positions [b] int64, each slot attending over its
  // own keys 0..position among the first `span`. Device operations only, of
  // shapes fixed by (b, span): what a CUDA graph captures.
  at::Tensor decode_slots(const at::Tensor& tokens, const at::Tensor& positions, SlotCache& cache, int64_t span);

  // Training forwards (grad on, no cache) keep only each layer's input and
  // recompute the layer in backward.
  void set_gradient_checkpointing(bool on) { gradient_checkpointing_ = on; }

  const ModelConfig& config() const { return config_; }

  // As Module::to, but the rotary frequencies stay float32 (as Hugging Face
  // keeps them): rounded to bfloat16, a position's angle drifts by radians
  // within a few thousand tokens.
  // A packed model (pack_projections) stays packed.
  using torch::nn::Module::to;
  void to(torch::Device device, torch::Dtype dtype, bool non_blocking = false) override;
  void to(torch::Dtype dtype, bool non_blocking = false) override;
  void to(torch::Device device, bool non_blocking = false) override;

  // Each layer's projections of one input that sampling multiplies by in one
  // product (model/packed_proj.h): q/k/v (not where q/k norms follow them)
  // and gate/up.
  std::vector<ProjGroup> projection_groups();
  // Lays each group's weights out as one matrix, values kept. The loaders
  // do it; a model aliasing another's tensors gets memory of its own by it.
  void pack_projections();
  // The same with uninitialised memory on `device` in `dtype`, for a model
  // whose weights are loaded next (build_empty).
  void pack_projections_empty(const at::Device& device, at::ScalarType dtype);
  // Whether every group is packed.
  bool projections_packed();

  Decoder model{nullptr};
  torch::nn::Linear lm_head{nullptr};  // null when tied

 private:
  // The layers and the final norm over a cache (prefill or decoding).
  at::Tensor decode_layers(at::Tensor x, const at::Tensor& cos, const at::Tensor& sin, const at::Tensor& mask,
                           LayerKv* cache);

  ModelConfig config_;
  at::Tensor inv_freq_;  // [head_dim / 2], a buffer
  bool gradient_checkpointing_ = false;
};
TORCH_MODULE(CausalLM);

}  // namespace grpo::model
