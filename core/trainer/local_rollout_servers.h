// grpo-rollout servers the trainer starts for itself (--num_infer_workers
// with --vllm_mode server and no address): processes on this node, each on
// a free loopback port, stopped when the run ends — and when the trainer
// dies, since each exits with its parent.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include <c10/core/Device.h>

namespace grpo::trainer {

// The devices of `count` rollout servers a node starts beside `local_size`
// training ranks that train on `training` (cuda:LOCAL_RANK, or the CPU), of
// `visible_gpus`: on GPUs, those the ranks leave free, in turn (ms-swift's
// async mode: CUDA_VISIBLE_DEVICES=0..7 NPROC_PER_NODE=7 --num_infer_workers
// 1 samples on the eighth); with none free, the ranks' own GPUs in turn
// (each server then shares one with training); on the CPU, the CPU.
std::vector<std::string> rollout_server_devices(const c10::Device& training, int visible_gpus, int local_size,
                                                int64_t count);

struct LocalServerOptions {
  int64_t count = 1;
  std::string model_dir;
  std::string torch_dtype = "float32";
  std::vector<std::string> devices;  // server i's (rollout_server_devices); empty: all on the CPU
  // Their engines' decoding (grpo-rollout's flags of the same names).
  int64_t max_num_seqs = 256;
  double gpu_memory_utilization = 0.9;
  bool enforce_eager = false;
  int threads_each = 1;         // engine threads of each server
  std::string log_dir;          // each server's stderr goes to <log_dir>/rollout_server_<i>.log
  double start_timeout_s = 240;  // until each prints its address (vllm_server_timeout)
};

class LocalRolloutServers {
 public:
  // Starts the servers and returns once each listens. Throws naming the
  // server and the end of its log when one exits or stays silent.
  explicit LocalRolloutServers(const LocalServerOptions& options);
  ~LocalRolloutServers();  // SIGTERM to each, SIGKILL to any still there after 10 s
  LocalRolloutServers(const LocalRolloutServers&) = delete;
  LocalRolloutServers& operator=(const LocalRolloutServers&) = delete;

  const std::vector<int>& ports() const { return ports_; }  // each on 127.0.0.1

 private:
  struct Server {
    pid_t pid = -1;
    int stdout_fd = -1;  // kept open: the server's stdout must not break under it
    std::string log;
  };
  void stop_all();
  std::vector<Server> servers_;
  std::vector<int> ports_;
};

}  // namespace grpo::trainer
