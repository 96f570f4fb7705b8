// Running the plain PyTorch peer (bench/peer/qwen2_peer.py) and reading what
// it prints, without LibTorch (bench_step links none).
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace grpo::bench {

// Runs a peer command (echoed) and returns the JSON objects it printed, one per line.
inline std::vector<nlohmann::json> peer_lines(const std::string& cmd) {
  std::printf("peer: %s\n", cmd.c_str());
  std::fflush(stdout);
  std::vector<nlohmann::json> out;
  if (FILE* pipe = popen(cmd.c_str(), "r")) {
    char line[4096];
    while (std::fgets(line, sizeof line, pipe)) {
      nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (j.is_object()) out.push_back(std::move(j));
    }
    pclose(pipe);
  }
  return out;
}

}  // namespace grpo::bench
