// LoRA adapters on the model: a fresh adapter changes nothing, training moves
// only adapter parameters, disabling them gives the base model exactly, merged
// weights compute what the adapters do, and PEFT's files round-trip.
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/optim/adamw.h>
#include <torch/types.h>
#include <torch/utils.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>

#include "model/lora.h"
#include "model/lora_files.h"
#include "model/presets.h"
#include "model/weights.h"

using namespace grpo::model;
namespace fs = std::filesystem;

namespace {

const std::string kDir = GRPO_TEST_DATA_DIR "/tiny-qwen2";

LoraOptions small_options(std::vector<std::string> targets = {"all-linear"}) {
  LoraOptions o;
  o.rank = 4;
  o.alpha = 8;
  o.dropout = 0.0;
  o.target_modules = std::move(targets);
  o.seed = 1;
  return o;
}

at::Tensor token_ids(int64_t vocab) {
  at::Generator gen = at::detail::createCPUGenerator(5);
  return at::randint(0, vocab, {2, 10}, gen, at::TensorOptions().dtype(at::kLong));
}

// Non-zero B (and a moved A), so the adapters change the output as after training.
void perturb_adapters(CausalLMImpl& model, uint64_t seed) {
  torch::NoGradGuard no_grad;
  at::Generator gen = at::detail::createCPUGenerator(seed);
  for (at::Tensor& p : adapter_parameters(model))
    p.add_(at::randn(p.sizes(), gen, at::TensorOptions().dtype(p.scalar_type())) * 0.1);
}

at::Tensor logits(CausalLM& lm, const at::Tensor& ids) {
  torch::NoGradGuard no_grad;
  return lm->forward(ids);
}

std::set<std::string> adapter_names(CausalLMImpl& model) {
  std::set<std::string> out;
  for (const auto& p : model.named_parameters())
    if (is_adapter_parameter(p.key())) out.insert(p.key());
  return out;
}

fs::path fresh_dir(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("grpo_lora_" + name);
  fs::remove_all(dir);
  return dir;
}

}  // namespace

TEST(Lora, FreshAdapterLeavesLogitsUnchanged) {
  CausalLM lm = load_model(kDir);
  at::Tensor ids = token_ids(300), before = logits(lm, ids);
  apply_lora(*lm, small_options());
  EXPECT_TRUE(at::equal(logits(lm, ids), before));
  for (auto& [name, proj] : projections(*lm)) {
    EXPECT_EQ(proj->lora_B.count_nonzero().item<int64_t>(), 0) << name;
    const double bound = 1.0 / std::sqrt(static_cast<double>(proj->in_features()));
    EXPECT_GT(proj->lora_A.abs().max().item<double>(), 0.5 * bound) << name;  // drawn, not zero
    EXPECT_LE(proj->lora_A.abs().max().item<double>(), bound) << name;
    EXPECT_DOUBLE_EQ(proj->scaling(), 2.0);  // alpha 8 / rank 4
  }
}

TEST(Lora, AdamWStepMovesOnlyAdaptersAndLeavesBaseBitwise) {
  CausalLM lm = load_model(kDir);
  LoraOptions o = small_options();
  o.dropout = 0.1;
  apply_lora(*lm, o);
  lm->train();
  std::map<std::string, at::Tensor> before;
  for (const auto& p : lm->named_parameters()) before[p.key()] = p.value().detach().clone();
  // Every parameter handed to the optimizer, with weight decay: frozen ones must still not move.
  torch::optim::AdamW opt(lm->parameters(), torch::optim::AdamWOptions(1e-2).weight_decay(0.1));
  at::Tensor ids = token_ids(300);
  at::Tensor out = lm->forward(ids.narrow(1, 0, 9));  // [2, 9, V]
  at::Tensor loss = at::cross_entropy_loss(out.reshape({-1, out.size(-1)}), ids.narrow(1, 1, 9).reshape({-1}));
  loss.backward();
  opt.step();
  size_t adapters = 0;
  for (const auto& p : lm->named_parameters()) {
    if (is_adapter_parameter(p.key())) {
      ++adapters;
      EXPECT_TRUE(p.value().requires_grad()) << p.key();
      EXPECT_FALSE(at::equal(p.value(), before[p.key()])) << p.key() << " did not move";
    } else {
      EXPECT_FALSE(p.value().requires_grad()) << p.key();
      EXPECT_FALSE(p.value().grad().defined()) << p.key();
      EXPECT_TRUE(at::equal(p.value(), before[p.key()])) << p.key() << " moved";
    }
  }
  EXPECT_EQ(adapters, 2u * 7u * 2u);  // 2 layers x 7 projections x (A, B)
  EXPECT_EQ(adapter_parameters(*lm).size(), adapters);
}

TEST(Lora, DisabledAdaptersGiveTheBaseLogitsExactly) {
  CausalLM lm = load_model(kDir);
  at::Tensor ids = token_ids(300), base = logits(lm, ids);
  apply_lora(*lm, small_options());
  perturb_adapters(*lm, 2);
  at::Tensor adapted = logits(lm, ids);
  EXPECT_GT((adapted - base).abs().max().item<double>(), 1e-3);
  {
    AdaptersDisabled reference(*lm);
    EXPECT_TRUE(at::equal(logits(lm, ids), base));
  }
  EXPECT_TRUE(at::equal(logits(lm, ids), adapted));  // the guard restored them
  set_adapters_enabled(*lm, false);
  EXPECT_TRUE(at::equal(logits(lm, ids), base));
  set_adapters_enabled(*lm, true);
  EXPECT_TRUE(at::equal(logits(lm, ids), adapted));
}

TEST(Lora, MergedWeightsComputeWhatTheAdaptersDo) {
  CausalLM lm = load_model(kDir);
  apply_lora(*lm, small_options());
  perturb_adapters(*lm, 3);
  at::Tensor ids = token_ids(300), adapted = logits(lm, ids);

  std::map<std::string, at::Tensor> buffers = merged_weight_buffers(*lm);
  EXPECT_EQ(buffers.size(), 14u);
  const void* storage = buffers.at("model.layers.1.mlp.down_proj.weight").data_ptr();
  merge_lora_into(*lm, buffers);
  merge_lora_into(*lm, buffers);  // again, as after every step: same storage, same values
  EXPECT_EQ(buffers.at("model.layers.1.mlp.down_proj.weight").data_ptr(), storage);

  CausalLM plain = load_model(kDir);  // a sampler's copy without adapters
  {
    torch::NoGradGuard no_grad;
    auto params = plain->named_parameters();
    for (auto& [name, t] : buffers) params[name].copy_(t);
  }
  const double diff = (logits(plain, ids) - adapted).abs().max().item<double>();
  std::printf("merged vs adapted: max |logit difference| = %.3g\n", diff);
  EXPECT_LT(diff, 1e-5);

  fs::path dir = fresh_dir("merged");
  save_merged_model(*lm, dir.string(), kDir);
  CheckpointFiles files = CheckpointFiles::open(dir.string());
  for (const std::string& name : files.names()) EXPECT_FALSE(is_adapter_parameter(name)) << name;
  EXPECT_NO_THROW(check_tensors(lm->config(), files));
  EXPECT_TRUE(fs::exists(dir / "tokenizer_config.json") || !fs::exists(fs::path(kDir) / "tokenizer_config.json"));
  CausalLM reloaded = load_model(dir.string());
  EXPECT_LT((logits(reloaded, ids) - adapted).abs().max().item<double>(), 1e-5);
}

TEST(Lora, MergeRejectsAMissingOrMisshapedBuffer) {
  CausalLM lm = load_model(kDir);
  apply_lora(*lm, small_options({"q_proj"}));
  std::map<std::string, at::Tensor> buffers = merged_weight_buffers(*lm);
  buffers.erase("model.layers.1.self_attn.q_proj.weight");
  try {
    merge_lora_into(*lm, buffers);
    FAIL() << "merged without a buffer";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'model.layers.1.self_attn.q_proj.weight'"), std::string::npos) << e.what();
  }
  buffers["model.layers.1.self_attn.q_proj.weight"] = at::zeros({3, 3});
  EXPECT_THROW(merge_lora_into(*lm, buffers), std::invalid_argument);
}

TEST(Lora, PeftFilesHavePeftNamesAndRoundTripBitwise) {
  CausalLM lm = load_model(kDir);
  LoraOptions o = small_options({"v_proj", "q_proj", "down_proj"});
  o.dropout = 0.05;
  apply_lora(*lm, o);
  perturb_adapters(*lm, 4);
  fs::path dir = fresh_dir("peft");
  save_peft_adapter(*lm, o, dir.string(), kDir);

  auto file = SafetensorsFile::open((dir / kAdapterWeightsName).string());
  std::set<std::string> keys;
  for (const TensorView& v : file->tensors()) keys.insert(v.name);
  std::set<std::string> want;
  for (const std::string& n : adapter_names(*lm)) want.insert("base_model.model." + n);
  EXPECT_EQ(keys, want);
  const TensorView* a = file->find("base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight");
  const TensorView* b = file->find("base_model.model.model.layers.1.mlp.down_proj.lora_B.weight");
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->shape, (std::vector<int64_t>{4, 64}));
  EXPECT_EQ(b->shape, (std::vector<int64_t>{64, 4}));
  EXPECT_EQ(a->dtype, DType::F32);

  nlohmann::json config = nlohmann::json::parse(std::ifstream(dir / kAdapterConfigName));
  EXPECT_EQ(config["peft_type"], "LORA");
  EXPECT_EQ(config["task_type"], "CAUSAL_LM");
  EXPECT_EQ(config["r"], 4);
  EXPECT_EQ(config["lora_alpha"], 8);
  EXPECT_TRUE(config["lora_alpha"].is_number_integer());  // as PEFT writes an integral alpha
  EXPECT_EQ(config["lora_dropout"], 0.05);
  EXPECT_EQ(config["target_modules"], (nlohmann::json{"down_proj", "q_proj", "v_proj"}));
  EXPECT_EQ(config["base_model_name_or_path"], kDir);
  EXPECT_EQ(config["bias"], "none");
  EXPECT_EQ(config["fan_in_fan_out"], false);
  EXPECT_EQ(config["inference_mode"], true);

  CausalLM back = load_model(kDir);
  LoraOptions read = load_peft_adapter(*back, dir.string());
  EXPECT_EQ(read.rank, 4);
  EXPECT_EQ(read.alpha, 8.0);
  EXPECT_EQ(read.dropout, 0.05);
  EXPECT_EQ(read.target_modules, (std::vector<std::string>{"down_proj", "q_proj", "v_proj"}));
  auto mine = lm->named_parameters();
  for (const auto& p : back->named_parameters()) EXPECT_TRUE(at::equal(p.value(), mine[p.key()])) << p.key();
  EXPECT_EQ(adapter_names(*back), adapter_names(*lm));
  at::Tensor ids = token_ids(300);
  lm->eval();  // dropout 0.05 acts in training mode, LibTorch's default
  back->eval();
  EXPECT_TRUE(at::equal(logits(back, ids), logits(lm, ids)));
  // Loading again into the adapted model (as when resuming) overwrites in place.
  perturb_adapters(*back, 9);
  load_peft_adapter(*back, dir.string());
  EXPECT_TRUE(at::equal(logits(back, ids), logits(lm, ids)));
}

TEST(Lora, LoadNamesTheFileAndTensorThatDoNotFit) {
  CausalLM lm = load_model(kDir);
  apply_lora(*lm, small_options({"q_proj", "v_proj"}));
  fs::path dir = fresh_dir("mismatch");
  save_peft_adapter(*lm, small_options({"q_proj", "v_proj"}), dir.string(), kDir);
  const std::string weights = (dir / kAdapterWeightsName).string();
  auto rewrite_config = [&](const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json c = nlohmann::json::parse(std::ifstream(dir / kAdapterConfigName));
    edit(c);
    std::ofstream(dir / kAdapterConfigName) << c.dump();
  };
  auto load_error = [&] {
    CausalLM fresh = load_model(kDir);
    try {
      load_peft_adapter(*fresh, dir.string());
    } catch (const AdapterFileError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };

  // Options that do not describe the model's adapters would write a config PEFT misreads.
  EXPECT_THROW(save_peft_adapter(*lm, small_options({"q_proj"}), dir.string(), kDir), std::invalid_argument);
  LoraOptions other_alpha = small_options({"q_proj", "v_proj"});
  other_alpha.alpha = 16;
  EXPECT_THROW(save_peft_adapter(*lm, other_alpha, dir.string(), kDir), std::invalid_argument);

  rewrite_config([](nlohmann::json& c) { c["r"] = 2; });  // the tensors have rank 4
  std::string msg = load_error();
  EXPECT_NE(msg.find(weights), std::string::npos) << msg;
  EXPECT_NE(msg.find("'base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight' has shape [4, 64]"),
            std::string::npos)
      << msg;

  rewrite_config([](nlohmann::json& c) { c["r"] = 4; c["target_modules"] = {"q_proj", "v_proj", "k_proj"}; });
  msg = load_error();
  EXPECT_NE(msg.find("'base_model.model.model.layers.0.self_attn.k_proj.lora_A.weight' is missing"), std::string::npos)
      << msg;

  rewrite_config([](nlohmann::json& c) { c["target_modules"] = {"q_proj"}; });
  msg = load_error();
  EXPECT_NE(msg.find("v_proj.lora_A.weight' matches no adapter"), std::string::npos) << msg;

  rewrite_config([](nlohmann::json& c) { c["target_modules"] = {"q_proj", "v_proj"}; c["use_dora"] = true; });
  msg = load_error();
  EXPECT_NE(msg.find(kAdapterConfigName), std::string::npos) << msg;
  EXPECT_NE(msg.find("'use_dora'"), std::string::npos) << msg;

  CausalLM other = load_model(kDir);  // adapters of another rank already attached
  LoraOptions rank8 = small_options({"q_proj", "v_proj"});
  rank8.rank = 8;
  apply_lora(*other, rank8);
  rewrite_config([](nlohmann::json& c) { c.erase("use_dora"); });
  EXPECT_THROW(load_peft_adapter(*other, dir.string()), AdapterFileError);
  EXPECT_THROW(load_peft_adapter(*other, (dir / "absent").string()), AdapterFileError);
}

TEST(Lora, UnknownTargetModuleNamesTheValidOnes) {
  CausalLM lm = load_model(kDir);
  try {
    apply_lora(*lm, small_options({"q_proj", "qkv_proj"}));
    FAIL() << "accepted qkv_proj";
  } catch (const std::invalid_argument& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("'qkv_proj'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("all-linear"), std::string::npos) << msg;
    EXPECT_NE(msg.find("q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj"), std::string::npos) << msg;
  }
  EXPECT_FALSE(has_adapters(*lm));  // nothing attached, nothing frozen
  for (const auto& p : lm->parameters()) EXPECT_TRUE(p.requires_grad());
  EXPECT_THROW(apply_lora(*lm, small_options({})), std::invalid_argument);
  LoraOptions bad = small_options();
  bad.rank = 0;
  EXPECT_THROW(apply_lora(*lm, bad), std::invalid_argument);
  bad = small_options();
  bad.dropout = 1.0;
  EXPECT_THROW(apply_lora(*lm, bad), std::invalid_argument);
}

TEST(Lora, AllLinearCoversEveryProjectionButNotLmHead) {
  nlohmann::json json = preset_config("llama", "tiny", 97);
  json["tie_word_embeddings"] = false;  // an lm_head that all-linear must leave alone
  CausalLM lm(ModelConfig::from_json(json, "preset"));
  apply_lora(*lm, small_options());
  std::set<std::string> adapted;
  for (auto& [name, proj] : projections(*lm)) adapted.insert(name);
  std::set<std::string> want;
  for (int64_t layer = 0; layer < lm->config().num_hidden_layers; ++layer)
    for (const char* m : {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                          "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"})
      want.insert("model.layers." + std::to_string(layer) + "." + m);
  EXPECT_EQ(adapted, want);
  for (const std::string& n : adapter_names(*lm)) EXPECT_EQ(n.find("lm_head"), std::string::npos) << n;
  EXPECT_FALSE(lm->named_parameters()["lm_head.weight"].requires_grad());
  EXPECT_EQ(resolve_target_modules({"all-linear"}), resolve_target_modules(lora_module_names()));
}

TEST(Lora, TargetListAdaptsOnlyTheNamedProjections) {
  CausalLM lm = load_model(kDir);
  apply_lora(*lm, small_options({"v_proj", "q_proj"}));
  std::set<std::string> names = adapter_names(*lm);
  EXPECT_EQ(names.size(), 2u * 2u * 2u);
  EXPECT_EQ(names.count("model.layers.1.self_attn.v_proj.lora_B.weight"), 1u);
  for (const std::string& n : names)
    EXPECT_TRUE(n.find(".q_proj.") != std::string::npos || n.find(".v_proj.") != std::string::npos) << n;
}

TEST(Lora, DropoutActsOnlyInTraining) {
  CausalLM lm = load_model(kDir);
  LoraOptions o = small_options();
  o.dropout = 0.5;
  apply_lora(*lm, o);
  perturb_adapters(*lm, 6);
  at::Tensor ids = token_ids(300);
  lm->eval();
  EXPECT_TRUE(at::equal(logits(lm, ids), logits(lm, ids)));
  lm->train();
  EXPECT_FALSE(at::equal(logits(lm, ids), logits(lm, ids)));
}

TEST(Lora, SaveModelWritesTheBaseAndLoadWeightsSkipsAdapters) {
  CausalLM lm = load_model(kDir);
  at::Tensor ids = token_ids(300), base = logits(lm, ids);
  apply_lora(*lm, small_options());
  perturb_adapters(*lm, 7);
  fs::path dir = fresh_dir("base");
  save_model(*lm, dir.string());
  for (const std::string& name : CheckpointFiles::open(dir.string()).names())
    EXPECT_FALSE(is_adapter_parameter(name)) << name;
  CausalLM reloaded = load_model(dir.string());
  EXPECT_TRUE(at::equal(logits(reloaded, ids), base));
  at::Tensor adapted = logits(lm, ids);
  load_weights(*lm, CheckpointFiles::open(kDir));  // base weights into the adapted model
  EXPECT_TRUE(at::equal(logits(lm, ids), adapted));
}

TEST(Lora, Bfloat16BaseKeepsFloat32Adapters) {
  CausalLM lm = load_model(kDir, at::kBFloat16);
  at::Tensor ids = token_ids(300), base = logits(lm, ids);
  apply_lora(*lm, small_options());
  for (const at::Tensor& p : adapter_parameters(*lm)) EXPECT_EQ(p.scalar_type(), at::kFloat);
  EXPECT_TRUE(at::equal(logits(lm, ids), base));
  perturb_adapters(*lm, 8);
  at::Tensor adapted = logits(lm, ids);
  EXPECT_EQ(adapted.scalar_type(), at::kBFloat16);
  std::map<std::string, at::Tensor> buffers = merged_weight_buffers(*lm);
  merge_lora_into(*lm, buffers);
  EXPECT_EQ(buffers.begin()->second.scalar_type(), at::kBFloat16);
  auto params = lm->named_parameters();
  for (auto& [name, t] : buffers) {
    // W + scaling * B A in bfloat16: B and A are rounded to bfloat16 (u = 2^-8
    // of each factor, so up to 2u of each product, and u more where the
    // product is rounded before the sum), and the sum once more (u of it).
    const std::string stem = name.substr(0, name.size() - std::string("weight").size());
    const at::Tensor B = params[stem + "lora_B.weight"], A = params[stem + "lora_A.weight"];
    const at::Tensor want = params[name].to(at::kFloat) + 2.0 * at::matmul(B, A);
    const double u = std::ldexp(1.0, -8);
    const at::Tensor bound = u * want.abs() + 3 * u * 2.0 * at::matmul(B.abs(), A.abs());
    EXPECT_LE(((t.to(at::kFloat) - want).abs() - bound).max().item<double>(), 0.0) << name;
  }
}
