#include "dist/nccl_group.h"

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#if defined(GRPO_WITH_CUDA) && defined(USE_C10D_NCCL)
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

namespace grpo::dist {

#if defined(GRPO_WITH_CUDA) && defined(USE_C10D_NCCL)

c10::intrusive_ptr<c10d::Backend> make_nccl_group(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                                  at::Device device, std::chrono::milliseconds timeout) {
  auto options = c10d::ProcessGroupNCCL::Options::create();
  options->timeout = timeout;
  auto group = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, size, options);
  // The communicator now, on this rank's GPU: a rank that cannot reach the
  // others fails here, at the start, instead of at its first gradient.
  group->eagerConnectSingleDevice(device);
  return group;
}

#else  // A build without CUDA has no NCCL: the Gloo groups carry everything.

c10::intrusive_ptr<c10d::Backend> make_nccl_group(const c10::intrusive_ptr<c10d::Store>&, int, int, at::Device,
                                                  std::chrono::milliseconds) {
  return {};
}

#endif

bool nccl_serves(const c10::intrusive_ptr<c10d::Backend>& nccl, const std::vector<at::Tensor>& tensors) {
  if (!nccl || tensors.empty()) return false;
  for (const at::Tensor& t : tensors)
    if (!t.is_cuda()) return false;
  return true;
}

}  // namespace grpo::dist
