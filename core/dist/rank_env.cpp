#include "dist/rank_env.h"

#include <charconv>
#include <cstdlib>

#include "util/user_error.h"

namespace grpo::dist {

namespace {

std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  return std::string(v);
}

std::optional<int> int_env(const char* name, int min_value) {
  auto text = env(name);
  if (!text) return std::nullopt;
  int value = 0;
  auto [ptr, ec] = std::from_chars(text->data(), text->data() + text->size(), value);
  if (ec != std::errc() || ptr != text->data() + text->size() || value < min_value)
    throw UserError("environment variable " + std::string(name) + "='" + *text + "' is not an integer >= " +
                    std::to_string(min_value) + "; fix or unset it");
  return value;
}

int port_env(const char* name) {
  const int port = *int_env(name, 1);
  if (port > 65535) throw UserError(std::string(name) + "=" + std::to_string(port) + " is not a TCP port (1..65535)");
  return port;
}

}  // namespace

std::optional<RankEnv> rank_env_from_environment() {
  auto rank = int_env("RANK", 0);
  auto world = int_env("WORLD_SIZE", 1);
  if (!rank && !world) return std::nullopt;
  if (!rank || !world)
    throw UserError(std::string(rank ? "RANK is set but WORLD_SIZE is not" : "WORLD_SIZE is set but RANK is not") +
                    ": a launcher sets both (torchrun does); set both or neither");
  RankEnv e;
  e.rank = *rank;
  e.world_size = *world;
  if (e.rank >= e.world_size)
    throw UserError("RANK=" + std::to_string(e.rank) + " is not below WORLD_SIZE=" + std::to_string(e.world_size));
  e.local_rank = int_env("LOCAL_RANK", 0).value_or(e.rank);
  e.local_world_size = int_env("LOCAL_WORLD_SIZE", 1).value_or(int_env("NPROC_PER_NODE", 1).value_or(e.world_size));
  if (e.local_rank >= e.local_world_size)
    throw UserError("LOCAL_RANK=" + std::to_string(e.local_rank) + " is not below LOCAL_WORLD_SIZE (or NPROC_PER_NODE)=" +
                    std::to_string(e.local_world_size));
  if (e.world_size > 1 && !env("MASTER_ADDR"))
    throw UserError("WORLD_SIZE=" + std::to_string(e.world_size) +
                    " but MASTER_ADDR is not set: give the address of the machine running rank 0 (and MASTER_PORT)");
  e.master_addr = env("MASTER_ADDR").value_or(e.master_addr);
  if (env("MASTER_PORT")) e.master_port = port_env("MASTER_PORT");
  e.rendezvous = env("MASTER_ADDR") && env("MASTER_PORT");
  return e;
}

std::optional<LaunchRequest> launch_request_from_environment() {
  if (env("RANK")) return std::nullopt;  // started by a launcher: this process is one rank
  LaunchRequest r;
  r.nproc_per_node = int_env("NPROC_PER_NODE", 1).value_or(1);
  r.nnodes = int_env("NNODES", 1).value_or(1);
  r.node_rank = int_env("NODE_RANK", 0).value_or(0);
  if (r.world_size() < 2) return std::nullopt;
  if (r.node_rank >= r.nnodes)
    throw UserError("NODE_RANK=" + std::to_string(r.node_rank) + " is not below NNODES=" + std::to_string(r.nnodes));
  if (r.nnodes > 1 && !env("MASTER_ADDR"))
    throw UserError("NNODES=" + std::to_string(r.nnodes) +
                    " but MASTER_ADDR is not set: give every node the address of node 0 (and the same MASTER_PORT)");
  r.master_addr = env("MASTER_ADDR").value_or(r.master_addr);
  if (env("MASTER_PORT")) r.master_port = port_env("MASTER_PORT");
  return r;
}

}  // namespace grpo::dist
