// The rollout protocol's endpoints (table in docs/rollout.md).
#include <fmt/format.h>
#include <httplib.h>

#include <spdlog/spdlog.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "model/engine.h"
#include "rollout/replicas.h"
#include "rollout/request_fields.h"
#include "rollout/rollout_server.h"
#include "rollout/weight_receiver.h"

namespace grpo::rollout {

using nlohmann::json;

namespace {

// The backend an /init_communicator/ asks for ("backend", beyond TRL's
// protocol; Gloo when left out). NCCL needs this server on a GPU, and one
// that is not the trainer's (client_device_uuid, as TRL sends it).
Backend transfer_backend(const json& body, const at::Device& device) {
  const auto field = body.find("backend");
  if (field == body.end()) return Backend::Gloo;
  const std::optional<Backend> backend = field->is_string() ? backend_from_name(field->get<std::string>()) : std::nullopt;
  if (!backend) throw RequestError("backend", "\"gloo\" or \"nccl\"");
  if (*backend == Backend::Gloo) return *backend;
  if (!device.is_cuda() || !nccl_built())
    throw RequestError("backend", fmt::format("this server samples on {}{}: NCCL needs its model on a GPU; use \"gloo\"",
                                              device.str(), nccl_built() ? "" : " in a build without NCCL"));
  const std::string own = device_uuid(device);
  const auto client = body.find("client_device_uuid");
  if (!own.empty() && client != body.end() && client->is_string() && client->get<std::string>() == own)
    throw RequestError("backend", fmt::format("the trainer's GPU is this server's ({}, {}): NCCL takes one rank per "
                                              "GPU; use \"gloo\"",
                                              device.str(), own));
  return *backend;
}

}  // namespace

void RolloutServer::add_generation_routes() {
  route_get("/health/", [this](const json&) {
    BatchStats s = replicas_->stats();
    json replicas = json::array();
    for (const ReplicaStats& r : replicas_->each())
      replicas.push_back({{"device", r.device.str()},
                          {"engine_calls", r.batches.engine_calls},
                          {"sequences", r.batches.sequences},
                          {"sequences_in_flight", r.batches.sequences_in_flight}});
    // Beyond TRL's {"status": "ok"}: counters that show batching at work.
    return json{{"status", "ok"},
                {"data_parallel_size", replicas_->size()},
                {"replicas", replicas},
                {"requests", s.jobs},
                {"engine_calls", s.engine_calls},
                {"sequences", s.sequences},
                {"cancelled", s.cancelled},
                {"sequences_in_flight", s.sequences_in_flight},
                {"calls_waiting", s.calls_waiting},
                {"tensors_received", receiver_->tensors_received()},
                {"communicator", receiver_->connected()}};
  });
  // One worker receives the weights (and copies them into every replica): the trainer is rank 1 of a group of 2.
  // Beyond TRL's answer: the device, so that a trainer on a GPU of its own picks NCCL.
  route_get("/get_world_size/", [this](const json&) {
    json answer{{"world_size", 1}, {"device", options_.device.str()}};
    if (const std::string uuid = device_uuid(options_.device); !uuid.empty()) answer["device_uuid"] = uuid;
    return answer;
  });

  auto run = [this](const GenerationJob& job) { return generate(job); };
  route_post("/generate/", [this, run](const json& body) {
    GenerationJob job = parse_generate(body, prompt_context_, seeds_);
    return generate_response(job, run(job));
  });
  route_post("/chat/", [this, run](const json& body) {
    GenerationJob job = parse_chat(body, prompt_context_, seeds_);
    return generate_response(job, run(job));
  });
  route_post("/infer/", [this, run](const json& body) {
    GenerationJob job = parse_infer(body, prompt_context_, seeds_);
    return infer_response(job, run(job), *tokenizer_, model_name_);
  });
}

// A job through the queue, dropped when its client goes away. An engine
// failure is answered with what the call asked for and what to change,
// never with LibTorch's backtrace.
std::vector<model::Completion> RolloutServer::generate(const GenerationJob& job) {
  if (job.requests.empty()) return {};
  const auto start = std::chrono::steady_clock::now();
  try {
    return replicas_->run(job, [] { return GuardedHttpServer::client_connected(); });
  } catch (const CallCancelled& e) {
    if (!e.shutting_down())
      spdlog::info("dropped a call of {} prompt(s) × n {} after {:.1f} s: its client went away", job.requests.size(),
                   job.requests[0].n,
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    throw;
  } catch (const EngineFailure& e) {
    const int64_t sequences = sequences_of(job);
    const std::string batch =
        e.batch_calls > 1 ? fmt::format(", in an engine batch of {} sequences from {} calls", e.batch_sequences,
                                        e.batch_calls)
                          : "";
    throw std::runtime_error(fmt::format(
        "generation failed for {} prompt(s) × n {} = {} sequences with max_tokens {}{}: {}. If memory ran out, send "
        "fewer prompts per call or ask for a smaller n or max_tokens, or start the server with a lower "
        "--max_sequences_in_flight (now {}) or --max_sequences_per_call (now {})",
        job.requests.size(), job.requests[0].n, sequences, job.params.max_new_tokens, batch, e.what(),
        options_.max_sequences_in_flight, options_.max_sequences_per_call));
  }
}

// {name, dtype, shape} entries checked against the model before the trainer
// sends any bytes, so a wrong name is a 422 rather than a broken group.
std::vector<TensorSpec> RolloutServer::checked_specs(const json& items, bool list) {
  std::vector<TensorSpec> specs;
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string parent = list ? fmt::format("params[{}]", i) : "";
    const json& item = require_object(items[i], list ? parent : "body");
    auto field = [&](const char* key) { return field_path(parent, key); };
    TensorSpec spec;
    auto name = item.find("name");
    if (name == item.end() || !name->is_string()) throw RequestError(field("name"), "required: a parameter name");
    spec.name = name->get<std::string>();
    auto shape = param_shapes_.find(spec.name);
    if (shape == param_shapes_.end())
      throw RequestError(field("name"), fmt::format("the model has no parameter '{}' (Hugging Face names, e.g. "
                                                    "model.layers.0.self_attn.q_proj.weight)", spec.name));
    auto dtype = item.find("dtype");
    if (dtype == item.end() || !dtype->is_string()) throw RequestError(field("dtype"), "required, e.g. \"torch.bfloat16\"");
    try {
      spec.dtype = dtype_from_name(dtype->get<std::string>());
    } catch (const std::invalid_argument& e) {
      throw RequestError(field("dtype"), e.what());
    }
    auto ids = read_ids(item, "shape", parent);
    if (!ids) throw RequestError(field("shape"), "required: a list of sizes");
    spec.shape.assign(ids->begin(), ids->end());
    if (spec.shape != shape->second)
      throw RequestError(field("shape"), fmt::format("'{}' has shape {} in the model, the request says {}", spec.name,
                                                     json(shape->second).dump(), json(spec.shape).dump()));
    specs.push_back(std::move(spec));
  }
  return specs;
}

void RolloutServer::add_weight_routes() {
  route_post("/init_communicator/", [this](const json& body) {
    require_object(body, "body");
    auto host = body.find("host");
    if (host == body.end() || !host->is_string()) throw RequestError("host", "required: the address to host the store at");
    const auto port = read_int(body, "port", "");
    if (!port || *port <= 0 || *port > 65535) throw RequestError("port", "required: a port in 1..65535");
    // Beyond TRL's protocol, `rank` puts this server's worker at that rank of
    // a group over several servers (the first one, rank 0, hosts the store).
    const int64_t world_size = read_int(body, "world_size", "").value_or(2);
    const int64_t rank = read_int(body, "rank", "").value_or(0);
    if (world_size < 2 || world_size > 4096)
      throw RequestError("world_size", fmt::format("{} ranks: a group has this server's worker, the trainer (the "
                                                   "last rank) and other servers' workers, 2..4096",
                                                   world_size));
    if (rank < 0 || rank > world_size - 2)
      throw RequestError("rank", fmt::format("rank {} outside 0..{}: the last rank of {} is the trainer's", rank,
                                             world_size - 2, world_size));
    if (world_size != 2 && !body.contains("rank"))
      throw RequestError("world_size", fmt::format("this server has 1 worker, so alone it makes a group of 2 ranks, "
                                                   "not {}; in a group over several servers give each its 'rank'",
                                                   world_size));
    const Backend backend = transfer_backend(body, options_.device);
    receiver_->init(host->get<std::string>(), static_cast<int>(*port), static_cast<int>(world_size),
                    static_cast<int>(rank), backend);
    return json{{"message", "Request received, initializing communicator"}};
  });
  route_post("/update_named_param/", [this](const json& body) {
    receiver_->update(checked_specs(json::array({body}), /*list=*/false), /*as_bucket=*/false);
    return json{{"message", "Request received, updating named parameter"}};
  });
  // Beyond TRL: many tensors per call and per broadcast, packed as pack_bucket() lays them out.
  route_post("/update_named_params/", [this](const json& body) {
    require_object(body, "body");
    auto params = body.find("params");
    if (params == body.end() || !params->is_array() || params->empty())
      throw RequestError("params", "required: a non-empty list of {name, dtype, shape}");
    receiver_->update(checked_specs(*params, /*list=*/true), /*as_bucket=*/true);
    return json{{"message", fmt::format("Request received, updating {} named parameters", params->size())}};
  });
  // No prefix cache to drop: this waits until every queued update is loaded and reports a failed one.
  route_post("/reset_prefix_cache/", [this](const json&) {
    receiver_->wait_idle();
    return json{{"message", "Request received, resetting prefix cache status: True"}};
  });
  route_post("/close_communicator/", [this](const json&) {
    receiver_->close();
    return json{{"message", "Request received, closing communicator"}};
  });
}

}  // namespace grpo::rollout
