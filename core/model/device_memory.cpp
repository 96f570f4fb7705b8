#include "model/device_memory.h"

#ifdef GRPO_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#endif

namespace grpo::model {

#ifdef GRPO_WITH_CUDA

namespace {
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr auto kAll = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
}  // namespace

std::optional<DeviceMemory> device_memory(at::Device device) {
  if (!device.is_cuda()) return std::nullopt;
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
  return DeviceMemory{static_cast<double>(stats.allocated_bytes[kAll].current) / kGiB,
                      static_cast<double>(stats.reserved_bytes[kAll].current) / kGiB,
                      static_cast<double>(stats.allocated_bytes[kAll].peak) / kGiB};
}

void reset_peak_memory(at::Device device) {
  if (device.is_cuda()) c10::cuda::CUDACachingAllocator::resetPeakStats(device.index());
}

std::optional<DeviceCapacity> device_capacity(at::Device device) {
  if (!device.is_cuda()) return std::nullopt;
  c10::cuda::CUDAGuard on(device);
  size_t free = 0, total = 0;
  if (cudaMemGetInfo(&free, &total) != cudaSuccess) return std::nullopt;
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
  return DeviceCapacity{static_cast<int64_t>(total), static_cast<int64_t>(free) + stats.reserved_bytes[kAll].current -
                                                         stats.allocated_bytes[kAll].current};
}

void synchronize(at::Device device) {
  if (!device.is_cuda()) return;
  c10::cuda::CUDAGuard on(device);
  c10::cuda::device_synchronize();
}

void wait_for_stream(at::Device device) {
  if (device.is_cuda()) c10::cuda::getCurrentCUDAStream(device.index()).synchronize();
}

void make_current(at::Device device) {
  if (device.is_cuda() && device.has_index()) c10::cuda::set_device(device.index());
}

void release_cached_memory(at::Device device) {
  if (!device.is_cuda()) return;
  c10::cuda::CUDAGuard on(device);
  c10::cuda::device_synchronize();
  c10::cuda::CUDACachingAllocator::emptyCache();
}

#else  // A build without CUDA has no GPU to report on.

std::optional<DeviceMemory> device_memory(at::Device) { return std::nullopt; }
void reset_peak_memory(at::Device) {}
std::optional<DeviceCapacity> device_capacity(at::Device) { return std::nullopt; }
void synchronize(at::Device) {}
void wait_for_stream(at::Device) {}
void make_current(at::Device) {}
void release_cached_memory(at::Device) {}

#endif

}  // namespace grpo::model
