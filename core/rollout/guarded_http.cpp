#include "rollout/guarded_http.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

namespace grpo::rollout {

namespace {

using Clock = std::chrono::steady_clock;

thread_local bool t_timed_out = false;
thread_local socket_t t_socket = INVALID_SOCKET;  // the connection this thread serves
constexpr uint64_t kNoTicket = ~uint64_t{0};
thread_local uint64_t t_ticket = kNoTicket;  // the admission turn of the connection this thread serves

// The numeric address of either end of a socket ("" when unknown).
std::string address_of(socket_t sock, bool peer, int* port) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  auto* sa = reinterpret_cast<sockaddr*>(&addr);
  if ((peer ? ::getpeername(sock, sa, &len) : ::getsockname(sock, sa, &len)) != 0) return "";
  char host[NI_MAXHOST] = {};
  char service[NI_MAXSERV] = {};
  if (::getnameinfo(sa, len, host, sizeof host, service, sizeof service, NI_NUMERICHOST | NI_NUMERICSERV) != 0)
    return "";
  if (port) *port = std::atoi(service);
  return host;
}

// Waits until the socket is ready for `events` or the deadline passes
// (false, and the thread's request is marked timed out).
bool wait_for(socket_t sock, short events, Clock::time_point deadline) {
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      t_timed_out = true;
      return false;
    }
    pollfd p{sock, events, 0};
    const int rc = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1000)));
    if (rc > 0) return true;  // ready, or hung up / failed: the recv or send that follows says which
    if (rc < 0 && errno != EINTR) return false;
  }
}

// One connection's socket under a deadline: a request must be read whole
// by it, and its answer written whole by the next one. Reads are buffered
// because httplib reads the request line and headers a byte at a time.
class DeadlineStream final : public httplib::Stream {
 public:
  DeadlineStream(socket_t sock, std::chrono::milliseconds limit) : sock_(sock), limit_(limit) {}

  // Waits up to `idle` for the next request's first byte; false when none
  // comes. The request then has `limit` to arrive whole.
  bool next_request(std::chrono::milliseconds idle) {
    if (used_ == filled_ && !wait_for(sock_, POLLIN, Clock::now() + idle)) {
      t_timed_out = false;  // an idle keep-alive connection is closed quietly
      return false;
    }
    t_timed_out = false;
    writing_ = false;
    deadline_ = Clock::now() + limit_;
    return true;
  }

  bool is_readable() const override { return used_ < filled_ || wait_for(sock_, POLLIN, deadline_); }
  bool is_writable() const override { return wait_for(sock_, POLLOUT, deadline_); }

  ssize_t read(char* ptr, size_t size) override {
    if (used_ == filled_) {
      if (size >= sizeof buffer_) return receive(ptr, size);
      const ssize_t n = receive(buffer_, sizeof buffer_);
      if (n <= 0) return n;
      used_ = 0;
      filled_ = static_cast<size_t>(n);
    }
    const size_t n = std::min(size, filled_ - used_);
    std::memcpy(ptr, buffer_ + used_, n);
    used_ += n;
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (!writing_) {
      writing_ = true;
      deadline_ = Clock::now() + limit_;
    }
    if (!wait_for(sock_, POLLOUT, deadline_)) return -1;
    ssize_t n;
    do n = ::send(sock_, ptr, size, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    return n;
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override { ip = address_of(sock_, true, &port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { ip = address_of(sock_, false, &port); }
  socket_t socket() const override { return sock_; }

 private:
  ssize_t receive(char* ptr, size_t size) {
    if (!wait_for(sock_, POLLIN, deadline_)) return -1;
    ssize_t n;
    do n = ::recv(sock_, ptr, size, 0);
    while (n < 0 && errno == EINTR);
    return n;
  }

  socket_t sock_;
  std::chrono::milliseconds limit_;
  Clock::time_point deadline_ = Clock::now();
  bool writing_ = false;
  char buffer_[4096];
  size_t used_ = 0;
  size_t filled_ = 0;
};

// A refusal a client can read: 503 with a JSON error, then the socket is
// half-closed and drained briefly so that closing it does not reset the
// answer away before the client reads it.
void refuse(socket_t sock, const std::string& why) {
  const std::string body = nlohmann::json{{"error", why}}.dump();
  const std::string reply = fmt::format(
      "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: {}\r\n"
      "Retry-After: 1\r\nConnection: close\r\n\r\n{}",
      body.size(), body);
  if (::send(sock, reply.data(), reply.size(), MSG_NOSIGNAL | MSG_DONTWAIT) < 0) return;
  ::shutdown(sock, SHUT_WR);
  char sink[4096];
  const auto until = Clock::now() + std::chrono::milliseconds(200);
  for (size_t drained = 0; drained < (size_t(1) << 16) && wait_for(sock, POLLIN, until);) {
    const ssize_t n = ::recv(sock, sink, sizeof sink, 0);
    if (n <= 0) break;
    drained += static_cast<size_t>(n);
  }
  t_timed_out = false;
}

// Refusals are logged at most once a second: a flood must not fill the disk.
void log_refusal(const std::string& why) {
  static std::atomic<int64_t> last{0};
  const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(Clock::now().time_since_epoch()).count();
  int64_t before = last.load();
  if (now > before && last.compare_exchange_strong(before, now)) spdlog::warn("refused a connection: {}", why);
}

// httplib's pool, its tasks (one per accepted connection, queued by the
// listening thread in the order of accept) each given the next ticket. A
// worker takes a task only after every earlier one has been taken, so the
// tickets admit() waits for are already being served.
class TicketPool final : public httplib::ThreadPool {
 public:
  TicketPool(size_t workers, std::atomic<uint64_t>& tickets) : httplib::ThreadPool(workers), tickets_(tickets) {}

  void enqueue(std::function<void()> fn) override {
    const uint64_t ticket = tickets_++;
    httplib::ThreadPool::enqueue([fn = std::move(fn), ticket] {
      t_ticket = ticket;
      fn();
      t_ticket = kNoTicket;
    });
  }

 private:
  std::atomic<uint64_t>& tickets_;
};

}  // namespace

GuardedHttpServer::GuardedHttpServer(ConnectionLimits limits) : limits_(limits) {
  // Refusals are answered by a worker too, so a few spare ones keep them quick when every slot is taken.
  const size_t workers = static_cast<size_t>(limits_.max_connections) + 8;
  new_task_queue = [this, workers] { return new TicketPool(workers, tickets_); };
}

bool GuardedHttpServer::request_timed_out() { return t_timed_out; }

bool GuardedHttpServer::client_connected() {
  if (t_socket == INVALID_SOCKET) return true;
  pollfd p{t_socket, POLLIN, 0};
  if (::poll(&p, 1, 0) <= 0) return true;  // nothing to read: the client waits for its answer
  if (p.revents & (POLLERR | POLLNVAL)) return false;
  // Readable: either the end of the stream (the client closed; recv says 0)
  // or the next request of a client that pipelines (still there).
  char byte;
  const ssize_t n = ::recv(t_socket, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR));
}

std::string GuardedHttpServer::admit(socket_t sock, const std::string& client) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (t_ticket != kNoTicket) {
    turn_.wait(lock, [&] { return admitted_ == t_ticket; });
    ++admitted_;
    turn_.notify_all();
  }
  if (static_cast<int>(open_.size()) >= limits_.max_connections)
    return fmt::format("the server has {} connections open, its limit (--max_connections); retry later",
                       open_.size());
  int& mine = per_client_[client];
  if (mine >= limits_.max_per_client)
    return fmt::format("{} has {} connections open, the limit for one client (--max_connections_per_client); "
                       "close some or retry later",
                       client.empty() ? std::string("this client") : client, mine);
  ++mine;
  open_.insert(sock);
  return "";
}

void GuardedHttpServer::set_busy(socket_t sock, bool busy) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (busy) busy_.insert(sock);
  else busy_.erase(sock);
}

void GuardedHttpServer::release(socket_t sock, const std::string& client) {
  std::lock_guard<std::mutex> lock(mutex_);
  open_.erase(sock);
  busy_.erase(sock);
  if (--per_client_[client] <= 0) per_client_.erase(client);
}

void GuardedHttpServer::close_connections(std::chrono::milliseconds grace) {
  const auto until = Clock::now() + grace;
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      const bool late = Clock::now() >= until;
      for (socket_t sock : open_)
        if (late || !busy_.count(sock)) ::shutdown(sock, SHUT_RDWR);
      if (late || busy_.empty()) return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// httplib's own loop over one connection's requests, with the deadline
// stream in place of its per-recv timeouts and the caps checked first.
bool GuardedHttpServer::process_and_close_socket(socket_t sock) {
  const std::string client = address_of(sock, /*peer=*/true, nullptr);
  if (const std::string refusal = admit(sock, client); !refusal.empty()) {
    log_refusal(refusal);
    refuse(sock, refusal);
    ::close(sock);
    return false;
  }
  bool ok = true;
  t_socket = sock;
  {
    DeadlineStream stream(sock, limits_.request_time);
    const auto idle = std::chrono::seconds(keep_alive_timeout_sec_);
    for (size_t left = keep_alive_max_count_; left > 0 && is_running(); --left) {
      if (!stream.next_request(idle)) break;
      set_busy(sock, true);
      bool closed = false;
      ok = process_request(stream, /*close_connection=*/left == 1 || !is_running(), closed, setup_);
      set_busy(sock, false);
      if (!ok || closed || t_timed_out) break;  // a client that ran out of time gets no second request
    }
  }
  t_socket = INVALID_SOCKET;
  release(sock, client);  // before close: close_connections must never shut down a reused descriptor
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return ok;
}

}  // namespace grpo::rollout
