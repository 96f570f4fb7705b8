// grpo-rollout under calls too large or too long for it: per-call and
// in-flight limits on sequences, calls dropped when their client leaves,
// SIGTERM that cancels what is running, engine failures answered as JSON,
// and bodies read as JSON whatever their Content-Type.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>

#include "cli/cli_util.h"
#include "plugin_paths.h"
#include "rollout/rollout_process.h"

using grpo::testing::HttpReply;
using grpo::testing::health_until;
using grpo::testing::send_post;
using grpo::testing::send_raw;
using grpo::testing::RolloutProcess;
using nlohmann::json;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// A call that keeps the tiny model busy for minutes on one thread: every
// copy runs to the model's context (4,096 positions).
json long_call(int64_t n) {
  return {{"prompts", {{1, 2, 3}}}, {"n", n}, {"max_tokens", 4000}, {"generation_kwargs", {{"ignore_eos", true}}}};
}

int64_t health_value(const RolloutProcess& server, const char* key) {
  return server.get("/health/").body.value(key, int64_t{-1});
}

HttpReply post_as(int port, const std::string& path, const std::string& body, const std::string& content_type) {
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(std::chrono::seconds(60));
  HttpReply r;
  if (auto res = client.Post(path.c_str(), body, content_type.c_str())) {
    r.status = res->status;
    r.raw = res->body;
    r.body = json::parse(res->body, nullptr, /*allow_exceptions=*/false);
  }
  return r;
}

}  // namespace

TEST(RolloutHostile, PromptsTimesNOverThePerCallLimitIs422NamingTheFlag) {
  RolloutProcess server(grpo::testing::tiny_model_dir(), {"--max_sequences_per_call", "8"});
  ASSERT_NE(server.port(), 0);
  auto r = server.post("/generate/", {{"prompts", {{1, 2}, {3, 4}, {5, 6}}}, {"n", 3}, {"max_tokens", 2}});
  EXPECT_EQ(r.status, 422) << r.raw;
  EXPECT_EQ(r.body.value("field", ""), "prompts") << r.raw;
  EXPECT_NE(r.body.value("error", "").find("3 prompts × n 3 = 9 sequences, over the server's limit of 8 sequences "
                                           "per call (--max_sequences_per_call)"),
            std::string::npos)
      << r.raw;
  EXPECT_EQ(server.post("/generate/", {{"prompts", {{1, 2}, {3, 4}}}, {"n", 4}, {"max_tokens", 2}}).status, 200);
  const json conversation = json::array({{{"role", "user"}, {"content", "hi"}}});
  r = server.post("/chat/", {{"messages", json::array({conversation, conversation, conversation})}, {"n", 3}});
  EXPECT_EQ(r.status, 422) << r.raw;
  EXPECT_EQ(r.body.value("field", ""), "messages") << r.raw;
  json infer = json::array();
  for (int i = 0; i < 9; ++i) infer.push_back({{"messages", conversation}});
  r = server.post("/infer/", {{"infer_requests", infer}, {"request_config", {{"max_tokens", 2}}}});
  EXPECT_EQ(r.status, 422) << r.raw;
  EXPECT_EQ(r.body.value("field", ""), "infer_requests") << r.raw;

  // A server whose in-flight limit could never hold one whole call does not start.
  const auto refused = grpo::testing::run_shell(std::string(GRPO_ROLLOUT_EXE) + " --model " +
                                                grpo::testing::tiny_model_dir() + " --port 0 --num_threads 1 "
                                                "--max_sequences_per_call 16 --max_sequences_in_flight 8");
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_NE(refused.output.find("--max_sequences_in_flight 8 is below --max_sequences_per_call 16"),
            std::string::npos)
      << refused.output;
}

// Three calls of 4 sequences arrive inside one batching window: under an
// in-flight limit of 4 the engine takes them one at a time, each answered
// whole; with room for 12 they share one engine call.
TEST(RolloutHostile, CallsOverTheInFlightLimitWaitTheirTurn) {
  for (const int64_t in_flight : {4, 12}) {
    RolloutProcess server(grpo::testing::tiny_model_dir(),
                          {"--max_sequences_per_call", "4", "--max_sequences_in_flight", std::to_string(in_flight),
                           "--batch_wait_ms", "1000"});
    ASSERT_NE(server.port(), 0);
    std::vector<std::future<HttpReply>> calls;
    for (int i = 0; i < 3; ++i)
      calls.push_back(std::async(std::launch::async, [&] {
        return server.post("/generate/", {{"prompts", {{1, 2, 3}}}, {"n", 4}, {"max_tokens", 5}});
      }));
    for (auto& call : calls) {
      const HttpReply r = call.get();
      ASSERT_EQ(r.status, 200) << r.raw;
      EXPECT_EQ(r.body["completion_ids"].size(), 4u);
    }
    const HttpReply health = server.get("/health/");
    EXPECT_EQ(health.body.value("requests", 0), 3) << health.raw;
    EXPECT_EQ(health.body.value("engine_calls", 0), in_flight == 4 ? 3 : 1) << health.raw;
  }
}

// A call waiting for room and a call the engine is running: each is dropped
// once its client closes the connection, and the server is free at once.
TEST(RolloutHostile, ACallWhoseClientGoesAwayIsDropped) {
  RolloutProcess server(grpo::testing::tiny_model_dir(),
                        {"--max_sequences_per_call", "64", "--max_sequences_in_flight", "64"});
  ASSERT_NE(server.port(), 0);
  const int running = send_post(server.port(), "/generate/", long_call(64).dump());
  ASSERT_GE(running, 0);
  ASSERT_TRUE(health_until(server, [](const json& h) { return h.value("sequences_in_flight", 0) == 64; }))
      << server.log();
  const int waiting = send_post(server.port(), "/generate/", long_call(64).dump());
  ASSERT_TRUE(health_until(server, [](const json& h) { return h.value("calls_waiting", 0) == 1; })) << server.log();

  ::close(waiting);
  EXPECT_TRUE(health_until(server, [](const json& h) {
    return h.value("calls_waiting", -1) == 0 && h.value("cancelled", 0) == 1;
  })) << server.log();
  EXPECT_EQ(health_value(server, "sequences_in_flight"), 64);  // the other goes on

  const auto closed = Clock::now();
  ::close(running);
  EXPECT_TRUE(health_until(server, [](const json& h) {
    return h.value("sequences_in_flight", -1) == 0 && h.value("cancelled", 0) == 2;
  })) << server.log();
  // Its 64 sequences would have run on for minutes; the engine is free now.
  const HttpReply next = server.post("/generate/", {{"prompts", {{1, 2}}}, {"max_tokens", 3}});
  EXPECT_EQ(next.status, 200) << next.raw;
  EXPECT_LT(seconds_since(closed), 10.0);
  EXPECT_EQ(health_value(server, "requests"), 1);
  EXPECT_NE(server.log().find("its client went away"), std::string::npos) << server.log();
}

// SIGTERM during a long call: the call answers 503 "server shutting down",
// the call waiting behind it too, and the server exits with status 0 at once
// instead of after the batch.
TEST(RolloutHostile, SigtermCancelsCallsInFlightAndTheServerExitsAtOnce) {
  RolloutProcess server(grpo::testing::tiny_model_dir(),
                        {"--max_sequences_per_call", "64", "--max_sequences_in_flight", "64"});
  ASSERT_NE(server.port(), 0);
  auto running = std::async(std::launch::async, [&] { return server.post("/generate/", long_call(64)); });
  ASSERT_TRUE(health_until(server, [](const json& h) { return h.value("sequences_in_flight", 0) == 64; }))
      << server.log();
  auto waiting = std::async(std::launch::async, [&] { return server.post("/generate/", long_call(8)); });
  ASSERT_TRUE(health_until(server, [](const json& h) { return h.value("calls_waiting", 0) == 1; })) << server.log();

  const auto start = Clock::now();
  EXPECT_EQ(server.terminate(), 0) << server.log();
  const double stopped = seconds_since(start);
  EXPECT_LT(stopped, 10.0) << server.log();
  std::printf("SIGTERM during a call of 64 sequences: the server exited after %.2f s\n", stopped);
  for (auto* call : {&running, &waiting}) {
    const HttpReply r = call->get();
    EXPECT_EQ(r.status, 503) << r.raw;
    EXPECT_NE(r.body.value("error", "").find("server shutting down"), std::string::npos) << r.raw;
  }
}

// The engine runs out of memory (an address-space limit set on the running
// server): the answer is JSON naming the call and what to change, the first
// line of LibTorch's message and no backtrace; the server goes on serving.
TEST(RolloutHostile, AnEngineFailureIsAJsonErrorNamingTheCallNotABacktrace) {
  RolloutProcess server(grpo::testing::tiny_model_dir());
  ASSERT_NE(server.port(), 0);
  std::ifstream status("/proc/" + std::to_string(server.pid()) + "/status");
  std::string line;
  int64_t vm_kb = 0;
  while (std::getline(status, line))
    if (line.rfind("VmSize:", 0) == 0) vm_kb = std::stoll(line.substr(7));
  ASSERT_GT(vm_kb, 0);
  const rlimit limit{static_cast<rlim_t>(vm_kb + (512 << 10)) << 10, RLIM_INFINITY};
  ASSERT_EQ(::prlimit(server.pid(), RLIMIT_AS, &limit, nullptr), 0);

  // 8 prompts of 2,000 tokens × n 256: gigabytes of keys and values.
  json prompts = json::array();
  for (int p = 0; p < 8; ++p) prompts.push_back(std::vector<int>(2000, 5 + p));
  const HttpReply r = server.post("/generate/", {{"prompts", prompts}, {"n", 256}, {"max_tokens", 10}});
  EXPECT_EQ(r.status, 500) << r.raw;
  const std::string error = r.body.value("error", "");
  EXPECT_NE(error.find("generation failed for 8 prompt(s) × n 256 = 2048 sequences with max_tokens 10"),
            std::string::npos)
      << r.raw;
  EXPECT_NE(error.find("--max_sequences_in_flight"), std::string::npos) << r.raw;
  EXPECT_EQ(error.find("Exception raised from"), std::string::npos) << r.raw;
  EXPECT_EQ(error.find("frame #"), std::string::npos) << r.raw;
  EXPECT_EQ(error.find('\n'), std::string::npos) << r.raw;

  const rlimit unlimited{RLIM_INFINITY, RLIM_INFINITY};
  ASSERT_EQ(::prlimit(server.pid(), RLIMIT_AS, &unlimited, nullptr), 0);
  EXPECT_EQ(server.post("/generate/", {{"prompts", {{1, 2}}}, {"max_tokens", 3}}).status, 200);
}

// `curl -d` sends application/x-www-form-urlencoded; httplib parsed such
// bodies as forms and refused any over 8 KiB with a 413 naming 64 MiB.
TEST(RolloutHostile, BodiesAreJsonWhateverTheirContentTypeAndA413NamesTheRealSizes) {
  RolloutProcess server(grpo::testing::tiny_model_dir(), {"--max_body_bytes", "20000"});
  ASSERT_NE(server.port(), 0);
  const json body = {{"prompts", {std::vector<int>(3500, 123)}}, {"max_tokens", 2}};
  const std::string text = body.dump();
  ASSERT_GT(text.size(), 10000u);
  for (const char* type : {"application/x-www-form-urlencoded", "text/plain", "multipart/form-data; boundary=x"}) {
    const HttpReply r = post_as(server.port(), "/generate/", text, type);
    EXPECT_EQ(r.status, 200) << type << ": " << r.raw;
    EXPECT_EQ(r.body["prompt_ids"][0].size(), 3500u) << type;
  }
  const std::string large = json{{"prompts", {std::vector<int>(6000, 123)}}}.dump();
  const HttpReply r = post_as(server.port(), "/generate/", large, "application/x-www-form-urlencoded");
  EXPECT_EQ(r.status, 413) << r.raw;
  EXPECT_NE(r.body.value("error", "").find("request body of " + std::to_string(large.size()) +
                                           " bytes, over the server's limit of 20000 bytes (--max_body_bytes)"),
            std::string::npos)
      << r.raw;

  // A POST with neither a length nor chunks has no body (as `curl -X POST` sends it), rather than one read
  // until the client gives up.
  const int fd = send_raw(server.port(), "POST /reset_prefix_cache/ HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_GE(fd, 0);
  char buffer[512] = {};
  const ssize_t n = ::recv(fd, buffer, sizeof buffer - 1, 0);
  ::close(fd);
  ASSERT_GT(n, 0) << "no answer within 20 s";
  EXPECT_EQ(std::string(buffer, 12), "HTTP/1.1 200") << buffer;
}
