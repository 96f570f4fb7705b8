// The LibTorch model against Hugging Face transformers' own logits for
// tests/data/tiny-qwen2 (float32, eager attention).
#include <gtest/gtest.h>
#include <torch/types.h>
#include <torch/utils.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "model/safetensors.h"
#include "model/weights.h"

using namespace grpo::model;

namespace {

const std::string kDir = GRPO_TEST_DATA_DIR "/tiny-qwen2";

nlohmann::json expected() {
  std::ifstream in(kDir + "/expected.json");
  return nlohmann::json::parse(in);
}

at::Tensor expected_logits(const std::string& name) {
  static auto file = SafetensorsFile::open(kDir + "/expected_logits.safetensors");
  const TensorView* v = file->find(name);
  EXPECT_NE(v, nullptr) << name;
  return tensor_view(*v).clone();
}

at::Tensor ids_tensor(const std::vector<int64_t>& ids) { return torch::tensor(ids, torch::kLong).unsqueeze(0); }

std::vector<int64_t> concat(std::vector<int64_t> a, const std::vector<int64_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

class TinyQwen2 : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { model_ = new CausalLM(load_model(kDir)); }
  static void TearDownTestSuite() { delete model_; }
  static CausalLM* model_;
  torch::NoGradGuard no_grad_;
};
CausalLM* TinyQwen2::model_ = nullptr;

}  // namespace

TEST_F(TinyQwen2, SingleSequenceLogitsMatchTransformers) {
  auto e = expected()["single"]["input"];
  at::Tensor ids = ids_tensor(concat(e["prompt_ids"], e["completion_ids"]));
  at::Tensor logits = (*model_)->forward(ids);
  at::Tensor want = expected_logits("single.logits");
  ASSERT_EQ(logits.sizes(), want.sizes());
  double diff = (logits - want).abs().max().item<double>();
  std::printf("single: max |logit - transformers| = %.3g\n", diff);
  EXPECT_LT(diff, 1e-4);
}

TEST_F(TinyQwen2, BatchLogitsMatchTransformers) {
  auto rows = expected()["batch"]["input"]["input_ids"];
  std::vector<at::Tensor> list;
  for (const auto& r : rows) list.push_back(torch::tensor(r.get<std::vector<int64_t>>(), torch::kLong));
  at::Tensor logits = (*model_)->forward(at::stack(list));
  at::Tensor want = expected_logits("batch.logits");
  double diff = (logits - want).abs().max().item<double>();
  std::printf("batch: max |logit - transformers| = %.3g\n", diff);
  EXPECT_LT(diff, 1e-4);
}

TEST_F(TinyQwen2, LeftPaddingChangesNothing) {
  auto e = expected()["single"]["input"];
  std::vector<int64_t> ids = e["prompt_ids"];
  at::Tensor plain = (*model_)->forward(ids_tensor(ids));
  std::vector<int64_t> padded = concat({0, 0, 0}, ids);
  at::Tensor mask = torch::ones({1, static_cast<int64_t>(padded.size())}, torch::kLong);
  mask.narrow(1, 0, 3).zero_();
  at::Tensor out = (*model_)->forward(ids_tensor(padded), mask).narrow(1, 3, static_cast<int64_t>(ids.size()));
  EXPECT_LT((out - plain).abs().max().item<double>(), 1e-4);
}

TEST_F(TinyQwen2, CachedGreedyDecodingEqualsCacheFreeArgmax) {
  auto g = expected()["greedy"];
  std::vector<int64_t> seq = g["prompt_ids"];
  KvCache cache = (*model_)->new_cache();
  at::Tensor logits = (*model_)->logits((*model_)->hidden_states(ids_tensor(seq), {}, {}, &cache));
  std::vector<int64_t> generated;
  for (int step = 0; step < 16; ++step) {
    int64_t next = logits.select(1, logits.size(1) - 1).argmax(-1).item<int64_t>();
    // The same token from a full forward without the cache:
    at::Tensor full = (*model_)->forward(ids_tensor(seq));
    ASSERT_EQ(full.select(1, full.size(1) - 1).argmax(-1).item<int64_t>(), next) << "step " << step;
    generated.push_back(next);
    seq.push_back(next);
    logits = (*model_)->logits((*model_)->hidden_states(ids_tensor({next}), {}, {}, &cache));
  }
  EXPECT_EQ(generated, g["generated_ids"].get<std::vector<int64_t>>());
}

// Grouped-query attention takes two ways (transformer.cpp): query rows grouped
// per key head for short inputs (a decoding step, a short prefill), keys and
// values repeated per query head for long ones (here past 64 positions). A
// 100-position forward (repeated) gives the logits of a 50-position prefill
// (grouped) and 50 cached steps (grouped).
TEST_F(TinyQwen2, BothWaysOfGroupedQueryAttentionGiveTheSameLogits) {
  const at::Tensor ids = torch::randint(0, 300, {2, 100}, torch::kLong);
  const at::Tensor full = (*model_)->forward(ids);
  KvCache cache = (*model_)->new_cache();
  std::vector<at::Tensor> pieces{(*model_)->logits((*model_)->hidden_states(ids.narrow(1, 0, 50), {}, {}, &cache))};
  for (int64_t t = 50; t < 100; ++t)
    pieces.push_back((*model_)->logits((*model_)->hidden_states(ids.narrow(1, t, 1), {}, {}, &cache)));
  EXPECT_LT((at::cat(pieces, 1) - full).abs().max().item<double>(), 1e-4);
}

TEST_F(TinyQwen2, SavedCheckpointLoadsBackIdentically) {
  auto dir = std::filesystem::temp_directory_path() / "grpo_tiny_qwen2_saved";
  std::filesystem::remove_all(dir);
  save_model(**model_, dir.string());
  CausalLM again = load_model(dir.string());
  auto e = expected()["single"]["input"];
  at::Tensor ids = ids_tensor(concat(e["prompt_ids"], e["completion_ids"]));
  EXPECT_TRUE(at::equal((*model_)->forward(ids), again->forward(ids)));
  nlohmann::json config = nlohmann::json::parse(std::ifstream((dir / "config.json").string()));
  EXPECT_EQ(config["architectures"][0], "Qwen2ForCausalLM");
  EXPECT_EQ(config["torch_dtype"], "float32");
}
