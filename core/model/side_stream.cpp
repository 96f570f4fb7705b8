#include "model/side_stream.h"

#ifdef GRPO_WITH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <map>
#include <mutex>
#endif

namespace grpo::model {

#ifdef GRPO_WITH_CUDA

struct StreamMark {
  at::cuda::CUDAEvent event;
};

std::shared_ptr<StreamMark> mark_stream(at::Device device) {
  if (!device.is_cuda()) return nullptr;
  auto mark = std::make_shared<StreamMark>();
  mark->event.record(c10::cuda::getCurrentCUDAStream(device.index()));
  return mark;
}

namespace {

// One side stream per GPU for the process, taken from LibTorch's pool once.
c10::cuda::CUDAStream side_stream(c10::DeviceIndex index) {
  static std::mutex mutex;
  static std::map<c10::DeviceIndex, c10::cuda::CUDAStream> streams;
  const std::lock_guard<std::mutex> lock(mutex);
  auto it = streams.find(index);
  if (it == streams.end()) it = streams.emplace(index, c10::cuda::getStreamFromPool(false, index)).first;
  return it->second;
}

}  // namespace

struct SideStreamScope::Impl {
  c10::cuda::CUDAStream stream;
  c10::cuda::CUDAStreamGuard guard;
  bool finished = false;
  explicit Impl(c10::cuda::CUDAStream s) : stream(s), guard(s) {}
};

SideStreamScope::SideStreamScope(at::Device device, const std::shared_ptr<StreamMark>& mark) {
  if (!device.is_cuda()) return;
  const c10::DeviceIndex index = device.has_index() ? device.index() : c10::cuda::current_device();
  const c10::cuda::CUDAStream stream = side_stream(index);
  if (mark) mark->event.block(stream);
  impl_ = std::make_unique<Impl>(stream);
}

void SideStreamScope::finish() {
  if (!impl_ || impl_->finished) return;
  impl_->finished = true;
  impl_->stream.synchronize();
}

SideStreamScope::~SideStreamScope() {
  if (!impl_ || impl_->finished) return;
  try {  // the work threw: its kernels still run before the thread hands anything back
    impl_->stream.synchronize();
  } catch (...) {  // the work's own exception is the one that propagates
  }
}

struct StreamContext {
  c10::cuda::CUDAStream stream;
};

std::shared_ptr<const StreamContext> current_stream_context(at::Device device) {
  if (!device.is_cuda()) return nullptr;
  const c10::DeviceIndex index = device.has_index() ? device.index() : c10::cuda::current_device();
  return std::make_shared<const StreamContext>(StreamContext{c10::cuda::getCurrentCUDAStream(index)});
}

// CUDAStreamGuard makes the stream's device current too, and restores both.
struct StreamContextScope::Impl {
  c10::cuda::CUDAStreamGuard guard;
  explicit Impl(c10::cuda::CUDAStream s) : guard(s) {}
};

StreamContextScope::StreamContextScope(const std::shared_ptr<const StreamContext>& context) {
  if (context) impl_ = std::make_unique<Impl>(context->stream);
}

StreamContextScope::~StreamContextScope() = default;

#else

struct StreamContext {};
std::shared_ptr<const StreamContext> current_stream_context(at::Device) { return nullptr; }
struct StreamContextScope::Impl {};
StreamContextScope::StreamContextScope(const std::shared_ptr<const StreamContext>&) {}
StreamContextScope::~StreamContextScope() = default;

struct StreamMark {};
std::shared_ptr<StreamMark> mark_stream(at::Device) { return nullptr; }
struct SideStreamScope::Impl {};
SideStreamScope::SideStreamScope(at::Device, const std::shared_ptr<StreamMark>&) {}
SideStreamScope::~SideStreamScope() = default;
void SideStreamScope::finish() {}

#endif

}  // namespace grpo::model
