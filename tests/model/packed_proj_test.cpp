// Packed projections (model/packed_proj.h): a loaded model's q/k/v and
// gate/up weights are rows of one matrix each, sampling multiplies by each
// matrix once, and everything else — names, values, gradients, optimizer
// updates, checkpoints — sees the parameters it saw before. The oracle is the
// same model with parameters of their own (built and loaded unpacked).
#include <gtest/gtest.h>
#include <torch/types.h>
#include <torch/utils.h>

#include <ATen/DLConvertor.h>

#include <filesystem>
#include <string>

#include "model/engine.h"
#include "model/fused_scope.h"
#include "model/lora.h"
#include "model/packed_proj.h"
#include "model/weights.h"

namespace grpo::model {
namespace {

namespace fs = std::filesystem;

const std::string kDir = GRPO_TEST_DATA_DIR "/tiny-qwen2";

// The model of kDir with every parameter in storage of its own.
CausalLM unpacked() {
  CausalLM lm(ModelConfig::load(kDir + "/config.json"));
  load_weights(*lm, CheckpointFiles::open(kDir));
  return lm;
}

AttentionImpl& attention(CausalLM& lm, size_t layer) { return *lm->model->layers->ptr<DecoderLayerImpl>(layer)->self_attn; }
MlpImpl& mlp(CausalLM& lm, size_t layer) { return *lm->model->layers->ptr<DecoderLayerImpl>(layer)->mlp; }

double max_difference(const at::Tensor& a, const at::Tensor& b) { return (a - b).abs().max().item<double>(); }

// A prefill of 2 x 7 ids and one decoding step with a KV cache (inside the
// model's FusedScope): the step's logits.
at::Tensor decoded_logits(CausalLM& lm) {
  torch::NoGradGuard no_grad;
  const at::Tensor ids = at::arange(14, at::kLong).view({2, 7}).mul(37).remainder(300);
  KvCache cache = lm->new_cache();
  lm->hidden_states(ids, {}, {}, &cache);
  return lm->logits(lm->hidden_states(at::tensor({5, 211}, at::kLong).view({2, 1}), {}, {}, &cache));
}

TEST(PackedProjections, ALoadedModelIsPackedWithTheParametersItHadBefore) {
  CausalLM lm = load_model(kDir), own = unpacked();
  EXPECT_TRUE(lm->projections_packed());
  EXPECT_FALSE(own->projections_packed());
  auto packed_params = lm->named_parameters(), own_params = own->named_parameters();
  ASSERT_EQ(packed_params.size(), own_params.size());
  for (const auto& item : own_params) {
    const at::Tensor& p = packed_params[item.key()];
    EXPECT_TRUE(p.is_leaf() && p.requires_grad() && p.is_contiguous()) << item.key();
    EXPECT_TRUE(at::equal(p, item.value())) << item.key();
  }
  AttentionImpl& a = attention(lm, 1);
  EXPECT_EQ(static_cast<const char*>(a.k_proj->weight.data_ptr()),
            static_cast<const char*>(a.q_proj->weight.data_ptr()) + a.q_proj->weight.nbytes());
  EXPECT_TRUE(a.v_proj->bias.is_alias_of(a.q_proj->bias));
  // Saved, the files are those of the model unpacked.
  const fs::path dir = fs::temp_directory_path() / "grpo_packed_proj_save";
  fs::remove_all(dir);
  save_model(*lm, dir.string());
  CausalLM again = load_model(dir.string());
  for (const auto& item : again->named_parameters())
    EXPECT_TRUE(at::equal(item.value(), own_params[item.key()])) << item.key();
  fs::remove_all(dir);
}

TEST(PackedProjections, OneProductGivesEachProjectionsColumnsOnlyWhereSamplingReadsIt) {
  CausalLM lm = load_model(kDir);
  AttentionImpl& a = attention(lm, 0);
  const at::Tensor x = at::randn({3, 2, 64});
  {
    torch::NoGradGuard no_grad;
    EXPECT_FALSE(packed_forward({a.q_proj.get(), a.k_proj.get(), a.v_proj.get()}, x).defined()) << "no FusedScope";
    FusedScope fused;
    const at::Tensor both = packed_forward({a.q_proj.get(), a.k_proj.get(), a.v_proj.get()}, x);
    ASSERT_TRUE(both.defined());
    const at::Tensor want = at::cat({a.q_proj(x), a.k_proj(x), a.v_proj(x)}, -1);
    EXPECT_LT(max_difference(both, want), 1e-6);
  }
  FusedScope fused;  // training's passes want gradients: never packed
  EXPECT_FALSE(packed_forward({a.q_proj.get(), a.k_proj.get(), a.v_proj.get()}, x).defined());
}

TEST(PackedProjections, DecodingGivesTheLogitsAndGreedyIdsOfTheModelUnpacked) {
  CausalLM lm = load_model(kDir), own = unpacked();
  const int64_t before = packed_forward_count();
  const at::Tensor got = decoded_logits(lm);
  EXPECT_EQ(packed_forward_count() - before, 2 * 2 * 2) << "2 forwards, 2 layers, 2 groups each";
  EXPECT_LT(max_difference(got, decoded_logits(own)), 1e-5);
  EXPECT_EQ(packed_forward_count() - before, 8) << "the unpacked model runs its products one by one";
  SamplingParams p;
  p.max_new_tokens = 12;
  p.top_k = 1;
  const std::vector<int32_t> prompt = {93, 283, 208, 107, 40, 235, 119};
  for (EngineOptions::Decode decode : {EngineOptions::Decode::Eager, EngineOptions::Decode::Slots}) {
    EngineOptions o;
    o.decode = decode;
    Engine packed_engine(lm, nullptr, o), own_engine(own, nullptr, o);
    EXPECT_EQ(packed_engine.generate({{prompt, 2, 1, {}}}, p)[0].ids, own_engine.generate({{prompt, 2, 1, {}}}, p)[0].ids);
  }
}

TEST(PackedProjections, LoraTermsLandInTheirOwnProjectionsColumns) {
  CausalLM lm = load_model(kDir);
  LoraOptions o;
  o.dropout = 0;  // the module trains: dropout would draw other masks for each pass
  apply_lora(*lm, o);
  {
    torch::NoGradGuard no_grad;
    for (auto& item : lm->named_parameters())
      if (item.key().find("lora_B") != std::string::npos) item.value().normal_(0, 0.1);  // zero at first: no test
  }
  MlpImpl& m = mlp(lm, 1);
  const at::Tensor x = at::randn({2, 3, 64});
  torch::NoGradGuard no_grad;
  FusedScope fused;
  for (bool enabled : {true, false}) {
    m.gate_proj->set_adapter_enabled(enabled);
    m.up_proj->set_adapter_enabled(enabled);
    const at::Tensor both = packed_forward({m.gate_proj.get(), m.up_proj.get()}, x);
    ASSERT_TRUE(both.defined());
    EXPECT_LT(max_difference(both, at::cat({m.gate_proj(x), m.up_proj(x)}, -1)), 1e-6) << "adapters on: " << enabled;
  }
  const at::Tensor base = at::linear(x, m.up_proj->weight);
  const int64_t width = m.up_proj->out_features();
  EXPECT_LT(max_difference(packed_forward({m.gate_proj.get(), m.up_proj.get()}, x).narrow(-1, width, width), base),
            1e-6);
}

// merged_weight_buffers (what a LoRA run hands its sampler) lays a group's
// merged weights side by side: the sampler's products are packed too.
TEST(PackedProjections, MergedLoraWeightsOfAGroupLieSideBySide) {
  CausalLM lm = load_model(kDir);
  LoraOptions o;
  o.dropout = 0;
  apply_lora(*lm, o);
  auto merged = merged_weight_buffers(*lm);
  merge_lora_into(*lm, merged);
  CausalLM sampler = load_model(kDir);
  {
    torch::NoGradGuard no_grad;
    for (auto& item : sampler->named_parameters())
      if (auto it = merged.find(item.key()); it != merged.end()) item.value().set_data(it->second);
  }
  EXPECT_TRUE(sampler->projections_packed());
  // Adapters on q and v only: k's weight is the base's, q's and v's buffers stand alone.
  CausalLM partial = load_model(kDir);
  o.target_modules = {"q_proj", "v_proj"};
  apply_lora(*partial, o);
  auto apart = merged_weight_buffers(*partial);
  EXPECT_EQ(apart.size(), 4u);
  EXPECT_EQ(apart.count("model.layers.0.self_attn.k_proj.weight"), 0u);
}

// A sampler aliasing the trainer's tensors gets each as a tensor of its own
// over the same memory (DLPack): packed all the same, and reading the
// trainer's updates through its one product.
TEST(PackedProjections, AModelAliasingAPackedModelsTensorsIsPackedAndSeesItsUpdates) {
  CausalLM trainer = load_model(kDir), sampler = build_empty(trainer->config(), at::kCPU, at::kFloat);
  {
    torch::NoGradGuard no_grad;
    auto given = trainer->named_parameters();
    for (auto& item : sampler->named_parameters()) {
      const at::Tensor alias = at::fromDLPack(at::toDLPack(given[item.key()].detach()));
      EXPECT_FALSE(alias.is_alias_of(given[item.key()])) << "a storage of its own";
      item.value().set_data(alias);
    }
  }
  EXPECT_TRUE(sampler->projections_packed());
  sampler->pack_projections();  // nothing to do: the aliasing stays
  EXPECT_EQ(attention(sampler, 0).q_proj->weight.data_ptr(), attention(trainer, 0).q_proj->weight.data_ptr());
  {
    torch::NoGradGuard no_grad;
    attention(trainer, 1).v_proj->weight.add_(0.5);
  }
  const int64_t before = packed_forward_count();
  const at::Tensor got = decoded_logits(sampler);
  EXPECT_GT(packed_forward_count(), before);
  EXPECT_LT(max_difference(got, decoded_logits(trainer)), 1e-6);
  CausalLM original = unpacked();
  EXPECT_GT(max_difference(got, decoded_logits(original)), 1e-3) << "the update must show";
}

// Gradients are the unpacked model's to the bit (training runs the
// projections one by one), and an optimizer's in-place update of the
// parameters is what the packed product reads next.
TEST(PackedProjections, TrainingUpdatesAreWhatSamplingReadsNext) {
  CausalLM lm = load_model(kDir), own = unpacked();
  const at::Tensor ids = at::tensor({3, 17, 250, 9, 44}, at::kLong).view({1, 5});
  for (CausalLM* m : {&lm, &own}) (*m)->forward(ids).logsumexp(-1).sum().backward();
  auto own_params = own->named_parameters();
  for (const auto& item : lm->named_parameters()) {
    const at::Tensor& want = own_params[item.key()].grad();
    ASSERT_TRUE(item.value().grad().defined()) << item.key();
    EXPECT_TRUE(at::equal(item.value().grad(), want)) << item.key();
  }
  const at::Tensor before = decoded_logits(lm);
  {
    torch::NoGradGuard no_grad;
    for (CausalLM* m : {&lm, &own})
      for (auto& p : (*m)->parameters()) p.sub_(p.grad(), 0.05);
  }
  EXPECT_TRUE(lm->projections_packed());
  const at::Tensor after = decoded_logits(lm);
  EXPECT_GT(max_difference(before, after), 1e-3) << "the update must change the logits";
  EXPECT_LT(max_difference(after, decoded_logits(own)), 1e-5);
}

// Storage of its own for one parameter (an offload, a sampler aliasing
// another model's tensor) ends the sharing: the projections run one by one,
// with the same results, until the model is packed again.
TEST(PackedProjections, AParameterGivenStorageOfItsOwnEndsThePackingNotTheResults) {
  CausalLM lm = load_model(kDir);
  const at::Tensor want = decoded_logits(lm);
  AttentionImpl& a = attention(lm, 1);
  {
    torch::NoGradGuard no_grad;
    a.k_proj->weight.set_data(a.k_proj->weight.clone());
  }
  EXPECT_FALSE(packed({a.q_proj.get(), a.k_proj.get(), a.v_proj.get()}));
  {
    torch::NoGradGuard no_grad;
    FusedScope fused;
    EXPECT_FALSE(packed_forward({a.q_proj.get(), a.k_proj.get(), a.v_proj.get()}, at::randn({1, 1, 64})).defined());
  }
  EXPECT_LT(max_difference(decoded_logits(lm), want), 1e-5);
  lm->to(at::kDouble);  // an unpacked model stays so (it may be reading another's tensors)
  EXPECT_FALSE(lm->projections_packed());
  lm->pack_projections();
  EXPECT_TRUE(lm->projections_packed());
  lm->to(at::kFloat);  // a packed one is packed again in its new storage
  EXPECT_TRUE(lm->projections_packed());
  EXPECT_LT(max_difference(decoded_logits(lm), want), 1e-5);
}

}  // namespace
}  // namespace grpo::model
