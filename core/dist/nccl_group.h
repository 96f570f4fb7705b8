// NCCL between ranks that train on GPUs: c10d's ProcessGroupNCCL for the
// tensors that live on the device (gradients, ZeRO's shards, metrics), beside
// the Gloo groups that keep host-side traffic (bytes, barriers) and CPU runs.
// NCCL runs each collective on its own CUDA stream, which waits for the
// work queued before it: an all-reduce started from a gradient's hook runs
// while backward goes on.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <c10/util/intrusive_ptr.h>

namespace c10d {
class Backend;
class Store;
}  // namespace c10d

namespace grpo::dist {

// On a failed or stalled collective NCCL's watchdog would end the process
// from its own thread (TORCH_NCCL_ASYNC_ERROR_HANDLING's default, 3), before
// the World's polled wait names the rank that stopped and the run saves its
// checkpoint: 2 has it abort the communicator only. A user's setting wins.
// Called by main() before any thread starts (setenv may move the environment
// while another thread reads it); make_nccl_group calls it too, a no-op then.
void default_nccl_error_handling();

// The group of `size` ranks over `store`, each on its GPU `device`; null in
// a build without CUDA. `timeout` bounds NCCL's own watchdog, a backstop
// behind the World's (which names the rank that stopped, and aborts), and
// forming the communicator: past it the process exits saying so (ExitDeadline).
c10::intrusive_ptr<c10d::Backend> make_nccl_group(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                                  at::Device device, std::chrono::milliseconds timeout);

// Aborts `nccl`'s communicators, freeing this rank without the others (a
// clean shutdown waits for them); an error doing so is dropped, since the
// failure that led here is what gets reported.
void abort_quietly(c10d::Backend& nccl);

// True where NCCL serves `tensors` (all on a GPU) and a group exists.
bool nccl_serves(const c10::intrusive_ptr<c10d::Backend>& nccl, const std::vector<at::Tensor>& tensors);

// A GPU's UUID as nvidia-smi and TRL's client_device_uuid spell it
// ("GPU-xxxxxxxx-xxxx-..."); "" for the CPU or where it cannot be read.
std::string device_uuid(const at::Device& device);

// The first two ranks whose GPUs (by UUID, one per rank) are the same one:
// NCCL refuses a group in which two ranks share a GPU. nullopt when every
// rank has its own, or when a UUID is unknown ("": nothing to compare).
std::optional<std::pair<int, int>> ranks_sharing_a_gpu(const std::vector<std::string>& uuids);

}  // namespace grpo::dist
