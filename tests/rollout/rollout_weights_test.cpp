// Weight transfer into a running grpo-rollout over Gloo: the trainer side
// (WeightSender) pushes perturbed weights, and the server's greedy output
// must then equal the in-process engine's with those same weights.
#include <chrono>
#include <thread>

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/types.h>
#include <torch/utils.h>

#include "model/engine.h"
#include "model/weights.h"
#include "rollout/rollout_process.h"
#include "rollout/weight_sender.h"
#include "tokenizer/tokenizer.h"

using grpo::rollout::NamedTensors;
using grpo::rollout::TransferError;
using grpo::rollout::WeightSender;
using grpo::testing::RolloutProcess;
using nlohmann::json;
namespace model = grpo::model;

namespace {

const std::vector<int32_t> kPrompt = {72, 101, 108, 108, 111};
constexpr int kMaxTokens = 12;

json greedy_body() { return json{{"prompts", {kPrompt}}, {"temperature", 0.0}, {"max_tokens", kMaxTokens}}; }

// Greedy as the server runs it: stopping at the tokenizer's eos.
std::vector<int32_t> greedy(model::Engine& engine) {
  static const int32_t eos = *grpo::tok::Tokenizer::from_dir(grpo::testing::tiny_model_dir()).eos_id();
  model::SamplingParams params;
  params.top_k = 1;
  params.max_new_tokens = kMaxTokens;
  return engine.generate({{kPrompt, 1, 0, {eos}}}, params)[0].ids;
}

// The model's parameters perturbed with seeded noise, optionally rounded
// through `wire` (the dtype they travel in), and the engine holding them.
struct Perturbed {
  model::Engine engine{model::load_model(grpo::testing::tiny_model_dir())};
  NamedTensors tensors;
  explicit Perturbed(at::ScalarType wire = at::kFloat) {
    torch::NoGradGuard no_grad;
    auto gen = at::detail::createCPUGenerator(7);
    for (auto& item : engine.model()->named_parameters()) {
      at::Tensor noisy = item.value() + 0.5 * at::randn(item.value().sizes(), gen);
      tensors.emplace_back(item.key(), noisy.to(wire));
      item.value().copy_(tensors.back().second);
    }
  }
};

std::vector<int32_t> server_greedy(const RolloutProcess& server) {
  auto r = server.post("/generate/", greedy_body());
  EXPECT_EQ(r.status, 200) << r.raw;
  return r.body["completion_ids"][0].get<std::vector<int32_t>>();
}

}  // namespace

TEST(RolloutWeights, PerParameterPushMatchesInProcessEngine) {
  RolloutProcess server(grpo::testing::tiny_model_dir(), {"--comm_timeout_s", "30"});
  ASSERT_NE(server.port(), 0);
  model::Engine original(model::load_model(grpo::testing::tiny_model_dir()));
  ASSERT_EQ(server_greedy(server), greedy(original));
  Perturbed perturbed;
  const auto want = greedy(perturbed.engine);
  ASSERT_NE(want, greedy(original)) << "the perturbation must change the output for this test to mean anything";

  WeightSender sender({server.base_url()});
  sender.connect("127.0.0.1", grpo::testing::free_port(), std::chrono::seconds(30));
  EXPECT_EQ(sender.world_size(), 2);
  // The server finishes joining on its own thread, just after the trainer side: poll briefly.
  bool joined = false;
  for (int i = 0; i < 100 && !joined; ++i) {
    joined = server.get("/health/").body["communicator"].get<bool>();
    if (!joined) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(joined);
  for (const auto& [name, tensor] : perturbed.tensors) sender.send(name, tensor);
  sender.reset_prefix_cache();
  EXPECT_EQ(server_greedy(server), want);
  EXPECT_EQ(server.get("/health/").body["tensors_received"], perturbed.tensors.size());
  sender.close();
  EXPECT_EQ(server.terminate(), 0) << server.log();
}

TEST(RolloutWeights, BucketedPushOfBfloat16MatchesInProcessEngine) {
  RolloutProcess server(grpo::testing::tiny_model_dir(), {"--comm_timeout_s", "30"});
  ASSERT_NE(server.port(), 0);
  Perturbed perturbed(at::kBFloat16);  // sent as bfloat16, converted by the float32 server as the engine converts
  WeightSender sender({server.base_url()});
  sender.connect("127.0.0.1", grpo::testing::free_port(), std::chrono::seconds(30));
  sender.send_all(perturbed.tensors, /*bucket_bytes=*/16 << 10);  // several buckets for the tiny model
  sender.reset_prefix_cache();
  EXPECT_EQ(server_greedy(server), greedy(perturbed.engine));
  EXPECT_EQ(server.get("/health/").body["tensors_received"], perturbed.tensors.size());
  // A second round over the same group: weights back to the original.
  model::Engine original(model::load_model(grpo::testing::tiny_model_dir()));
  NamedTensors originals;
  for (auto& item : original.model()->named_parameters()) originals.emplace_back(item.key(), item.value());
  sender.send_all(originals, 1 << 20);
  sender.reset_prefix_cache();
  EXPECT_EQ(server_greedy(server), greedy(original));
  sender.close();
}

TEST(RolloutWeights, TrainerThatNeverJoinsTimesOutNamingTheStep) {
  RolloutProcess server(grpo::testing::tiny_model_dir(), {"--comm_timeout_s", "1"});
  ASSERT_NE(server.port(), 0);
  auto init = server.post("/init_communicator/",
                          {{"host", "127.0.0.1"}, {"port", grpo::testing::free_port()}, {"world_size", 2}});
  ASSERT_EQ(init.status, 200) << init.raw;
  auto update = server.post("/update_named_param/",
                            {{"name", "model.norm.weight"}, {"dtype", "torch.float32"}, {"shape", {64}}});
  EXPECT_EQ(update.status, 500) << update.raw;
  const std::string error = update.body.value("error", "");
  EXPECT_NE(error.find("init_communicator"), std::string::npos) << error;
  EXPECT_NE(error.find("join the Gloo group"), std::string::npos) << error;
  EXPECT_EQ(server.post("/generate/", greedy_body()).status, 200);  // generation is unaffected
  EXPECT_EQ(server.terminate(), 0) << server.log();
}

TEST(RolloutWeights, SenderErrorsNameTheStep) {
  WeightSender sender({"http://127.0.0.1:" + std::to_string(grpo::testing::free_port())});
  try {
    sender.send("model.norm.weight", at::zeros({64}));
    FAIL() << "send before connect must throw";
  } catch (const TransferError& e) {
    EXPECT_NE(std::string(e.what()).find("model.norm.weight"), std::string::npos) << e.what();
  }
  try {
    sender.connect("127.0.0.1", grpo::testing::free_port(), std::chrono::seconds(1));
    FAIL() << "connect without a server must throw";
  } catch (const TransferError& e) {
    EXPECT_NE(std::string(e.what()).find("/get_world_size/"), std::string::npos) << e.what();
  }
}
