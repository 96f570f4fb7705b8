// The weight-transfer store listening on the server's own address only.
//
// LibTorch's TCPStore listens on every interface ([::] or 0.0.0.0), and
// before LibTorch 2.2 (TCPStoreOptions::masterListenFd) nothing lets a caller
// choose the address. A server bound to 127.0.0.1 would still open the
// group's rendezvous to the network. While a StoreListenScope is alive, a
// bind() of its port to the wildcard address binds the scope's address
// instead; every other bind() in the process is passed to libc unchanged.
#pragma once

#include <string>

namespace grpo::rollout {

class StoreListenScope {
 public:
  // `host` as the server was given it (a name or a literal). A wildcard
  // ("", "0.0.0.0", "::") narrows nothing. Throws TransferError when `host`
  // does not resolve, or when another scope is alive.
  StoreListenScope(const std::string& host, int port);
  ~StoreListenScope();
  StoreListenScope(const StoreListenScope&) = delete;
  StoreListenScope& operator=(const StoreListenScope&) = delete;

 private:
  bool active_ = false;
};

}  // namespace grpo::rollout
