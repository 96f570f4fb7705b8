// grpo-rollout --data_parallel_size: engine replicas that split a call's
// prompts and answer as one engine would, and that every weight push reaches.
#include <gtest/gtest.h>
#include <unistd.h>

#include <stdexcept>
#include <thread>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/utils.h>

#include "model/engine.h"
#include "model/weights.h"
#include "rollout/replicas.h"
#include "rollout/rollout_process.h"
#include "rollout/weight_sender.h"

using grpo::rollout::replica_devices;
using grpo::rollout::split_requests;
using grpo::testing::engine_run;
using grpo::testing::RolloutProcess;
using nlohmann::json;
namespace model = grpo::model;

namespace {

using Runs = std::vector<std::pair<size_t, size_t>>;

const std::vector<std::vector<int32_t>> kPrompts = {
    {104, 101, 108, 108, 111}, {60, 61, 62}, {40, 50, 41, 51}, {33, 34}, {90, 91, 92, 93, 94, 95}};

json generate_body(int n, double temperature, int max_tokens, uint64_t seed) {
  return json{{"prompts", kPrompts},       {"n", n}, {"temperature", temperature}, {"max_tokens", max_tokens},
              {"logprobs", 0},             {"generation_kwargs", {{"seed", seed}}}};
}

}  // namespace

TEST(ReplicaSplit, RunsDifferByOneAtMostAndAreNeverEmpty) {
  EXPECT_EQ(split_requests(5, 2), (Runs{{0, 3}, {3, 5}}));
  EXPECT_EQ(split_requests(7, 3), (Runs{{0, 3}, {3, 5}, {5, 7}}));
  EXPECT_EQ(split_requests(4, 4), (Runs{{0, 1}, {1, 2}, {2, 3}, {3, 4}}));
  EXPECT_EQ(split_requests(1, 8), (Runs{{0, 1}}));
  EXPECT_EQ(split_requests(3, 1), (Runs{{0, 3}}));
  EXPECT_EQ(split_requests(0, 2), Runs{});
}

TEST(ReplicaSplit, DevicesAreConsecutiveGpusOrTheCpuAndTooFewGpusAreNamed) {
  EXPECT_EQ(replica_devices(at::kCPU, 3, 0), std::vector<at::Device>(3, at::Device(at::kCPU)));
  const std::vector<at::Device> gpus = replica_devices(at::Device(at::kCUDA, 1), 2, 4);
  EXPECT_EQ(gpus, (std::vector<at::Device>{at::Device(at::kCUDA, 1), at::Device(at::kCUDA, 2)}));
  EXPECT_EQ(replica_devices(at::Device(at::kCUDA), 2, 2).front(), at::Device(at::kCUDA, 0));
  try {
    replica_devices(at::Device(at::kCUDA, 1), 2, 2);
    ADD_FAILURE() << "cuda:1 and cuda:2 on a machine with 2 GPUs";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--data_parallel_size 2 from cuda:1 needs GPUs cuda:1..cuda:2, and this "
                                         "process sees 2"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(replica_devices(at::kCPU, 0, 0), std::invalid_argument);
}

// Five prompts × n 2 over two replicas: three prompts on one, two on the
// other, and the answer the single engine gives, in its order.
TEST(RolloutDataParallel, TwoReplicasSplitACallAndAnswerAsOneEngine) {
  RolloutProcess server(grpo::testing::tiny_model_dir(), {"--data_parallel_size", "2", "--num_threads", "2"});
  ASSERT_NE(server.port(), 0);
  model::Engine engine(model::load_model(grpo::testing::tiny_model_dir()));
  const auto reply = server.post("/generate/", generate_body(2, 1.0, 10, 1234));
  ASSERT_EQ(reply.status, 200) << reply.raw;
  const auto want = engine_run(engine, kPrompts, 2, 1234, 10, /*top_k=*/0);
  ASSERT_EQ(reply.body["completion_ids"].size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(reply.body["completion_ids"][i].get<std::vector<int32_t>>(), want[i].ids) << "completion " << i;
    const auto logprobs = reply.body["logprobs"][i];
    ASSERT_EQ(logprobs.size(), want[i].logprobs.size()) << i;
    for (size_t t = 0; t < logprobs.size(); ++t)
      EXPECT_NEAR(logprobs[t][0].get<double>(), want[i].logprobs[t], 1e-5) << "completion " << i << " token " << t;
  }
  EXPECT_EQ(reply.body["prompt_ids"].size(), kPrompts.size());

  const json health = server.get("/health/").body;
  EXPECT_EQ(health["data_parallel_size"], 2);
  ASSERT_EQ(health["replicas"].size(), 2u) << health;
  EXPECT_EQ(health["replicas"][0]["device"], "cpu");
  // Each replica ran its part: 3 prompts × 2 and 2 prompts × 2, in whichever order the turn gave them.
  const auto first = health["replicas"][0]["sequences"].get<int>(), second = health["replicas"][1]["sequences"].get<int>();
  EXPECT_EQ(std::min(first, second), 4) << health;
  EXPECT_EQ(std::max(first, second), 6) << health;
  EXPECT_EQ(health["requests"], 1) << "one HTTP call, whatever the replicas made of it";
  EXPECT_EQ(health["sequences"], 10);
  EXPECT_EQ(server.get("/get_world_size/").body["world_size"], 1) << "one worker receives the weights";

  // Calls of one prompt take the replicas in turn.
  for (int i = 0; i < 4; ++i)
    ASSERT_EQ(server.post("/generate/", json{{"prompts", {kPrompts[0]}}, {"max_tokens", 2}}).status, 200);
  const json after = server.get("/health/").body;
  EXPECT_EQ(after["replicas"][0]["engine_calls"].get<int>() - health["replicas"][0]["engine_calls"].get<int>(), 2);
  EXPECT_EQ(after["replicas"][1]["engine_calls"].get<int>() - health["replicas"][1]["engine_calls"].get<int>(), 2);
  EXPECT_EQ(server.terminate(), 0) << server.log();
}

// A push lands in every replica: two prompts, one per replica, both greedy
// under the pushed weights.
TEST(RolloutDataParallel, AWeightPushReachesEveryReplica) {
  RolloutProcess server(grpo::testing::tiny_model_dir(),
                        {"--data_parallel_size", "2", "--num_threads", "2", "--comm_timeout_s", "30"});
  ASSERT_NE(server.port(), 0);
  model::Engine original(model::load_model(grpo::testing::tiny_model_dir()));
  model::Engine perturbed(model::load_model(grpo::testing::tiny_model_dir()));
  grpo::rollout::NamedTensors tensors;
  {
    torch::NoGradGuard no_grad;
    auto gen = at::detail::createCPUGenerator(11);
    for (auto& item : perturbed.model()->named_parameters()) {
      item.value().add_(0.5 * at::randn(item.value().sizes(), gen));
      tensors.emplace_back(item.key(), item.value());
    }
  }
  const std::vector<std::vector<int32_t>> two = {kPrompts[0], kPrompts[2]};
  const auto before = engine_run(original, two, 1, 0, 8, /*top_k=*/1);
  const auto want = engine_run(perturbed, two, 1, 0, 8, /*top_k=*/1);
  ASSERT_TRUE(before[0].ids != want[0].ids && before[1].ids != want[1].ids)
      << "the perturbation must change both prompts' greedy output for this test to mean anything";

  grpo::rollout::WeightSender sender({{server.base_url()}});
  sender.connect("127.0.0.1", grpo::testing::free_port(), std::chrono::seconds(30));
  sender.send_all(tensors, /*bucket_bytes=*/16 << 10);
  sender.reset_prefix_cache();
  const auto reply = server.post("/generate/", json{{"prompts", two}, {"temperature", 0.0}, {"max_tokens", 8}});
  ASSERT_EQ(reply.status, 200) << reply.raw;
  for (size_t i = 0; i < 2; ++i)
    EXPECT_EQ(reply.body["completion_ids"][i].get<std::vector<int32_t>>(), want[i].ids) << "prompt " << i;
  const json health = server.get("/health/").body;
  EXPECT_EQ(health["replicas"][0]["engine_calls"], 1) << health;
  EXPECT_EQ(health["replicas"][1]["engine_calls"], 1) << health;
  sender.close();
  EXPECT_EQ(server.terminate(), 0) << server.log();
}

// A call split over both replicas whose client goes away: both parts leave
// their engines (minutes of decoding otherwise), the call counts once as
// cancelled, and the replicas serve the next call at once.
TEST(RolloutDataParallel, ACallWhoseClientGoesAwayLeavesEveryReplica) {
  RolloutProcess server(grpo::testing::tiny_model_dir(), {"--data_parallel_size", "2", "--num_threads", "2"});
  ASSERT_NE(server.port(), 0);
  const json long_call{{"prompts", {{1, 2, 3}, {4, 5, 6}}},
                       {"n", 8},
                       {"max_tokens", 4000},
                       {"generation_kwargs", {{"ignore_eos", true}}}};
  const int client = grpo::testing::send_post(server.port(), "/generate/", long_call.dump());
  ASSERT_GE(client, 0);
  auto both_busy = [](const json& h) {
    return h["replicas"].size() == 2 && h["replicas"][0].value("sequences_in_flight", 0) == 8 &&
           h["replicas"][1].value("sequences_in_flight", 0) == 8;
  };
  ASSERT_TRUE(grpo::testing::health_until(server, both_busy)) << server.log();
  ::close(client);
  EXPECT_TRUE(grpo::testing::health_until(server, [](const json& h) {
    return h.value("sequences_in_flight", -1) == 0 && h.value("cancelled", 0) == 1;
  })) << server.log();
  const auto reply = server.post("/generate/", json{{"prompts", {{1, 2}, {3, 4}}}, {"max_tokens", 3}});
  EXPECT_EQ(reply.status, 200) << reply.raw;
  const json health = server.get("/health/").body;
  EXPECT_EQ(health["requests"], 1) << health;
  EXPECT_EQ(health["cancelled"], 1) << health;
  EXPECT_EQ(server.terminate(), 0) << server.log();
}
