// What a GPU's memory holds, from LibTorch's caching allocator: for the
// `memory/*` metrics of each phase, and to hand cached blocks back to the
// driver (gc_collect_after_offload). On the CPU there is nothing to report
// here (the process's own size is memory/rss_gb).
#pragma once

#include <optional>

#include <c10/core/Device.h>

namespace grpo::model {

struct DeviceMemory {
  double allocated_gb = 0;       // held by tensors now
  double reserved_gb = 0;        // held by the allocator (tensors and its cache)
  double peak_allocated_gb = 0;  // the most held by tensors since the last reset_peak_memory
};

// nullopt on the CPU, or in a build without CUDA.
std::optional<DeviceMemory> device_memory(at::Device device);
void reset_peak_memory(at::Device device);

struct DeviceCapacity {
  int64_t total = 0;       // the GPU's whole memory
  int64_t obtainable = 0;  // what this process could still take: the driver's free memory (other
                           // processes' use taken out) and the allocator's cached, unused blocks
};
// In bytes; nullopt on the CPU or without CUDA.
std::optional<DeviceCapacity> device_capacity(at::Device device);
// Returns once everything queued on the GPU has run; nothing on the CPU.
void synchronize(at::Device device);
// Returns once the calling thread's current stream on `device` has run what
// was queued on it (other threads' work too, where they share that stream:
// the default one unless a thread chose another); nothing on the CPU.
void wait_for_stream(at::Device device);
// Makes `device` this process's current GPU (torch.cuda.set_device), so that
// work without a tensor to say where (a stream, a context) lands there and
// not on GPU 0; nothing on the CPU.
void make_current(at::Device device);
// Returns the allocator's unused cached blocks to the driver; waits for the
// device first. Nothing on the CPU.
void release_cached_memory(at::Device device);

}  // namespace grpo::model
