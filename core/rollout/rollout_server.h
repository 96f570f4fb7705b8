// grpo-rollout's HTTP server: the rollout protocol (docs/rollout.md) over
// the native engine. Handlers parse and answer; generation goes through the
// replicas' batching queues, weight updates through the receiver.
#pragma once

#include <ATen/ATen.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "model/engine.h"
#include "rollout/comm_group.h"
#include "rollout/guarded_http.h"
#include "rollout/protocol.h"

namespace grpo::tok {
class Tokenizer;
}

namespace grpo::rollout {

class Replicas;
class WeightReceiver;

struct ServerOptions {
  std::string model_dir;
  std::string host = "127.0.0.1";  // loopback unless told otherwise: /update_named_param/ replaces weights
  int port = 8000;                 // 0: any free port (see RolloutServer::bind)
  std::string api_key;             // when set, every endpoint needs Authorization: Bearer <key>
  size_t max_body_bytes = size_t(64) << 20;
  int64_t max_prompt_tokens = 0;   // 0: the context (max_model_len)
  int64_t max_model_len = 0;       // prompt + completion positions; 0: the model's max_position_embeddings
  int64_t max_n = 256;             // most completions per prompt in one call
  // prompts × n: the engine's work for a call, and what it holds in memory
  // at once (see docs/rollout.md for the defaults' reasoning).
  int64_t max_sequences_per_call = 4096;
  int64_t max_sequences_in_flight = 4096;  // over every call at once; more wait their turn
  at::Device device = at::kCPU;    // the first replica's; the weight transfer receives there
  int64_t data_parallel_size = 1;  // engine replicas, on consecutive GPUs from `device` (or all on the CPU)
  at::ScalarType dtype = at::kFloat;
  int num_threads = 0;             // torch intra-op threads; 0: every core
  std::chrono::milliseconds comm_timeout{300000};  // each weight-transfer step (TRL's store timeout)
  std::chrono::microseconds batch_wait{2000};       // see BatchQueue
  ConnectionLimits connections;    // open connections, and the time a client has per request
  model::EngineOptions engine;     // how the engine decodes (slots and CUDA graphs on a GPU)
};

class RolloutServer {
 public:
  // Loads the model and tokenizer. Throws naming the file on a bad model directory.
  explicit RolloutServer(ServerOptions options);
  ~RolloutServer();
  RolloutServer(const RolloutServer&) = delete;
  RolloutServer& operator=(const RolloutServer&) = delete;

  // Binds host:port; returns the bound port. Throws when it cannot bind.
  int bind();
  // Serves until stop(); call bind() first.
  void serve();
  // Stops serving: safe from any thread.
  void stop();

 private:
  using Handler = std::function<nlohmann::json(const nlohmann::json& body)>;
  void route_get(const std::string& path, Handler handler);
  void route_post(const std::string& path, Handler handler);
  void add_generation_routes();
  std::vector<model::Completion> generate(const GenerationJob& job);
  void add_weight_routes();
  std::vector<TensorSpec> checked_specs(const nlohmann::json& items, bool list);
  void apply_weights(const std::vector<TensorSpec>& specs, const std::vector<at::Tensor>& tensors);

  ServerOptions options_;
  std::string model_name_;
  std::unique_ptr<tok::Tokenizer> tokenizer_;
  std::map<std::string, std::vector<int64_t>> param_shapes_;
  PromptContext prompt_context_;
  SeedSource seeds_;
  std::unique_ptr<Replicas> replicas_;
  std::unique_ptr<WeightReceiver> receiver_;
  std::unique_ptr<GuardedHttpServer> http_;
};

}  // namespace grpo::rollout
