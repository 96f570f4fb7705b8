// The sampler's HTTP side of the rollout protocol: waiting for /health/,
// /get_world_size/ and /generate/, every call bounded by a timeout so that a
// server that stops answering fails the call instead of hanging the trainer.
#pragma once

#include <chrono>
#include <string>

#include <nlohmann/json.hpp>

namespace grpo::external {

struct ServerOptions {
  std::string base_url;  // http://HOST:PORT, no trailing path
  std::string api_key;   // Authorization: Bearer, when set
  double request_timeout_s = 600;  // read/write limit of one call (a whole /generate/ answer)
  double connect_timeout_s = 10;
  int retries = 3;          // extra attempts of an idempotent call that got no answer or a 5xx
  double backoff_s = 1.0;   // wait before the first retry, doubled after each
  bool retry_generate = false;  // /generate/ is retried too (a seeded call gives the same answer)
};

// An HTTP answer, or why there was none.
struct Reply {
  int status = 0;  // 0: no answer (connection refused, reset, timed out)
  std::string body;
  std::string failure;  // why status is 0
};

class RolloutHttp {
 public:
  explicit RolloutHttp(ServerOptions options);

  // Polls GET /health/ until it answers 200 or `timeout_s` passes; throws
  // grpo::Error naming the URL and what to do. A 401 fails at once (a wrong
  // api_key does not fix itself by waiting).
  void wait_until_healthy(double timeout_s) const;

  // GET /get_world_size/ (retried).
  int world_size() const;

  // POST /generate/ and the parsed answer; throws grpo::Error naming the URL
  // and the server's message. Safe to call from several threads at once.
  nlohmann::json generate(const nlohmann::json& body) const;

  const ServerOptions& options() const { return options_; }

 private:
  Reply get(const std::string& path, std::chrono::milliseconds read_timeout) const;
  Reply post(const std::string& path, const std::string& body) const;
  // `attempt` retried on no answer or a 5xx, up to options_.retries times with backoff.
  template <class F>
  Reply with_retries(int retries, F attempt) const;

  ServerOptions options_;
};

// "HTTP 422: prompts[0][3]: ..." or "no answer (Connection refused)": the
// server's JSON "error" when it gave one.
std::string describe(const Reply& reply);

}  // namespace grpo::external
