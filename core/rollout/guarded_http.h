// An httplib server that bounds what clients can hold: open connections in
// all and per client address, and the time to send one whole request (line,
// headers, body) and to take its answer. httplib alone times out each recv,
// so a client that sends one byte every few seconds (slowloris) keeps a
// worker for ever, and 64 of them starve every other caller.
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>

namespace grpo::rollout {

struct ConnectionLimits {
  int max_connections = 256;            // in all; more are answered 503 and closed
  int max_per_client = 128;             // from one address; a single client cannot take them all
  std::chrono::milliseconds request_time{30000};  // to send one request, and to take one answer
};

class GuardedHttpServer : public httplib::Server {
 public:
  explicit GuardedHttpServer(ConnectionLimits limits);

  // Shuts open connections down, so that stopping does not wait for idle
  // keep-alive connections or slow clients: idle ones at once, those in the
  // middle of a request once it is answered or `grace` has passed (so calls
  // cancelled by the stop can still say so).
  void close_connections(std::chrono::milliseconds grace = std::chrono::milliseconds(0));

  // True when the current thread's request failed because its client ran
  // out of request_time; the error handler answers 408 then instead of 400.
  static bool request_timed_out();

  // False once the client of the request the current thread handles has
  // closed its connection (or it failed): its answer has nowhere to go.
  static bool client_connected();

  // Runs on every request once its headers are in, before routing and before
  // httplib reads the body (httplib's own hook, which no public setter reaches
  // in this version).
  void set_request_setup(std::function<void(httplib::Request&)> setup) { setup_ = std::move(setup); }

  const ConnectionLimits& limits() const { return limits_; }

 private:
  bool process_and_close_socket(socket_t sock) override;
  // Counts the connection in, or says why it is refused ("" when admitted),
  // in the order the connections were accepted (their tickets, below).
  std::string admit(socket_t sock, const std::string& client);
  void release(socket_t sock, const std::string& client);
  void set_busy(socket_t sock, bool busy);

  ConnectionLimits limits_;
  std::mutex mutex_;
  std::set<socket_t> open_;
  std::set<socket_t> busy_;  // in the middle of a request
  std::map<std::string, int> per_client_;
  // Workers take connections in the order they were accepted but could count
  // them in another: each connection's task holds a ticket, and admit()
  // waits for the tickets before it, so that the first to come is the first
  // served when a cap is reached.
  std::atomic<uint64_t> tickets_{0};  // given out by the listening thread
  uint64_t admitted_ = 0;             // tickets through admit()
  std::condition_variable turn_;
  std::function<void(httplib::Request&)> setup_;
};

}  // namespace grpo::rollout
