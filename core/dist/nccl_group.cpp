#include "dist/nccl_group.h"

#include <fmt/format.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <cstdlib>

#ifdef GRPO_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

#if defined(GRPO_WITH_CUDA) && defined(USE_C10D_NCCL)
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include "dist/exit_deadline.h"

namespace grpo::dist {

void default_nccl_error_handling() { setenv("TORCH_NCCL_ASYNC_ERROR_HANDLING", "2", /*overwrite=*/0); }

#if defined(GRPO_WITH_CUDA) && defined(USE_C10D_NCCL)

c10::intrusive_ptr<c10d::Backend> make_nccl_group(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                                  at::Device device, std::chrono::milliseconds timeout) {
  default_nccl_error_handling();  // main() has set it already; this for a program whose main() did not
  auto options = c10d::ProcessGroupNCCL::Options::create();
  options->timeout = timeout;
  auto group = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, size, options);
  // The communicator now, on this rank's GPU: a rank that cannot reach the
  // others fails here, at the start, instead of at its first gradient. Every
  // rank has reached the store by now, so what can still stall is NCCL's own
  // bootstrap, which no timeout of ours reaches.
  ExitDeadline deadline(
      timeout, fmt::format("joining the NCCL group as rank {} of {} on {}: NCCL's bootstrap did not connect the ranks; "
                           "set NCCL_SOCKET_IFNAME to a network interface every rank reaches (NCCL_DEBUG=INFO names "
                           "the ones it tried), or leave device tensors to Gloo (--ddp_backend gloo for training, "
                           "sampler_args {{\"weight_backend\": \"gloo\"}} for the push to rollout servers)",
                           rank, size, device.str()));
  group->eagerConnectSingleDevice(device);
  return group;
}

#else  // A build without CUDA has no NCCL: the Gloo groups carry everything.

c10::intrusive_ptr<c10d::Backend> make_nccl_group(const c10::intrusive_ptr<c10d::Store>&, int, int, at::Device,
                                                  std::chrono::milliseconds) {
  return {};
}

#endif

std::string device_uuid(const at::Device& device) {
#ifdef GRPO_WITH_CUDA
  if (!device.is_cuda()) return "";
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, device.has_index() ? device.index() : 0) != cudaSuccess) return "";
  const auto* b = reinterpret_cast<const unsigned char*>(prop.uuid.bytes);
  return fmt::format("GPU-{:02x}{:02x}{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}{:02x}{:02x}{:02x}{:02x}",
                     b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
                     b[15]);
#else
  (void)device;
  return "";
#endif
}

std::optional<std::pair<int, int>> ranks_sharing_a_gpu(const std::vector<std::string>& uuids) {
  for (size_t a = 0; a < uuids.size(); ++a) {
    if (uuids[a].empty()) return std::nullopt;
    for (size_t b = 0; b < a; ++b)
      if (uuids[b] == uuids[a]) return std::pair{static_cast<int>(b), static_cast<int>(a)};
  }
  return std::nullopt;
}

void abort_quietly(c10d::Backend& nccl) {
  try {
    nccl.abort();
  } catch (const std::exception&) {
  }
}

bool nccl_serves(const c10::intrusive_ptr<c10d::Backend>& nccl, const std::vector<at::Tensor>& tensors) {
  if (!nccl || tensors.empty()) return false;
  for (const at::Tensor& t : tensors)
    if (!t.is_cuda()) return false;
  return true;
}

}  // namespace grpo::dist
