// grpo-rollout under hostile requests and settings: bounded depth, count and
// length; the key kept out of the command line; a warning when exposed.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "cli/cli_util.h"
#include "plugin_paths.h"
#include "rollout/rollout_process.h"

using grpo::testing::RolloutProcess;
using nlohmann::json;

TEST(RolloutHostile, AValueNested100000DeepIs422AndTheServerKeepsServing) {
  RolloutProcess server(grpo::testing::tiny_model_dir());
  const std::string n = std::string(100000, '[') + std::string(100000, ']');
  auto r = server.post_raw("/generate/", "{\"prompts\": [[1, 2]], \"n\": " + n + "}");
  EXPECT_EQ(r.status, 422) << r.raw;
  EXPECT_EQ(r.body.value("field", ""), "body") << r.raw;
  EXPECT_NE(r.body.value("error", "").find("nested deeper than 512"), std::string::npos) << r.raw;
  // A shallow list in a scalar field is quoted briefly, not dumped.
  r = server.post("/generate/", {{"prompts", {{1, 2}}}, {"n", json::array({json::array({1}), 2})}});
  EXPECT_EQ(r.status, 422) << r.raw;
  EXPECT_NE(r.body.value("error", "").find("expected an integer, got a list with 2 item(s)"), std::string::npos);
  // A number past int64's range is refused before any conversion.
  r = server.post_raw("/generate/", "{\"prompts\": [[1, 2]], \"n\": -2.2e52}");
  EXPECT_EQ(r.status, 422) << r.raw;
  EXPECT_EQ(r.body.value("field", ""), "n") << r.raw;
  EXPECT_EQ(server.get("/health/").status, 200);
}

TEST(RolloutHostile, NIsCappedAndCompletionsStopAtTheModelsContext) {
  // The tiny model as one with 64 positions.
  const std::string model = grpo::testing::temp_dir("rollout_short_context") + "/model";
  ASSERT_EQ(grpo::testing::run_host("init-model --arch qwen2 --preset tiny --out " + model).exit_code, 0);
  const std::string config = grpo::testing::read_file(model + "/config.json");
  grpo::testing::write_file(model + "/config.json",
                            std::regex_replace(config, std::regex("\"max_position_embeddings\": *[0-9]+"),
                                               "\"max_position_embeddings\": 64"));
  RolloutProcess server(model, {"--max_n", "4"});
  auto r = server.post("/generate/", {{"prompts", {{1, 2}}}, {"n", 1000000}});
  EXPECT_EQ(r.status, 422) << r.raw;
  EXPECT_EQ(r.body.value("field", ""), "n");
  EXPECT_NE(r.body.value("error", "").find("over the server's limit of 4 (--max_n)"), std::string::npos) << r.raw;

  r = server.post("/generate/", {{"prompts", {{1, 2, 3}}}, {"max_tokens", 20000}, {"temperature", 0},
                                 {"generation_kwargs", {{"ignore_eos", true}}}});
  ASSERT_EQ(r.status, 200) << r.raw;
  EXPECT_EQ(r.body["completion_ids"][0].size(), 64u - 3);
}

TEST(RolloutHostile, TheKeyComesFromAFileOrTheEnvironmentAndAnExposedServerIsWarnedAbout) {
  const std::string dir = grpo::testing::temp_dir("rollout_key_file");
  grpo::testing::write_file(dir + "/key", "s3cret\n");
  {
    RolloutProcess server(grpo::testing::tiny_model_dir(), {"--api_key_file", dir + "/key"}, "s3cret", false);
    EXPECT_EQ(server.get("/health/").status, 401);
    EXPECT_EQ(server.get("/health/", "s3cret").status, 200);
  }
  ::setenv("GRPO_ROLLOUT_API_KEY", "from-env", 1);
  {
    RolloutProcess server(grpo::testing::tiny_model_dir(), {"--host", "127.0.0.1"}, "from-env", false);
    EXPECT_EQ(server.get("/health/").status, 401);
    EXPECT_EQ(server.get("/health/", "from-env").status, 200);
  }
  ::unsetenv("GRPO_ROLLOUT_API_KEY");
  // Bound to every interface without a key: it starts, and says what that exposes.
  const auto r = grpo::testing::run_shell("timeout -s TERM 3 " + std::string(GRPO_ROLLOUT_EXE) + " --model " +
                                          grpo::testing::tiny_model_dir() + " --host 0.0.0.0 --port 0 --num_threads 1");
  EXPECT_NE(r.output.find("listening on 0.0.0.0 without an API key"), std::string::npos) << r.output;
}

// Headers announcing a chunked body, and no body yet: refused at once, before
// anything of the body is read (a chunked body has no length to check).
TEST(RolloutHostile, AChunkedBodyIsRefusedBeforeItIsRead) {
  RolloutProcess server(grpo::testing::tiny_model_dir());
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(server.port()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  timeval timeout{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  const std::string head = "POST /generate/ HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                           "Transfer-Encoding: chunked\r\n\r\n";
  ASSERT_EQ(::send(fd, head.data(), head.size(), 0), static_cast<ssize_t>(head.size()));
  char buffer[512] = {};
  const ssize_t n = ::recv(fd, buffer, sizeof buffer - 1, 0);
  ::close(fd);
  ASSERT_GT(n, 0) << "no answer within 10 s";
  EXPECT_EQ(std::string(buffer, 12), "HTTP/1.1 411") << buffer;
  EXPECT_EQ(server.get("/health/").status, 200);
}

// SIGTERM while a communicator waits for a trainer that never comes: the
// server stops at once instead of waiting out --comm_timeout_s.
TEST(RolloutHostile, SigtermDuringAPendingCommunicatorStopsAtOnce) {
  RolloutProcess server(grpo::testing::tiny_model_dir(), {"--comm_timeout_s", "120"});
  auto init = server.post("/init_communicator/",
                          {{"host", "127.0.0.1"}, {"port", grpo::testing::free_port()}, {"world_size", 2}});
  ASSERT_EQ(init.status, 200) << init.raw;
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the store is up and waiting
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(server.terminate(), 0) << server.log();
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 5.0) << server.log();
}

namespace {

// A connection to the server from `source` (any 127.x address reaches the
// loopback server, which lets one test play several clients).
int connect_from(const char* source, int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in local{};
  local.sin_family = AF_INET;
  ::inet_pton(AF_INET, source, &local.sin_addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof local) != 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return -1;
  timeval timeout{8, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  return fd;
}

void send_text(int fd, const std::string& text) { (void)::send(fd, text.data(), text.size(), MSG_NOSIGNAL); }

// What the server sends until it closes the connection (8 s at most per read).
std::string answer(int fd) {
  std::string text;
  char buffer[1024];
  for (ssize_t n; (n = ::recv(fd, buffer, sizeof buffer, 0)) > 0;) text.append(buffer, static_cast<size_t>(n));
  return text;
}

}  // namespace

// Slowloris: clients that send their request a few bytes at a time, well
// inside httplib's 5 s per-read timeout, are cut off at --client_timeout_s;
// one address cannot take every connection; over the caps a client gets a
// 503 it can read, and the server keeps answering others throughout.
TEST(RolloutHostile, SlowClientsAreCutOffAndNoClientCanTakeEveryConnection) {
  RolloutProcess server(grpo::testing::tiny_model_dir(), {"--max_connections", "6", "--max_connections_per_client",
                                                          "3", "--client_timeout_s", "2"});
  ASSERT_NE(server.port(), 0);
  const auto start = std::chrono::steady_clock::now();
  std::vector<int> slow;
  for (int i = 0; i < 3; ++i) {
    slow.push_back(connect_from("127.0.0.2", server.port()));
    ASSERT_GE(slow.back(), 0) << "cannot connect from 127.0.0.2";
  }
  send_text(slow[0], "GET /health/ HTTP/1.1\r\nHost: x\r\n");
  send_text(slow[1], "POST /generate/ HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n");
  send_text(slow[2], "POST /generate/ HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     "Content-Length: 400\r\n\r\n{\"prompts\": ");
  std::atomic<bool> done{false};
  std::thread trickle([&] {  // a header line or a body byte every 0.4 s, for 6 s
    for (int tick = 0; tick < 15 && !done; ++tick) {
      send_text(slow[0], "X-Slow: 1\r\n");
      send_text(slow[1], "X-Slow: 1\r\n");
      send_text(slow[2], " ");
      std::this_thread::sleep_for(std::chrono::milliseconds(400));
    }
  });

  // A fourth connection from the same address is refused, readably.
  const int extra = connect_from("127.0.0.2", server.port());
  send_text(extra, "GET /health/ HTTP/1.1\r\nHost: x\r\n\r\n");
  const std::string refused = answer(extra);
  ::close(extra);
  EXPECT_EQ(refused.substr(0, 12), "HTTP/1.1 503") << refused;
  EXPECT_NE(refused.find("--max_connections_per_client"), std::string::npos) << refused;

  // Other clients are served meanwhile.
  EXPECT_EQ(server.get("/health/").status, 200);
  auto generated = server.post("/generate/", {{"prompts", {{1, 2, 3}}}, {"max_tokens", 4}});
  EXPECT_EQ(generated.status, 200) << generated.raw;

  // Up to the cap in all: then everyone gets a 503 naming it.
  std::vector<int> idle;
  for (int i = 0; i < 3; ++i) idle.push_back(connect_from("127.0.0.3", server.port()));
  // Until the server has taken them in (on a loaded machine, more than a moment); within a second,
  // well before the slow requests' 2 s are up and free their connections.
  auto busy = server.get("/health/");
  for (int poll = 0; poll < 20 && busy.status != 503; ++poll) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    busy = server.get("/health/");
  }
  EXPECT_EQ(busy.status, 503) << busy.raw;
  EXPECT_NE(busy.body.value("error", "").find("--max_connections"), std::string::npos) << busy.raw;

  // The slow requests end at 2 s with a 408, although each of them kept sending.
  for (int fd : slow) {
    const std::string reply = answer(fd);
    EXPECT_EQ(reply.substr(0, 12), "HTTP/1.1 408") << reply;
    EXPECT_NE(reply.find("--client_timeout_s"), std::string::npos) << reply;
  }
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GT(elapsed, 1.5);
  EXPECT_LT(elapsed, 4.0);
  done = true;
  trickle.join();
  for (int fd : slow) ::close(fd);
  for (int fd : idle) ::close(fd);
  // Every slot is free again.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(server.get("/health/").status, 200);
}
