// Where this process stands in a distributed run, read from the environment
// as torchrun, Slurm (through torchrun or srun) and ms-swift set it: RANK,
// WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT; and
// the launcher's own NPROC_PER_NODE, NNODES, NODE_RANK.
#pragma once

#include <optional>
#include <string>

namespace grpo::dist {

struct RankEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;  // processes of this run on this machine
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;   // torchrun's default
  // MASTER_ADDR and MASTER_PORT both given, as torchrun gives them even to a
  // world of one: that world still forms its process group (as DDP does),
  // so one GPU runs the collectives' path for real.
  bool rendezvous = false;
};

// What the launcher is asked for: NPROC_PER_NODE processes on each of NNODES
// machines, this one being NODE_RANK.
struct LaunchRequest {
  int nproc_per_node = 1;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  std::optional<int> master_port;  // unset: a free port (one machine) or 29500 (several)
  int world_size() const { return nproc_per_node * nnodes; }
};

// This process's rank when a launcher started it (RANK and WORLD_SIZE set),
// else nullopt. Malformed or inconsistent values are a UserError naming the
// variable.
std::optional<RankEnv> rank_env_from_environment();

// NPROC_PER_NODE / NNODES / NODE_RANK / MASTER_ADDR / MASTER_PORT when this
// process is to start the ranks itself (no RANK set and a world of 2 or more),
// else nullopt.
std::optional<LaunchRequest> launch_request_from_environment();

}  // namespace grpo::dist
