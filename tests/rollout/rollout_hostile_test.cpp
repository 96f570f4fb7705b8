// grpo-rollout under hostile requests and settings: bounded depth, count and
// length; the key kept out of the command line; a warning when exposed.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <regex>
#include <string>
#include <thread>

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
