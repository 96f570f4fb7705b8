// Runs the plain PyTorch peer (bench/peer/qwen2_peer.py, the torch wheel LibTorch came from)
// on a model of the same shape, so benchmarks print our/peer ratios measured in
// the same run.
#pragma once

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <unistd.h>
#include <vector>

#include <ATen/Parallel.h>
#include <nlohmann/json.hpp>

#include "model/model_config.h"
#include "peer_process.h"

namespace grpo::bench {

// The peer's decode tokens/s per batch size; empty (with a message) when it
// could not run.
inline std::map<int64_t, double> peer_decode(const model::ModelConfig& c, at::ScalarType dtype,
                                             const std::vector<int64_t>& batches, int64_t prompt, int64_t new_tokens) {
  namespace fs = std::filesystem;
  const fs::path config = fs::temp_directory_path() / ("grpo_peer_config_" + std::to_string(getpid()) + ".json");
  std::ofstream(config) << c.to_json().dump();  // the peer reads the shape fields it needs
  std::string list;
  for (int64_t b : batches) list += (list.empty() ? "" : ",") + std::to_string(b);
  const std::string cmd = std::string(GRPO_TORCH_PYTHON) + " " + GRPO_SOURCE_DIR + "/bench/peer/qwen2_peer.py decode --config " +
                          config.string() + " --dtype " + (dtype == at::kFloat ? "float32" : "bfloat16") +
                          " --batches " + list + " --prompt " + std::to_string(prompt) + " --new_tokens " +
                          std::to_string(new_tokens) + " --threads " + std::to_string(at::get_num_threads());
  std::map<int64_t, double> out;
  for (const nlohmann::json& j : peer_lines(cmd))
    if (j.contains("batch")) out[j["batch"].get<int64_t>()] = j["tokens_per_s"].get<double>();
  fs::remove(config);
  if (out.size() != batches.size())
    std::fprintf(stderr, "the peer did not run (it runs on the torch wheel LibTorch came from: scripts/setup.sh installs it); "
                         "rerun its command above to see why\n");
  return out;
}

// Hugging Face transformers' generate at the same shape (bench/peer/hf_generate.py):
// per batch size, warm tokens/s and the first call's seconds; empty (with a
// message) when it could not run.
struct HfDecode {
  double tokens_per_s = 0, first_s = 0, warm_s = 0;
};
inline std::map<int64_t, HfDecode> hf_generate_decode(const model::ModelConfig& c, at::ScalarType dtype,
                                                      const std::string& device, const std::vector<int64_t>& batches,
                                                      int64_t prompt, int64_t new_tokens) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("grpo_hf_peer_" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << c.to_json().dump();  // AutoConfig reads the folder
  std::string list;
  for (int64_t b : batches) list += (list.empty() ? "" : ",") + std::to_string(b);
  const std::string cmd = std::string(GRPO_TORCH_PYTHON) + " " + GRPO_SOURCE_DIR + "/bench/peer/hf_generate.py --config " +
                          (dir / "config.json").string() + " --dtype " + (dtype == at::kFloat ? "float32" : "bfloat16") +
                          " --device " + device + " --batches " + list + " --prompt " + std::to_string(prompt) +
                          " --new_tokens " + std::to_string(new_tokens) + " --threads " + std::to_string(at::get_num_threads());
  std::map<int64_t, HfDecode> out;
  for (const nlohmann::json& j : peer_lines(cmd))
    if (j.contains("batch"))
      out[j["batch"].get<int64_t>()] = {j["tokens_per_s"].get<double>(), j["first_s"].get<double>(), j["warm_s"].get<double>()};
  fs::remove_all(dir);
  if (out.size() != batches.size())
    std::fprintf(stderr, "transformers' generate did not run (scripts/setup.sh installs transformers beside torch); "
                         "rerun its command above to see why\n");
  return out;
}

}  // namespace grpo::bench
