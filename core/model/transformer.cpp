#include "model/transformer.h"

#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <tuple>

#include "model/activation_checkpoint.h"
#include "model/cpu_kernels.h"
#include "model/cpu_small_matmul.h"
#include "model/cuda_kernels.h"
#include "model/packed_proj.h"
#include "model/rope.h"
#include "model/skip_init.h"
#include "model/torch_compat.h"

namespace grpo::model {

namespace nn = torch::nn;

RMSNormImpl::RMSNormImpl(int64_t dim, double eps) : eps_(eps) {
  weight = register_parameter("weight", at::ones({dim}));
}

at::Tensor RMSNormImpl::forward(const at::Tensor& x) {
  if (cpu::applies({x, weight})) return cpu::rms_norm(x, weight, eps_);
  if (gpu::applies({x, weight})) return gpu::rms_norm(x, weight, eps_);
  // In float32 whatever the storage, as Hugging Face does.
  at::Tensor xf = x.to(at::kFloat);
  at::Tensor normed = xf * at::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + eps_);
  return weight * normed.to(x.scalar_type());
}

std::pair<at::Tensor, at::Tensor> RMSNormImpl::add_forward(const at::Tensor& x, const at::Tensor& residual) {
  if (gpu::applies({x, residual, weight})) return gpu::add_rms_norm(x, residual, weight, eps_);
  at::Tensor h = x + residual;
  return {h, forward(h)};
}

AttentionImpl::AttentionImpl(const ModelConfig& c)
    : heads_(c.num_attention_heads), kv_heads_(c.num_key_value_heads), head_dim_(c.head_dim) {
  const bool bias = c.attention_bias;
  q_proj = register_module("q_proj", Proj(c.hidden_size, heads_ * head_dim_, bias));
  k_proj = register_module("k_proj", Proj(c.hidden_size, kv_heads_ * head_dim_, bias));
  v_proj = register_module("v_proj", Proj(c.hidden_size, kv_heads_ * head_dim_, bias));
  // Qwen2 biases q/k/v only; Llama and Qwen3 apply attention_bias to o_proj too.
  const bool o_bias = bias && c.arch != Arch::Qwen2;
  o_proj = register_module("o_proj", Proj(heads_ * head_dim_, c.hidden_size, o_bias));
  if (c.qk_norm) {
    q_norm = register_module("q_norm", RMSNorm(head_dim_, c.rms_norm_eps));
    k_norm = register_module("k_norm", RMSNorm(head_dim_, c.rms_norm_eps));
  }
}

at::Tensor AttentionImpl::forward(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin,
                                  const at::Tensor& mask, LayerKv* cache, size_t layer) {
  const int64_t B = x.size(0), T = x.size(1), q_width = heads_ * head_dim_, kv_width = kv_heads_ * head_dim_;
  at::Tensor q, k, v;
  at::Tensor qkv;  // not with q/k norms: they would copy the strided q and k back out
  if (!q_norm) qkv = packed_forward({q_proj.get(), k_proj.get(), v_proj.get()}, x);
  if (qkv.defined()) {
    q = qkv.narrow(-1, 0, q_width);  // views: the kernels below read them in place
    k = qkv.narrow(-1, q_width, kv_width);
    v = qkv.narrow(-1, q_width + kv_width, kv_width);
  } else {
    q = q_proj(x), k = k_proj(x), v = v_proj(x);
  }
  q = q.view({B, T, heads_, head_dim_});     // [B, T, Hq, D]
  k = k.view({B, T, kv_heads_, head_dim_});  // [B, T, Hkv, D]
  v = v.view({B, T, kv_heads_, head_dim_});
  if (q_norm) {
    q = q_norm(q);
    k = k_norm(k);
  }
  q = q.transpose(1, 2);  // [B, Hq, T, D]
  k = k.transpose(1, 2);  // [B, Hkv, T, D]
  v = v.transpose(1, 2);
  if (cache) std::tie(k, v) = cache->rotate_and_append(layer, k, v, cos, sin);
  else k = apply_rope(k, cos, sin);
  const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim_));
  if (cache)  // decoding slots: q rotated inside their attention
    if (at::Tensor out = cache->rotate_and_attend(layer, q, cos, sin, scale); out.defined()) return o_proj(out);
  q = apply_rope(q, cos, sin);
  const int64_t n_rep = heads_ / kv_heads_;
  // Grouped-query attention, by whichever copy is smaller: the n_rep query
  // heads of one kv head as n_rep * T query rows, which copies the mask n_rep
  // times (none for one row: a decoding step), or the keys and values
  // repeated for every query head (a long prefill, whose mask is T x S).
  if (n_rep > 1 && n_rep * T <= 2 * heads_ * head_dim_) {
    const int64_t S = k.size(2);
    q = q.reshape({B, kv_heads_, n_rep * T, head_dim_});
    at::Tensor grouped_mask = mask.unsqueeze(2).expand({B, 1, n_rep, T, S}).reshape({B, 1, n_rep * T, S});
    at::Tensor out = attention(q, k, v, grouped_mask, scale);
    return o_proj(out.reshape({B, heads_, T, head_dim_}).transpose(1, 2).reshape({B, T, heads_ * head_dim_}));
  }
  if (n_rep > 1) {
    k = k.repeat_interleave(n_rep, 1);
    v = v.repeat_interleave(n_rep, 1);
  }
  at::Tensor out = attention(q, k, v, mask, scale);  // [B, Hq, T, D]
  return o_proj(out.transpose(1, 2).reshape({B, T, heads_ * head_dim_}));
}

MlpImpl::MlpImpl(const ModelConfig& c) {
  gate_proj = register_module("gate_proj", Proj(c.hidden_size, c.intermediate_size, false));
  up_proj = register_module("up_proj", Proj(c.hidden_size, c.intermediate_size, false));
  down_proj = register_module("down_proj", Proj(c.intermediate_size, c.hidden_size, false));
}

at::Tensor MlpImpl::forward(const at::Tensor& x) {
  at::Tensor gate, up;
  if (at::Tensor both = packed_forward({gate_proj.get(), up_proj.get()}, x); both.defined()) {
    const int64_t width = gate_proj->out_features();
    gate = both.narrow(-1, 0, width);  // rows of a stride of 2 * width: the kernels below read them in place
    up = both.narrow(-1, width, width);
  } else {
    gate = gate_proj(x), up = up_proj(x);
  }
  if (cpu::applies({gate, up})) return down_proj(cpu::silu_mul(gate, up));
  if (gpu::applies({gate, up})) return down_proj(gpu::silu_mul(gate, up));
  return down_proj(at::silu(gate) * up);
}

DecoderLayerImpl::DecoderLayerImpl(const ModelConfig& c) {
  self_attn = register_module("self_attn", Attention(c));
  mlp = register_module("mlp", Mlp(c));
  input_layernorm = register_module("input_layernorm", RMSNorm(c.hidden_size, c.rms_norm_eps));
  post_attention_layernorm = register_module("post_attention_layernorm", RMSNorm(c.hidden_size, c.rms_norm_eps));
}

at::Tensor DecoderLayerImpl::forward(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin,
                                     const at::Tensor& mask, LayerKv* cache, size_t layer) {
  at::Tensor h = x + self_attn(input_layernorm(x), cos, sin, mask, cache, layer);
  return h + mlp(post_attention_layernorm(h));
}

void DecoderLayerImpl::decode(at::Tensor& x, at::Tensor& pending, const at::Tensor& cos, const at::Tensor& sin,
                              const at::Tensor& mask, LayerKv* cache, size_t layer) {
  at::Tensor normed;
  if (pending.defined()) std::tie(x, normed) = input_layernorm->add_forward(x, pending);
  else normed = input_layernorm(x);
  std::tie(x, normed) = post_attention_layernorm->add_forward(x, self_attn(normed, cos, sin, mask, cache, layer));
  pending = mlp(normed);
}

DecoderImpl::DecoderImpl(const ModelConfig& c) {
  nn::EmbeddingOptions embedding(c.vocab_size, c.hidden_size);
  if (init_skipped()) embedding._weight(at::empty({c.vocab_size, c.hidden_size}));  // taken as it is, not drawn
  embed_tokens = register_module("embed_tokens", nn::Embedding(embedding));
  layers = register_module("layers", nn::ModuleList());
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) layers->push_back(DecoderLayer(c));
  norm = register_module("norm", RMSNorm(c.hidden_size, c.rms_norm_eps));
}

CausalLMImpl::CausalLMImpl(ModelConfig config) : config_(std::move(config)) {
  model = register_module("model", Decoder(config_));
  if (!config_.tie_word_embeddings) {
    const nn::LinearOptions head = nn::LinearOptions(config_.hidden_size, config_.vocab_size).bias(false);
    if (init_skipped()) {
      // nn::Linear always draws its weight: built empty ([0, 1] draws nothing), then given its shape.
      lm_head = register_module("lm_head", nn::Linear(nn::LinearOptions(1, 0).bias(false)));
      lm_head->weight.set_data(at::empty({config_.vocab_size, config_.hidden_size}));
      lm_head->options = head;
    } else {
      lm_head = register_module("lm_head", nn::Linear(head));
    }
  }
  inv_freq_ = register_buffer("inv_freq", rope_inv_freq(config_));
}

namespace {

// Module::to gives each parameter memory of its own; a model that was
// packed is packed again (one that was not, say a sampler reading another
// model's tensors, is left so). Its copies are blocking then: the packing
// reads them next. move(non_blocking) runs the move.
void move_keeping_packing(CausalLMImpl& model, bool non_blocking, const std::function<void(bool)>& move) {
  const bool packed = model.projections_packed();
  move(non_blocking && !packed);
  if (packed) model.pack_projections();
}

}  // namespace

void CausalLMImpl::to(torch::Device device, torch::Dtype dtype, bool non_blocking) {
  move_keeping_packing(*this, non_blocking, [&](bool non_blocking_now) {
    torch::nn::Module::to(device, dtype, non_blocking_now);
    inv_freq_.set_data(rope_inv_freq(config_).to(device));
  });
}

void CausalLMImpl::to(torch::Dtype dtype, bool non_blocking) {
  move_keeping_packing(*this, non_blocking, [&](bool non_blocking_now) {
    torch::nn::Module::to(dtype, non_blocking_now);
    inv_freq_.set_data(rope_inv_freq(config_).to(inv_freq_.device()));
  });
}

void CausalLMImpl::to(torch::Device device, bool non_blocking) {
  move_keeping_packing(*this, non_blocking,
                       [&](bool non_blocking_now) { torch::nn::Module::to(device, non_blocking_now); });
}

std::vector<ProjGroup> CausalLMImpl::projection_groups() {
  std::vector<ProjGroup> groups;
  for (size_t i = 0; i < model->layers->size(); ++i) {
    auto layer = model->layers->ptr<DecoderLayerImpl>(i);
    AttentionImpl& a = *layer->self_attn;
    if (!a.q_norm) groups.push_back({a.q_proj.get(), a.k_proj.get(), a.v_proj.get()});
    groups.push_back({layer->mlp->gate_proj.get(), layer->mlp->up_proj.get()});
  }
  return groups;
}

void CausalLMImpl::pack_projections() {
  for (const ProjGroup& g : projection_groups()) pack(g, g.front()->weight.options(), /*keep_values=*/true);
}

void CausalLMImpl::pack_projections_empty(const at::Device& device, at::ScalarType dtype) {
  for (const ProjGroup& g : projection_groups())
    pack(g, at::TensorOptions().device(device).dtype(dtype), /*keep_values=*/false);
}

bool CausalLMImpl::projections_packed() {
  for (const ProjGroup& g : projection_groups())
    if (!packed(g)) return false;
  return true;
}

KvCache CausalLMImpl::new_cache() const { return KvCache{}; }

namespace {

// [B, 1, T, S] of 0 where `allowed` [B, T, S] and the dtype's lowest value
// elsewhere: rather than -inf, so that a fully masked (padding) row gives a
// uniform softmax instead of NaN.
at::Tensor additive_mask(const at::Tensor& allowed, at::ScalarType dtype) {
  const double lowest = dtype == at::kFloat ? std::numeric_limits<float>::lowest() : -1e4;
  at::Tensor mask = at::zeros(allowed.sizes(), allowed.options().dtype(dtype));
  return mask.masked_fill_(allowed.logical_not(), lowest).unsqueeze(1);
}

// Additive mask [B, 1, T, S]: query t (at key position S - T + t) sees keys
// s <= S - T + t that are real tokens.
at::Tensor causal_padding_mask(const at::Tensor& key_mask, int64_t T, at::ScalarType dtype) {
  const int64_t S = key_mask.size(1);
  auto opts = at::TensorOptions().device(key_mask.device());
  at::Tensor q_pos = at::arange(S - T, S, opts.dtype(at::kLong)).unsqueeze(1);               // [T, 1]
  at::Tensor k_pos = at::arange(0, S, opts.dtype(at::kLong)).unsqueeze(0);                   // [1, S]
  at::Tensor allowed = (k_pos <= q_pos).unsqueeze(0) & key_mask.to(at::kBool).unsqueeze(1);  // [B, T, S]
  return additive_mask(allowed, dtype);
}

}  // namespace

at::Tensor CausalLMImpl::hidden_states(const at::Tensor& input_ids, const at::Tensor& attention_mask,
                                       const at::Tensor& position_ids, KvCache* cache) {
  const int64_t B = input_ids.size(0), T = input_ids.size(1);
  at::Tensor mask =
      attention_mask.defined() ? attention_mask.to(at::kLong) : at::ones({B, T}, input_ids.options().dtype(at::kLong));
  at::Tensor key_mask = mask;
  if (cache && cache->key_mask.defined()) key_mask = at::cat({cache->key_mask, mask}, 1);
  at::Tensor positions = position_ids;
  if (!positions.defined()) {
    // Position = number of real tokens before this one (left padding shifts nothing).
    positions = (key_mask.cumsum(1) - 1).clamp_min(0).narrow(1, key_mask.size(1) - T, T);
  }
  std::optional<FusedScope> fused;
  if (cache) fused.emplace();                     // decoding: see fused_scope.h
  at::Tensor x = model->embed_tokens(input_ids);  // [B, T, H]
  auto [cos, sin] = rope_cos_sin(inv_freq_, positions, x.scalar_type());
  at::Tensor additive = causal_padding_mask(key_mask, T, x.scalar_type());
  if (cache) {
    at::Tensor out = decode_layers(x, cos, sin, additive, cache);
    cache->key_mask = key_mask;
    return out;
  }
  const bool recompute = gradient_checkpointing_ && at::GradMode::is_enabled();
  for (size_t i = 0; i < model->layers->size(); ++i) {
    auto layer = model->layers->ptr<DecoderLayerImpl>(i);
    if (recompute)
      x = checkpointed([layer, c = cos, s = sin, additive, i](const at::Tensor& h) {
        return layer->forward(h, c, s, additive, nullptr, i);
      }, x);
    else
      x = layer->forward(x, cos, sin, additive, nullptr, i);
  }
  return model->norm(x);
}

at::Tensor CausalLMImpl::decode_layers(at::Tensor x, const at::Tensor& cos, const at::Tensor& sin,
                                       const at::Tensor& mask, LayerKv* cache) {
  at::Tensor pending;
  for (size_t i = 0; i < model->layers->size(); ++i)
    model->layers->ptr<DecoderLayerImpl>(i)->decode(x, pending, cos, sin, mask, cache, i);
  return pending.defined() ? model->norm->add_forward(x, pending).second : model->norm(x);
}

at::Tensor CausalLMImpl::decode_slots(const at::Tensor& tokens, const at::Tensor& positions, SlotCache& cache,
                                      int64_t span) {
  const int64_t b = tokens.size(0);
  FusedScope fused;  // decoding: see fused_scope.h
  cache.set_step(positions, span);
  at::Tensor x = model->embed_tokens(tokens.view({b, 1}));  // [b, 1, H]
  // A slot's keys are its own sequence's up to its position; later ones are
  // stale (a finished row's) or unwritten.
  at::Tensor cos, sin, additive;
  if (gpu::applies({x}) && inv_freq_.device() == x.device()) {
    std::tie(cos, sin, additive) = gpu::step_prelude(positions, inv_freq_, span, x.scalar_type());
  } else {
    std::tie(cos, sin) = rope_cos_sin(inv_freq_, positions.view({b, 1}), x.scalar_type());
    at::Tensor key_pos = at::arange(span, positions.options()).view({1, span});
    additive = additive_mask((key_pos <= positions.view({b, 1})).view({b, 1, span}), x.scalar_type());
  }
  return logits(decode_layers(x, cos, sin, additive, &cache).view({b, -1}));
}

at::Tensor CausalLMImpl::logits(const at::Tensor& hidden) {
  const at::Tensor& weight = lm_head ? lm_head->weight : model->embed_tokens->weight;  // tied: the embedding
  if (at::Tensor y = cpu::small_linear(hidden, weight, {}); y.defined()) return y;
  return lm_head ? lm_head(hidden) : at::matmul(hidden, weight.t());
}

}  // namespace grpo::model
