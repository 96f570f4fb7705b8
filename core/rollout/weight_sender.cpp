#include "rollout/weight_sender.h"

#include <algorithm>
#include <exception>
#include <optional>

#include <fmt/format.h>
#include <httplib.h>

#include <nlohmann/json.hpp>

namespace grpo::rollout {

using nlohmann::json;

namespace {

json spec_json(const std::string& name, const at::Tensor& t) {
  return json{{"name", name}, {"dtype", dtype_to_name(t.scalar_type())}, {"shape", t.sizes().vec()}};
}

// The server's error text: its JSON "error" when there is one.
std::string error_text(const httplib::Result& res) {
  if (!res) return "no answer (" + httplib::to_string(res.error()) + ")";
  try {
    json body = json::parse(res->body);
    if (body.contains("error")) return fmt::format("HTTP {}: {}", res->status, body["error"].get<std::string>());
  } catch (const std::exception&) {
  }
  return fmt::format("HTTP {}: {}", res->status, res->body.substr(0, 300));
}

}  // namespace

BackendChoice choose_backend(const at::Device& weights, const std::string& weights_uuid,
                             const std::vector<ServerDevice>& servers, bool nccl_available,
                             std::optional<Backend> wanted) {
  if (wanted == Backend::Gloo) return {Backend::Gloo, "weight_backend gloo"};
  BackendChoice choice = [&]() -> BackendChoice {
    if (!weights.is_cuda()) return {Backend::Gloo, "the weights are in host memory"};
    if (!nccl_available) return {Backend::Gloo, "this build has no NCCL"};
    std::vector<std::string> taken{weights_uuid};
    for (const ServerDevice& s : servers) {
      if (s.device.rfind("cuda", 0) != 0)
        return {Backend::Gloo, fmt::format("{} samples on {}: NCCL needs a GPU at both ends", s.url, s.device)};
      if (s.uuid.empty() || std::find(taken.begin(), taken.end(), s.uuid) != taken.end())
        return {Backend::Gloo, fmt::format("{} samples on {}, a GPU {}: NCCL takes one rank per GPU", s.url, s.device,
                                           s.uuid.empty() ? "that does not say which it is" : "another rank is on")};
      taken.push_back(s.uuid);
    }
    return {Backend::Nccl, fmt::format("from {} to {} server GPU(s)", weights.str(), servers.size())};
  }();
  if (wanted == Backend::Nccl && choice.backend != Backend::Nccl)
    throw TransferError(fmt::format("weight_backend nccl cannot be used: {}; leave weight_backend at auto (Gloo "
                                    "here) or give every server a GPU of its own",
                                    choice.why));
  return choice;
}

WeightSender::WeightSender(WeightSenderOptions options) : options_(std::move(options)) {
  if (options_.base_urls.empty()) throw TransferError("no rollout server to send weights to");
  for (const std::string& url : options_.base_urls) {
    Server server{url, std::make_unique<httplib::Client>(url)};
    if (!server.http->is_valid()) throw TransferError(fmt::format("'{}' is not a valid server URL", url));
    if (!options_.api_key.empty()) server.http->set_bearer_token_auth(options_.api_key.c_str());
    server.http->set_connection_timeout(std::chrono::seconds(10));
    servers_.push_back(std::move(server));
  }
}

WeightSender::~WeightSender() {
  try {
    if (group_) close();
  } catch (const std::exception&) {  // the server may be gone already
  }
}

int WeightSender::world_size() const { return group_ ? group_->world_size() : 0; }

json WeightSender::post(Server& server, const std::string& path, const json& body, const std::string& what) {
  auto res = server.http->Post(path.c_str(), body.dump(), "application/json");
  if (!res || res->status != 200)
    throw TransferError(fmt::format("{}: POST {} to {} failed: {}", what, path, server.url, error_text(res)));
  return res->body.empty() ? json::object() : json::parse(res->body);
}

void WeightSender::post_all(const std::string& path, const json& body, const std::string& what) {
  for (Server& server : servers_) post(server, path, body, what);
}

void WeightSender::connect(const std::string& group_host, int group_port, std::chrono::milliseconds timeout,
                           const at::Device& weights) {
  if (group_) close();
  std::vector<int> first_rank;
  std::vector<ServerDevice> devices;
  int world = 0;
  for (Server& server : servers_) {
    // Every later call may wait for the server's previous transfer, itself bounded by `timeout`.
    server.http->set_read_timeout(timeout + std::chrono::seconds(10));
    auto res = server.http->Get("/get_world_size/");
    if (!res || res->status != 200)
      throw TransferError(fmt::format("connect: GET /get_world_size/ from {} failed: {}", server.url,
                                      error_text(res)));
    first_rank.push_back(world);
    const json answer = json::parse(res->body);
    world += answer.at("world_size").get<int>();
    devices.push_back({server.url, answer.value("device", "cpu"), answer.value("device_uuid", "")});
  }
  const int trainer_rank = world++;  // the trainer is the last rank
  const std::string uuid = device_uuid(weights);
  choice_ = choose_backend(weights, uuid, devices, nccl_built(), options_.backend);
  // The first server hosts the store and answers at once; the others then reach it, and this process last.
  for (size_t i = 0; i < servers_.size(); ++i) {
    json body{{"host", group_host},
              {"port", group_port},
              {"world_size", world},
              {"client_device_uuid", uuid.empty() ? "cpu" : uuid},
              {"backend", backend_name(choice_.backend)}};  // beyond TRL's protocol: Gloo where it is left out
    if (servers_.size() > 1) body["rank"] = first_rank[i];  // beyond TRL's protocol: one group over many servers
    post(servers_[i], "/init_communicator/", body, "connect");
  }
  group_ = CommGroup::create(group_host, group_port, trainer_rank, world, timeout, "", choice_.backend, weights);
}

void WeightSender::send(const std::string& name, const at::Tensor& tensor) {
  if (!group_) throw TransferError(fmt::format("send '{}': not connected; call connect() first", name));
  post_all("/update_named_param/", spec_json(name, tensor), fmt::format("send '{}'", name));
  at::Tensor buffer = tensor.detach().to(group_->device()).contiguous();  // the source rank only reads it
  transfer(buffer, fmt::format("'{}'", name));
}

// The receivers meet the barrier after a refused broadcast too (WeightReceiver::update): so does the sender.
void WeightSender::transfer(const at::Tensor& bytes, const std::string& what) {
  std::optional<BroadcastSizeError> refused;
  try {
    group_->send(bytes, what);
  } catch (const BroadcastSizeError& e) {
    refused = e;
  }
  group_->barrier(what);
  if (refused) throw *refused;
}

void WeightSender::send_bucket(const NamedTensors& tensors) {
  if (tensors.empty()) return;
  const std::string what = fmt::format("bucket of {} tensors ('{}' .. '{}')", tensors.size(), tensors.front().first,
                                       tensors.back().first);
  if (!group_) throw TransferError(fmt::format("send {}: not connected; call connect() first", what));
  json params = json::array();
  std::vector<at::Tensor> values;
  for (const auto& [name, t] : tensors) {
    params.push_back(spec_json(name, t));
    values.push_back(t.detach());
  }
  post_all("/update_named_params/", json{{"params", params}}, "send " + what);
  transfer(pack_bucket(values, group_->device()), what);
}

void WeightSender::send_all(const NamedTensors& tensors, int64_t bucket_bytes) {
  NamedTensors bucket;
  int64_t bytes = 0;
  for (const auto& item : tensors) {
    const int64_t n = item.second.numel() * static_cast<int64_t>(item.second.element_size());
    if (!bucket.empty() && bytes + n > bucket_bytes) {
      send_bucket(bucket);
      bucket.clear();
      bytes = 0;
    }
    bucket.push_back(item);
    bytes += n;
  }
  if (bucket.size() == 1) send(bucket[0].first, bucket[0].second);
  else send_bucket(bucket);
}

void WeightSender::reset_prefix_cache() { post_all("/reset_prefix_cache/", json::object(), "reset_prefix_cache"); }

// The servers are told first: each closes its end on its own thread while
// this one closes its own, since NCCL's teardown waits for every rank of the
// node to take part. A server that cannot be told will not: this end is
// aborted instead of waiting for it.
void WeightSender::close() {
  std::exception_ptr failed;
  try {
    post_all("/close_communicator/", json::object(), "close");
  } catch (...) {
    failed = std::current_exception();
    if (group_) group_->abandon();
  }
  group_.reset();
  if (failed) std::rethrow_exception(failed);
}

}  // namespace grpo::rollout
