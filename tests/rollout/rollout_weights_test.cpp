// Weight transfer into a running grpo-rollout over Gloo: the trainer side
// (WeightSender) pushes perturbed weights, and the server's greedy output
// must then equal the in-process engine's with those same weights.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/types.h>
#include <torch/utils.h>

#include "model/engine.h"
#include "model/weights.h"
#include "rollout/rollout_process.h"
#include "rollout/comm_group.h"
#include "rollout/weight_sender.h"

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
  return grpo::testing::engine_run(engine, {kPrompt}, 1, 0, kMaxTokens)[0].ids;
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

// Whether a TCP connection to address:port is accepted.
bool accepts(const char* address, int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, address, &addr.sin_addr);
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
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

  WeightSender sender({{server.base_url()}});
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
  WeightSender sender({{server.base_url()}});
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

// The server listens on 127.0.0.1 (its default): so does the store it hosts
// for the group. LibTorch's own would listen on every address, 127.0.0.2
// included.
TEST(RolloutWeights, TheStoreListensOnTheServersAddressOnly) {
  RolloutProcess server(grpo::testing::tiny_model_dir(), {"--comm_timeout_s", "30"});
  ASSERT_NE(server.port(), 0);
  WeightSender sender({{server.base_url()}});
  const int port = grpo::testing::free_port();
  sender.connect("127.0.0.1", port, std::chrono::seconds(30));
  EXPECT_TRUE(accepts("127.0.0.1", port));
  EXPECT_FALSE(accepts("127.0.0.2", port)) << "the store listens beyond the server's address";
  EXPECT_EQ(server.log().find("socket"), std::string::npos) << "no failed-bind warnings: " << server.log();
  sender.close();
}

// Two servers in one group: the first hosts the store, the second joins it
// as rank 1, the trainer is rank 2, and each tensor is broadcast once.
TEST(RolloutWeights, OneGroupPushesToTwoServers) {
  RolloutProcess first(grpo::testing::tiny_model_dir(), {"--comm_timeout_s", "30"});
  RolloutProcess second(grpo::testing::tiny_model_dir(), {"--comm_timeout_s", "30"});
  ASSERT_NE(first.port(), 0);
  ASSERT_NE(second.port(), 0);
  Perturbed perturbed(at::kBFloat16);
  const auto want = greedy(perturbed.engine);
  WeightSender sender({{first.base_url(), second.base_url()}});
  sender.connect("127.0.0.1", grpo::testing::free_port(), std::chrono::seconds(30));
  EXPECT_EQ(sender.world_size(), 3);
  sender.send_all(perturbed.tensors, /*bucket_bytes=*/16 << 10);
  sender.reset_prefix_cache();
  for (const RolloutProcess* server : {&first, &second}) {
    EXPECT_EQ(server_greedy(*server), want);
    EXPECT_EQ(server->get("/health/").body["tensors_received"], perturbed.tensors.size());
  }
  sender.close();
  EXPECT_NE(second.log().find("joining the group at 127.0.0.1"), std::string::npos) << second.log();
}

// A group over several servers needs each one's rank; a bad one is a 422 naming it.
TEST(RolloutWeights, AGroupRankOutsideTheWorldIsRefused) {
  RolloutProcess server(grpo::testing::tiny_model_dir());
  ASSERT_NE(server.port(), 0);
  const int port = grpo::testing::free_port();
  auto r = server.post("/init_communicator/", {{"host", "127.0.0.1"}, {"port", port}, {"world_size", 3}});
  EXPECT_EQ(r.status, 422) << r.raw;
  EXPECT_EQ(r.body.value("field", ""), "world_size") << r.raw;
  r = server.post("/init_communicator/", {{"host", "127.0.0.1"}, {"port", port}, {"world_size", 3}, {"rank", 2}});
  EXPECT_EQ(r.status, 422) << r.raw;
  EXPECT_EQ(r.body.value("field", ""), "rank") << r.raw;
  EXPECT_NE(r.body.value("error", "").find("the last rank of 3 is the trainer's"), std::string::npos) << r.raw;
}

// Beyond TRL: /get_world_size/ names the server's device, and
// /init_communicator/ takes the backend; NCCL is refused where it cannot work.
TEST(RolloutWeights, TheServerNamesItsDeviceAndRefusesABackendItCannotJoin) {
  RolloutProcess server(grpo::testing::tiny_model_dir());
  ASSERT_NE(server.port(), 0);
  const char* device = std::getenv("GRPO_TEST_ROLLOUT_DEVICE");
  const bool on_gpu = device && std::string(device).rfind("cuda", 0) == 0;
  auto size = server.get("/get_world_size/");
  EXPECT_EQ(size.body["world_size"], 1) << size.raw;
  EXPECT_EQ(size.body.value("device", "").rfind(on_gpu ? "cuda" : "cpu", 0), 0u) << size.raw;
  EXPECT_EQ(size.body.contains("device_uuid"), on_gpu) << size.raw;
  const int port = grpo::testing::free_port();
  auto r = server.post("/init_communicator/", {{"host", "127.0.0.1"}, {"port", port}, {"backend", "udp"}});
  EXPECT_EQ(r.status, 422) << r.raw;
  EXPECT_EQ(r.body.value("field", ""), "backend") << r.raw;
  // On the CPU NCCL has no GPU; on a GPU, a trainer naming this GPU's UUID shares it.
  const std::string trainer_uuid = on_gpu ? size.body.value("device_uuid", "") : "cpu";
  r = server.post("/init_communicator/", {{"host", "127.0.0.1"}, {"port", port}, {"backend", "nccl"},
                                          {"client_device_uuid", trainer_uuid}});
  EXPECT_EQ(r.status, 422) << r.raw;
  EXPECT_EQ(r.body.value("field", ""), "backend") << r.raw;
  EXPECT_NE(r.body.value("error", "").find(on_gpu ? "one rank per GPU" : "NCCL needs its model on a GPU"),
            std::string::npos) << r.raw;
}

// The trainer's weights where the server's engine is (the CPU, or the GPU
// under GRPO_TEST_ROLLOUT_DEVICE): one GPU cannot hold both ends of an NCCL
// group, so the push goes over Gloo and says why, and the weights arrive.
TEST(RolloutWeights, APushFromTheServersOwnDeviceGoesOverGlooAndArrives) {
  RolloutProcess server(grpo::testing::tiny_model_dir(), {"--comm_timeout_s", "30"});
  ASSERT_NE(server.port(), 0);
  const std::string device = server.get("/get_world_size/").body.value("device", "cpu");
  Perturbed perturbed;
  NamedTensors on_device;
  for (const auto& [name, t] : perturbed.tensors) on_device.emplace_back(name, t.to(at::Device(device)));
  WeightSender sender({{server.base_url()}});
  sender.connect("127.0.0.1", grpo::testing::free_port(), std::chrono::seconds(30), at::Device(device));
  EXPECT_EQ(sender.backend().backend, grpo::rollout::Backend::Gloo);
  EXPECT_NE(sender.backend().why.find(device == "cpu" ? "host memory" : "one rank per GPU"), std::string::npos)
      << sender.backend().why;
  sender.send_all(on_device, /*bucket_bytes=*/16 << 10);
  sender.reset_prefix_cache();
  EXPECT_EQ(server_greedy(server), greedy(perturbed.engine));
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

// /init_communicator/ calls that no trainer joins: the first forms (and
// times out); of those queued behind it only the newest counts. Before, each
// queued call waited out --comm_timeout_s in turn, and /update_named_param/
// then reported the first one's failure instead of answering for itself.
TEST(RolloutWeights, StaleInitsAreReplacedAndEachCallAnswersForItself) {
  // 4 s gives the trainer's store client, which retries with a backoff, room
  // to join on a loaded machine once the server starts hosting.
  RolloutProcess server(grpo::testing::tiny_model_dir(), {"--comm_timeout_s", "4"});
  ASSERT_NE(server.port(), 0);
  const int port = grpo::testing::free_port();
  for (int i = 0; i < 3; ++i) {  // nobody joins these; none may share the trainer's port
    int stale = grpo::testing::free_port();
    while (stale == port) stale = grpo::testing::free_port();
    auto r = server.post("/init_communicator/", {{"host", "127.0.0.1"}, {"port", stale}, {"world_size", 2}});
    ASSERT_EQ(r.status, 200) << r.raw;
  }
  auto init = server.post("/init_communicator/", {{"host", "127.0.0.1"}, {"port", port}, {"world_size", 2}});
  ASSERT_EQ(init.status, 200) << init.raw;
  // The first call forms for 4 s, then this one starts hosting (three stale
  // calls waited out in turn would take 12 s). The trainer joins once the
  // store listens: a store client whose first try fails backs off for a
  // jittered delay that can outlast its whole timeout.
  const auto posted = std::chrono::steady_clock::now();
  while (!grpo::testing::port_answers(port) && std::chrono::steady_clock::now() - posted < std::chrono::seconds(30))
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_LT(std::chrono::steady_clock::now() - posted, std::chrono::seconds(10)) << "the stale calls were waited out";
  auto group = grpo::rollout::CommGroup::create("127.0.0.1", port, /*rank=*/1, 2, std::chrono::seconds(14));
  auto update = server.post("/update_named_param/",
                            {{"name", "model.norm.weight"}, {"dtype", "torch.float32"}, {"shape", {64}}});
  EXPECT_EQ(update.status, 200) << update.raw;
  group->send(at::linspace(-30, 30, 64), "model.norm.weight");
  group->barrier("model.norm.weight");
  auto reset = server.post("/reset_prefix_cache/", json::object());
  EXPECT_EQ(reset.status, 200) << "the stale calls' failure is not this call's: " << reset.raw;
  EXPECT_EQ(server.get("/health/").body["tensors_received"], 1);
  const std::string log = server.log();
  EXPECT_NE(log.find("a newer /init_communicator/ replaced it"), std::string::npos) << log;
  EXPECT_EQ(server.terminate(), 0) << server.log();
}

TEST(RolloutWeights, SenderErrorsNameTheStep) {
  WeightSender sender({{"http://127.0.0.1:" + std::to_string(grpo::testing::free_port())}});
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

namespace {

// A client that announces one tensor and broadcasts another: it speaks to
// the server over HTTP and joins the group itself, as a third-party
// trainer would, instead of going through WeightSender.
struct HandRolledTrainer {
  std::unique_ptr<grpo::rollout::CommGroup> group;
  explicit HandRolledTrainer(const RolloutProcess& server) {
    const int port = grpo::testing::free_port();
    auto init = server.post("/init_communicator/", {{"host", "127.0.0.1"}, {"port", port}, {"world_size", 2}});
    EXPECT_EQ(init.status, 200) << init.raw;
    group = grpo::rollout::CommGroup::create("127.0.0.1", port, /*rank=*/1, 2, std::chrono::seconds(10));
  }
  // Announces model.norm.weight as float32 [64] and broadcasts `sent`.
  grpo::testing::HttpReply push_norm(const RolloutProcess& server, at::Tensor sent) {
    auto update = server.post("/update_named_param/",
                              {{"name", "model.norm.weight"}, {"dtype", "torch.float32"}, {"shape", {64}}});
    EXPECT_EQ(update.status, 200) << update.raw;
    group->send(sent, "model.norm.weight");
    group->barrier("model.norm.weight");
    return server.post("/reset_prefix_cache/", json::object());
  }
};

// model.norm.weight is announced as float32 [64] (256 bytes) and broadcast
// as `dtype`: the next call is an error saying "`wrong` bytes than the 256
// announced", the old weights stay, and the group still works for a correct
// update.
void expect_refused_and_the_weights_kept(at::ScalarType dtype, const std::string& wrong) {
  RolloutProcess server(grpo::testing::tiny_model_dir(), {"--comm_timeout_s", "10"});
  ASSERT_NE(server.port(), 0);
  const auto before = server_greedy(server);
  HandRolledTrainer trainer(server);
  const at::Tensor norm = at::linspace(-30, 30, 64);  // changes the greedy output once loaded
  auto reply = trainer.push_norm(server, norm.to(dtype));
  EXPECT_EQ(reply.status, 500) << reply.raw;
  const std::string error = reply.body.value("error", "");
  EXPECT_NE(error.find("model.norm.weight"), std::string::npos) << error;
  EXPECT_NE(error.find(wrong + " bytes than the 256 announced"), std::string::npos) << error;
  EXPECT_EQ(server_greedy(server), before);
  EXPECT_EQ(server.get("/health/").body["tensors_received"], 0);

  reply = trainer.push_norm(server, norm.clone());
  EXPECT_EQ(reply.status, 200) << reply.raw;
  EXPECT_EQ(server.get("/health/").body["tensors_received"], 1);
  EXPECT_NE(server_greedy(server), before);
  EXPECT_EQ(server.terminate(), 0) << server.log();
}

}  // namespace

// Half the bytes: bfloat16 sent where float32 was announced.
TEST(RolloutWeights, AShorterBroadcastThanAnnouncedIsAnErrorAndTheWeightsStay) {
  expect_refused_and_the_weights_kept(at::kBFloat16, "fewer");
}

// Twice the bytes: float64 sent where float32 was announced.
TEST(RolloutWeights, ALongerBroadcastThanAnnouncedIsAnErrorAndTheWeightsStay) {
  expect_refused_and_the_weights_kept(at::kDouble, "more");
}

// Past the receiving buffer's headroom (8 times the announced bytes and a
// page) Gloo fails inside its network thread, where it cannot be caught: the
// server stops with status 3 and says what it was receiving.
TEST(RolloutWeights, ABroadcastPastTheHeadroomStopsTheServerNamingIt) {
  RolloutProcess server(grpo::testing::tiny_model_dir(), {"--comm_timeout_s", "5"});
  ASSERT_NE(server.port(), 0);
  HandRolledTrainer trainer(server);
  try {
    trainer.push_norm(server, at::zeros({1024}, at::kDouble));  // 8192 bytes against 8 x 256 + 4096
  } catch (const TransferError&) {  // the server is gone before the barrier
  }
  EXPECT_EQ(server.terminate(), 3) << server.log();
  const std::string log = server.log();
  EXPECT_NE(log.find("while receiving 'model.norm.weight' (256 bytes announced) the trainer sent more than 8 times"),
            std::string::npos)
      << log;
  EXPECT_EQ(log.find("core dumped"), std::string::npos) << log;
}
