// The rollout server against the in-process engine, measured in one run:
//  - generation tokens/s through HTTP (one call carrying every prompt, and
//    one call per prompt from concurrent clients, batched by the server's
//    queue) vs the engine called directly with the same batch;
//  - weight push s/MB over the weight-transfer group, one HTTP call +
//    broadcast per parameter vs bucketed, next to an in-memory copy of the
//    same bytes (device to device with --device cuda: the trainer's weights
//    and the server's engine on the same GPU, so the push goes over Gloo).
//   bench_rollout [--preset small|base25m|qwen2.5-0.5b] [--prompts 16] [--new_tokens 32] [--threads N]
//                 [--device cpu|cuda] [--dtype float32|bfloat16] [--push_only]
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>

#include <httplib.h>
#include <torch/types.h>
#include <torch/utils.h>

#include <nlohmann/json.hpp>

#include "model/device.h"
#include "model/device_memory.h"
#include "model/dtype.h"
#include "model/engine.h"
#include "model/presets.h"
#include "model/threads.h"
#include "model/weights.h"
#include "rollout/rollout_server.h"
#include "rollout/weight_sender.h"
#include "tokenizer/byte_tokenizer.h"
#include "tokenizer/tokenizer.h"

using namespace grpo;
using nlohmann::json;

namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Drawn on `device` in `dtype`: a 7B model's draws on the CPU, serial, would take minutes.
std::string make_model(const std::string& preset, at::Device device, at::ScalarType dtype) {
  const std::string dir = (std::filesystem::temp_directory_path() / ("grpo_bench_rollout_" + preset)).string();
  std::filesystem::create_directories(dir);
  tok::write_byte_level_tokenizer(dir);
  json config = model::preset_config("qwen2", preset, tok::kByteTokenizerVocabSize);
  model::CausalLM lm = model::build_empty(model::ModelConfig::from_json(config, preset), device, dtype);
  model::init_weights(*lm, 0);
  model::save_model(*lm, dir);
  return dir;
}

std::vector<std::vector<int32_t>> prompts_of(int count) {
  std::vector<std::vector<int32_t>> out;
  for (int p = 0; p < count; ++p) {
    std::vector<int32_t> ids;
    for (int t = 0; t < 24; ++t) ids.push_back(32 + (p * 7 + t * 13) % 90);
    out.push_back(ids);
  }
  return out;
}

// The body of one /generate/ call: seeded sampling, no stop ids (so every
// completion runs to max_tokens and both paths do the same work).
json generate_body(const std::vector<std::vector<int32_t>>& prompts, int new_tokens) {
  return json{{"prompts", prompts}, {"max_tokens", new_tokens}, {"temperature", 1.0},
              {"generation_kwargs", {{"seed", 1}, {"ignore_eos", true}}}};
}

// A port that was free a moment ago, for the weight-transfer group's store.
int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

int64_t count_tokens(const json& reply) {
  int64_t n = 0;
  for (const auto& c : reply.at("completion_ids")) n += static_cast<int64_t>(c.size());
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  // Line by line into a file too: a deadline's SIGTERM loses no finished line.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  std::string preset = "small", device_name = "cpu", dtype_name = "float32";
  int n_prompts = 16, new_tokens = 32, threads = 0;
  bool push_only = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--push_only")) {
      push_only = true;
      continue;
    }
    if (i + 1 >= argc) break;
    const char* value = argv[++i];
    if (!std::strcmp(argv[i - 1], "--preset")) preset = value;
    else if (!std::strcmp(argv[i - 1], "--device")) device_name = value;
    else if (!std::strcmp(argv[i - 1], "--dtype")) dtype_name = value;
    else if (!std::strcmp(argv[i - 1], "--prompts")) n_prompts = std::atoi(value);
    else if (!std::strcmp(argv[i - 1], "--new_tokens")) new_tokens = std::atoi(value);
    else if (!std::strcmp(argv[i - 1], "--threads")) threads = std::atoi(value);
  }
  const int used_threads = model::configure_cpu_threads(threads);
  const at::Device device = model::parse_device(device_name, "--device");
  const at::ScalarType dtype = model::weight_dtype_from_name(dtype_name, "--dtype");
  const std::string dir = make_model(preset, device, dtype);

  rollout::ServerOptions options;
  options.device = device;
  options.dtype = dtype;
  options.model_dir = dir;
  options.port = 0;
  options.num_threads = used_threads;
  options.comm_timeout = std::chrono::seconds(120);
  rollout::RolloutServer server(options);
  const int port = server.bind();
  std::thread serving([&] { server.serve(); });
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(std::chrono::seconds(600));

  tok::Tokenizer tokenizer = tok::Tokenizer::from_dir(dir);
  model::Engine engine(model::load_model(dir, dtype, device), &tokenizer);
  if (!push_only) {
    const auto prompts = prompts_of(n_prompts);
    std::vector<model::GenerateRequest> requests;
    for (const auto& p : prompts) requests.push_back({p, 1, 1, {}});
    model::SamplingParams params;
    params.max_new_tokens = new_tokens;

    std::printf("== grpo-rollout vs in-process engine: qwen2 %s, %d prompts x %d new tokens, %d threads\n",
                preset.c_str(), n_prompts, new_tokens, used_threads);
    engine.generate(requests, params);  // warm-up
    client.Post("/generate/", generate_body(prompts, new_tokens).dump(), "application/json");
    double best_engine = 1e30, best_one_call = 1e30, best_clients = 1e30;
    int64_t tokens = 0;
    for (int run = 0; run < 3; ++run) {
      double t0 = now_s();
      engine.generate(requests, params);
      best_engine = std::min(best_engine, now_s() - t0);
      t0 = now_s();
      auto res = client.Post("/generate/", generate_body(prompts, new_tokens).dump(), "application/json");
      best_one_call = std::min(best_one_call, now_s() - t0);
      tokens = count_tokens(json::parse(res->body));
      t0 = now_s();
      std::vector<std::thread> clients;
      for (const auto& p : prompts)
        clients.emplace_back([&, p] {
          httplib::Client c("127.0.0.1", port);
          c.set_read_timeout(std::chrono::seconds(600));
          c.Post("/generate/", generate_body({p}, new_tokens).dump(), "application/json");
        });
      for (auto& c : clients) c.join();
      best_clients = std::min(best_clients, now_s() - t0);
    }
    const double engine_tps = tokens / best_engine;
    std::printf("%-44s %10.0f tokens/s\n", "in-process engine, one batch", engine_tps);
    std::printf("%-44s %10.0f tokens/s  (%.2f of in-process)\n", "server, one /generate/ call with every prompt",
                tokens / best_one_call, best_engine / best_one_call);
    std::printf("%-44s %10.0f tokens/s  (%.2f of in-process)\n", "server, one call per prompt, concurrent",
                tokens / best_clients, best_engine / best_clients);
    auto health = json::parse(client.Get("/health/")->body);
    std::printf("server batching: %lld calls served by %lld engine calls\n",
                static_cast<long long>(health["requests"].get<int64_t>()),
                static_cast<long long>(health["engine_calls"].get<int64_t>()));
  }

  // Weight push: the same model's parameters, in --dtype.
  rollout::NamedTensors weights;
  int64_t bytes = 0;
  for (auto& item : engine.model()->named_parameters()) {
    weights.emplace_back(item.key(), item.value().detach().clone());
    bytes += item.value().numel() * static_cast<int64_t>(item.value().element_size());
  }
  const double mb = static_cast<double>(bytes) / (1 << 20);
  std::vector<at::Tensor> targets;
  for (const auto& w : weights) targets.push_back(at::empty_like(w.second));
  double copy_s = 1e30;
  for (int run = 0; run < 3; ++run) {
    model::synchronize(device);
    const double t0 = now_s();
    for (size_t i = 0; i < weights.size(); ++i) targets[i].copy_(weights[i].second);
    model::synchronize(device);
    copy_s = std::min(copy_s, now_s() - t0);
  }
  double t0 = 0;
  rollout::WeightSender sender({{"http://127.0.0.1:" + std::to_string(port)}});
  sender.connect("127.0.0.1", free_port(), std::chrono::seconds(120), device);
  std::printf("\n== weight push from %s: over %s (%s)\n", device.str().c_str(),
              rollout::backend_name(sender.backend().backend), sender.backend().why.c_str());
  double per_param = 1e30, bucketed = 1e30;
  for (int run = 0; run < 3; ++run) {
    t0 = now_s();
    for (const auto& [name, t] : weights) sender.send(name, t);
    sender.reset_prefix_cache();
    per_param = std::min(per_param, now_s() - t0);
    t0 = now_s();
    sender.send_all(weights, int64_t(256) << 20);
    sender.reset_prefix_cache();
    bucketed = std::min(bucketed, now_s() - t0);
  }
  sender.close();
  // Two servers in one group: each bucket is announced to both and broadcast once.
  rollout::RolloutServer second(options);
  const int second_port = second.bind();
  std::thread second_serving([&] { second.serve(); });
  rollout::WeightSender both({{"http://127.0.0.1:" + std::to_string(port), "http://127.0.0.1:" + std::to_string(second_port)}});
  both.connect("127.0.0.1", free_port(), std::chrono::seconds(120), device);
  double two_servers = 1e30;
  for (int run = 0; run < 3; ++run) {
    t0 = now_s();
    both.send_all(weights, int64_t(256) << 20);
    both.reset_prefix_cache();
    two_servers = std::min(two_servers, now_s() - t0);
  }
  both.close();
  second.stop();
  second_serving.join();
  std::printf("\n== weight push: %zu tensors, %.1f MB %s\n", weights.size(), mb, dtype_name.c_str());
  std::printf("%-44s %10.2f ms/MB  (%.1f GB/s)\n", device.is_cuda() ? "device-to-device copy of the same tensors" : "in-memory copy of the same tensors", 1e3 * copy_s / mb, static_cast<double>(bytes) / copy_s / 1e9);
  std::printf("%-44s %10.2f ms/MB  (%.1fx the copy)\n", "per parameter (HTTP + broadcast each)", 1e3 * per_param / mb,
              per_param / copy_s);
  std::printf("%-44s %10.2f ms/MB  (%.1fx the copy; %.1fx faster than per parameter)\n", "bucketed (256 MB buckets)",
              1e3 * bucketed / mb, bucketed / copy_s, per_param / bucketed);
  std::printf("%-44s %10.2f ms/MB  (%.2fx the time of one server)\n", "bucketed, to two servers in one group",
              1e3 * two_servers / mb, two_servers / bucketed);
  server.stop();
  serving.join();
  return 0;
}
