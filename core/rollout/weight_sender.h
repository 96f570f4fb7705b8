// The trainer's side of weight transfer, for pushing new weights into one or
// more rollout servers (grpo-rollout, or any server speaking the protocol
// over Gloo): the HTTP calls and the broadcasts in the order they expect.
// Several servers share one group: each tensor is broadcast once, to all.
//
//   WeightSender sender({"http://127.0.0.1:8000"});
//   sender.connect("127.0.0.1", 51216, std::chrono::seconds(60));
//   for (auto& [name, tensor] : named_parameters) sender.send(name, tensor);  // or send_all(..., 256 << 20)
//   sender.reset_prefix_cache();
//   sender.close();
#pragma once

#include <ATen/ATen.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "rollout/comm_group.h"

namespace httplib {
class Client;
}

namespace grpo::rollout {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

// A rollout server's device, as its /get_world_size/ names it (beyond TRL's
// protocol; a server that does not is taken to be on the CPU).
struct ServerDevice {
  std::string url;
  std::string device = "cpu";
  std::string uuid;  // device_uuid() of its GPU
};

struct BackendChoice {
  Backend backend = Backend::Gloo;
  std::string why;  // for the log: why this one
};

// NCCL when the weights are on a GPU, this build has NCCL, and every server
// is on a GPU of its own: neither the trainer's nor another server's (NCCL
// refuses two ranks on one GPU). Otherwise Gloo, through host memory.
// `wanted` overrides that: Gloo always; NCCL where it can form, else a
// TransferError saying why not.
BackendChoice choose_backend(const at::Device& weights, const std::string& weights_uuid,
                             const std::vector<ServerDevice>& servers, bool nccl_available,
                             std::optional<Backend> wanted = std::nullopt);

struct WeightSenderOptions {
  std::vector<std::string> base_urls = {"http://127.0.0.1:8000"};  // every server receives every tensor
  std::string api_key;  // sent as Authorization: Bearer when set
  std::optional<Backend> backend;  // nullopt: choose_backend's choice
};

class WeightSender {
 public:
  explicit WeightSender(WeightSenderOptions options);
  ~WeightSender();  // closes the communicator if still open, ignoring errors
  WeightSender(const WeightSender&) = delete;
  WeightSender& operator=(const WeightSender&) = delete;

  // Asks each server for its worker count and opens one group over all of
  // them: the first server's workers take ranks 0.. and it hosts the store
  // at group_host:group_port (an address of its machine that this process
  // and the other servers reach); each next server's workers follow (its
  // `rank` in /init_communicator/); this process joins as the last rank.
  // `timeout` bounds every later step too. Throws TransferError naming the
  // step and the server. `weights`: where the tensors to send live; with
  // the servers' devices it picks the backend (choose_backend).
  void connect(const std::string& group_host, int group_port, std::chrono::milliseconds timeout,
               const at::Device& weights = at::kCPU);

  // One tensor per HTTP call and broadcast (the protocol's /update_named_param/).
  void send(const std::string& name, const at::Tensor& tensor);
  // Many tensors in one HTTP call and one flat broadcast (/update_named_params/).
  void send_bucket(const NamedTensors& tensors);
  // Everything, in buckets of at most bucket_bytes (a larger tensor goes alone).
  void send_all(const NamedTensors& tensors, int64_t bucket_bytes);

  // Waits until every server has loaded everything sent; throws the first
  // error of a transfer that failed on one.
  void reset_prefix_cache();
  void close();

  bool connected() const { return group_ != nullptr; }
  int world_size() const;
  const BackendChoice& backend() const { return choice_; }  // of the group connect() formed

 private:
  struct Server {
    std::string url;
    std::unique_ptr<httplib::Client> http;
  };
  nlohmann::json post(Server& server, const std::string& path, const nlohmann::json& body, const std::string& what);
  // The same call to every server.
  void post_all(const std::string& path, const nlohmann::json& body, const std::string& what);
  void transfer(const at::Tensor& bytes, const std::string& what);  // send, then the barrier, even when refused

  WeightSenderOptions options_;
  std::vector<Server> servers_;
  std::unique_ptr<CommGroup> group_;
  BackendChoice choice_;
};

}  // namespace grpo::rollout
