// A grpo-rollout process for tests: started on a free port as a user would
// start it, driven over HTTP, stopped with SIGTERM.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/engine.h"

namespace grpo::testing {

struct HttpReply {
  int status = 0;  // 0: no answer (a dropped connection)
  nlohmann::json body;
  std::string raw;
};

class RolloutProcess {
 public:
  // Starts grpo-rollout --model model_dir --port 0 plus `extra_args` and
  // waits for /health/. Fails the test (ADD_FAILURE) and returns with
  // port() == 0 when it does not come up.
  // `api_key` is what the test sends; with key_as_flag it is also given as
  // --api_key (else the server finds it in extra_args or its environment).
  RolloutProcess(const std::string& model_dir, const std::vector<std::string>& extra_args = {},
                 const std::string& api_key = "", bool key_as_flag = true);
  ~RolloutProcess();  // SIGTERM, if still running

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  std::string base_url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  HttpReply get(const std::string& path, const std::string& token = "") const;
  HttpReply post(const std::string& path, const nlohmann::json& body, const std::string& token = "") const;
  HttpReply post_raw(const std::string& path, const std::string& body, const std::string& token = "") const;

  // Sends `sig` (SIGSTOP: a server that stalls; SIGCONT: it recovers).
  void send(int sig) const;
  // Sends SIGTERM and returns the exit status (-1 if it did not exit in 20 s).
  int terminate();
  std::string log() const;  // what the server wrote to stderr

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  std::string api_key_;
  std::string log_path_;
};

// A TCP port that was free a moment ago (bound to port 0, then released).
int free_port();

// Whether something accepts connections on 127.0.0.1:port.
bool port_answers(int port);

// Polls /health/ until pred holds (true) or 20 s pass (false).
bool health_until(const RolloutProcess& server, const std::function<bool(const nlohmann::json&)>& pred);

// A raw connection to 127.0.0.1:port that sends `request` and is left open
// for the caller to read or close (a client that stays, or goes away); -1
// when it cannot connect. Reads time out after 20 s.
int send_raw(int port, const std::string& request);
// send_raw of a POST of `body` (JSON) to `path`.
int send_post(int port, const std::string& path, const std::string& body);

// A tiny Qwen2 model with a ChatML tokenizer, created once per test binary.
const std::string& tiny_model_dir();

// What a server's engine gives for a seeded request: `engine`'s completions
// of `prompts`, n each, sampled with `seed` and top_k (1: greedy), stopping
// at tiny_model_dir()'s eos id — the oracle the servers' outputs meet.
std::vector<model::Completion> engine_run(model::Engine& engine, const std::vector<std::vector<int32_t>>& prompts,
                                          int64_t n, uint64_t seed, int64_t max_tokens, int64_t top_k = 1);

}  // namespace grpo::testing
