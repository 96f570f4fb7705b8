// NPROC_PER_NODE=N grpo-host train ...: this process starts the N ranks of
// this node itself (as ms-swift does through torchrun), each the same program
// with the same arguments and RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
// NODE_RANK, MASTER_ADDR and MASTER_PORT set, and supervises them.
#pragma once

#include <string>
#include <vector>

#include "dist/rank_env.h"

namespace grpo::dist {

// Runs the ranks of this node to their end and returns the exit status to
// exit with: 0 when every rank succeeded, else the first failing rank's
// (128 + signal for a killed one). When one rank fails, the others are told
// to stop (SIGTERM, and SIGCONT for a stopped one) and killed if still alive
// after `grace_s`; SIGINT and SIGTERM sent to the launcher reach every rank.
// `argv`: the program's own arguments, passed on unchanged.
int launch_ranks(const LaunchRequest& request, const std::vector<std::string>& argv, double grace_s);

// A TCP port free on `host` now (the kernel's choice), for a one-machine run
// that did not set MASTER_PORT.
int free_port(const std::string& host);

}  // namespace grpo::dist
