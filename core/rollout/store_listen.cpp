#include "rollout/store_listen.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <optional>

#include <fmt/format.h>

#include "rollout/comm_group.h"

namespace {

struct Narrowing {
  uint16_t port = 0;  // host byte order
  std::optional<in_addr> v4;
  std::optional<in6_addr> v6;  // an IPv4 host is also reachable as ::ffff:a.b.c.d
};

std::mutex narrowing_mutex;
std::optional<Narrowing> narrowing;

using BindFn = int (*)(int, const sockaddr*, socklen_t);

BindFn libc_bind() {
  static const BindFn fn = reinterpret_cast<BindFn>(::dlsym(RTLD_NEXT, "bind"));
  return fn;
}

bool is_wildcard(const std::string& host) { return host.empty() || host == "0.0.0.0" || host == "::" || host == "*"; }

}  // namespace

// Interposes libc's bind(): defined in the executable, it is the one
// LibTorch's TCPStore calls. Outside a scope, or for any other address or
// port, it is libc's.
extern "C" int bind(int fd, const sockaddr* addr, socklen_t len) {
  if (!libc_bind()) {  // no dynamic libc to pass to: nothing can be bound
    errno = ENOSYS;
    return -1;
  }
  std::optional<Narrowing> n;
  {
    std::lock_guard<std::mutex> lock(narrowing_mutex);
    n = narrowing;
  }
  if (n && addr && addr->sa_family == AF_INET && len >= sizeof(sockaddr_in)) {
    sockaddr_in a;
    std::memcpy(&a, addr, sizeof a);
    if (a.sin_addr.s_addr == htonl(INADDR_ANY) && ntohs(a.sin_port) == n->port) {
      if (!n->v4) {
        errno = EADDRNOTAVAIL;
        return -1;
      }
      a.sin_addr = *n->v4;
      return libc_bind()(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a);
    }
  }
  if (n && addr && addr->sa_family == AF_INET6 && len >= sizeof(sockaddr_in6)) {
    sockaddr_in6 a;
    std::memcpy(&a, addr, sizeof a);
    if (std::memcmp(&a.sin6_addr, &in6addr_any, sizeof(in6_addr)) == 0 && ntohs(a.sin6_port) == n->port) {
      if (!n->v6) {
        errno = EADDRNOTAVAIL;
        return -1;
      }
      a.sin6_addr = *n->v6;
      return libc_bind()(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a);
    }
  }
  return libc_bind()(fd, addr, len);
}

namespace grpo::rollout {

StoreListenScope::StoreListenScope(const std::string& host, int port) {
  if (is_wildcard(host)) return;
  Narrowing n;
  n.port = static_cast<uint16_t>(port);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &found); rc != 0)
    throw TransferError(fmt::format("cannot resolve the server's address '{}' to host the TCPStore on: {}", host,
                                    ::gai_strerror(rc)));
  for (const addrinfo* a = found; a; a = a->ai_next) {
    if (a->ai_family == AF_INET && !n.v4) n.v4 = reinterpret_cast<const sockaddr_in*>(a->ai_addr)->sin_addr;
    if (a->ai_family == AF_INET6 && !n.v6) n.v6 = reinterpret_cast<const sockaddr_in6*>(a->ai_addr)->sin6_addr;
  }
  ::freeaddrinfo(found);
  if (n.v4 && !n.v6) {
    in6_addr mapped{};
    mapped.s6_addr[10] = mapped.s6_addr[11] = 0xff;
    std::memcpy(&mapped.s6_addr[12], &*n.v4, 4);
    n.v6 = mapped;
  }
  std::lock_guard<std::mutex> lock(narrowing_mutex);
  if (narrowing) throw TransferError("two weight-transfer stores are being hosted at once");
  narrowing = n;
  active_ = true;
}

StoreListenScope::~StoreListenScope() {
  if (!active_) return;
  std::lock_guard<std::mutex> lock(narrowing_mutex);
  narrowing.reset();
}

}  // namespace grpo::rollout
