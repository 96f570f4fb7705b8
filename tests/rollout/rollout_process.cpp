#include "rollout/rollout_process.h"

#include <algorithm>
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <regex>
#include <thread>

#include "cli/cli_util.h"
#include "tokenizer/tokenizer.h"
#include "plugin_paths.h"

namespace grpo::testing {

int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

bool port_answers(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const bool answers = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return answers;
}

const std::string& tiny_model_dir() {
  static const std::string dir = [] {
    // One per process: ctest runs test cases in parallel processes.
    std::string d = temp_dir("rollout_tiny_model_" + std::to_string(::getpid()));
    CommandResult r = run_host("init-model --arch qwen2 --preset tiny --out '" + d + "'");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return d;
  }();
  return dir;
}

RolloutProcess::RolloutProcess(const std::string& model_dir, const std::vector<std::string>& extra_args,
                               const std::string& api_key, bool key_as_flag)
    : api_key_(api_key) {
  static int counter = 0;
  log_path_ = temp_dir("rollout_log_" + std::to_string(::getpid()) + "_" + std::to_string(counter++)) + "/server.log";
  std::vector<std::string> args = {GRPO_ROLLOUT_EXE, "--model", model_dir, "--port", "0", "--num_threads", "1"};
  if (!api_key.empty() && key_as_flag) args.insert(args.end(), {"--api_key", api_key});
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  // scripts/gpu-check.sh runs the server tests again with the engine on the GPU.
  // In float32 unless a test asks otherwise (a GPU's default is bfloat16): the tests compare its greedy
  // ids with a float32 engine's, which near-tied logits of a tiny random model would part in bfloat16.
  if (const char* device = std::getenv("GRPO_TEST_ROLLOUT_DEVICE"); device && *device) {
    args.insert(args.end(), {"--device", device});
    if (std::find(args.begin(), args.end(), "--torch_dtype") == args.end() &&
        std::find(args.begin(), args.end(), "--dtype") == args.end())
      args.insert(args.end(), {"--torch_dtype", "float32"});
  }
  pid_ = ::fork();
  if (pid_ == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);  // no server outlives a crashed test
    int fd = ::open(log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  // The server prints its port once bound; it serves right after.
  const std::regex listening("listening on http://127\\.0\\.0\\.1:([0-9]+)/");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline && port_ == 0) {
    std::smatch m;
    std::string text = log();
    if (std::regex_search(text, m, listening)) port_ = std::stoi(m[1]);
    else std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
      pid_ = -1;
      break;
    }
  }
  for (int i = 0; port_ != 0 && i < 100; ++i) {
    if (get("/health/", api_key_).status == 200) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ADD_FAILURE() << "grpo-rollout did not come up; its log:\n" << log();
  port_ = 0;
}

RolloutProcess::~RolloutProcess() {
  if (pid_ > 0) terminate();
}

void RolloutProcess::send(int sig) const {
  if (pid_ > 0) ::kill(pid_, sig);
}

int RolloutProcess::terminate() {
  if (pid_ <= 0) return -1;
  ::kill(pid_, SIGTERM);
  int status = 0;
  for (int i = 0; i < 2000; ++i) {
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
  return -1;
}

std::string RolloutProcess::log() const { return read_file(log_path_); }

namespace {

HttpReply to_reply(const httplib::Result& res) {
  HttpReply r;
  if (!res) return r;
  r.status = res->status;
  r.raw = res->body;
  r.body = nlohmann::json::parse(res->body, nullptr, /*allow_exceptions=*/false);
  return r;
}

httplib::Headers auth(const std::string& token) {
  if (token.empty()) return {};
  return {{"Authorization", "Bearer " + token}};
}

}  // namespace

HttpReply RolloutProcess::get(const std::string& path, const std::string& token) const {
  httplib::Client client("127.0.0.1", port_);
  client.set_read_timeout(std::chrono::seconds(60));
  return to_reply(client.Get(path.c_str(), auth(token)));
}

HttpReply RolloutProcess::post(const std::string& path, const nlohmann::json& body, const std::string& token) const {
  return post_raw(path, body.dump(), token);
}

HttpReply RolloutProcess::post_raw(const std::string& path, const std::string& body, const std::string& token) const {
  httplib::Client client("127.0.0.1", port_);
  client.set_read_timeout(std::chrono::seconds(60));
  return to_reply(client.Post(path.c_str(), auth(token), body, "application/json"));
}

bool health_until(const RolloutProcess& server, const std::function<bool(const nlohmann::json&)>& pred) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    const HttpReply h = server.get("/health/");
    if (h.status == 200 && pred(h.body)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

int send_raw(int port, const std::string& request) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  timeval timeout{20, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  (void)::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  return fd;
}

int send_post(int port, const std::string& path, const std::string& body) {
  return send_raw(port, "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                        "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body);
}

std::vector<model::Completion> engine_run(model::Engine& engine, const std::vector<std::vector<int32_t>>& prompts,
                                          int64_t n, uint64_t seed, int64_t max_tokens, int64_t top_k) {
  static const int32_t eos = *tok::Tokenizer::from_dir(tiny_model_dir()).eos_id();
  std::vector<model::GenerateRequest> requests;
  for (const auto& p : prompts) requests.push_back({p, n, seed, {eos}});
  model::SamplingParams params;
  params.top_k = top_k;
  params.max_new_tokens = max_tokens;
  return engine.generate(requests, params);
}

}  // namespace grpo::testing
