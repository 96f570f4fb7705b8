#include "model/decode_graphs.h"

#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

#include <spdlog/spdlog.h>

#ifdef GRPO_WITH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <ATen/core/CachingHostAllocator.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace grpo::model {

#ifdef GRPO_WITH_CUDA

struct DecodeGraphs::Impl {
  bool enabled;
  std::map<std::pair<int64_t, int64_t>, std::unique_ptr<at::cuda::CUDAGraph>> graphs;
  // One pool for the graphs held now: a pool whose graphs are all gone is
  // not taken again (the allocators assert it still has users), so clear()
  // starts the next capture on a fresh one.
  at::cuda::MempoolId_t pool{0, 0};
  // Every capture on one stream: the allocator hands a freed block again only
  // to its own stream, so graphs captured on one stream share their
  // temporaries (they never run at once: replays are ordered on the caller's
  // stream) and the pool holds the largest step's, not the sum of all.
  std::optional<c10::cuda::CUDAStream> side;
  int64_t replays = 0;
};

namespace {

// After a capture that threw part-way: the stream out of capture mode and
// both allocators no longer routing its allocations to the pool, so that the
// stream and the GPU stay usable. Each step may already be done, or never
// begun: whatever fails here is left as it is.
void abandon_capture(const c10::cuda::CUDAStream& stream, at::cuda::MempoolId_t pool) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream.stream(), &status) == cudaSuccess && status != cudaStreamCaptureStatusNone) {
    cudaGraph_t partial = nullptr;
    cudaStreamEndCapture(stream.stream(), &partial);  // an invalidated capture ends with an error
    if (partial) cudaGraphDestroy(partial);
  }
  (void)cudaGetLastError();
  try {
    c10::cuda::CUDACachingAllocator::endAllocateToPool(stream.device_index(), pool);
  } catch (const std::exception&) {  // capture_end had done it, or capture_begin never did
  }
  try {
    at::getHostAllocator(at::kCUDA)->end_allocate_to_pool(pool);
  } catch (const std::exception&) {
  }
}

// capture_begin marked this GPU's default random generator as capturing, and
// only capture_end unmarks it (LibTorch does not export the call that does):
// left so, the next eager random draw on the GPU (LoRA's dropout in
// training) would fail. A capture of one small op on `stream`, the current
// stream, ended, leaves the generator as it was.
void unmark_default_generator(const c10::cuda::CUDAStream& stream) {
  try {
    const at::Tensor scratch = at::zeros({1}, at::TensorOptions().device(at::kCUDA, stream.device_index()));
    at::cuda::CUDAGraph graph;
    graph.capture_begin(at::cuda::graph_pool_handle(), cudaStreamCaptureModeThreadLocal);
    try {
      scratch.add_(1);
      graph.capture_end();
    } catch (const std::exception&) {
      abandon_capture(stream, graph.pool());
    }
  } catch (const std::exception&) {  // a device already failing: the warning below says what failed first
  }
}

// Orders what the side stream was given after everything the caller's stream
// does next, on every way out of the first step of a shape: after a warm-up
// or a capture that threw too, or the caller's next admission (or the
// decoder's buffers, freed) would race the side stream's writes.
class JoinOnExit {
 public:
  JoinOnExit(const c10::cuda::CUDAStream& side, const c10::cuda::CUDAStream& caller) : side_(side), caller_(caller) {}
  JoinOnExit(const JoinOnExit&) = delete;
  JoinOnExit& operator=(const JoinOnExit&) = delete;
  ~JoinOnExit() {
    try {
      at::cuda::CUDAEvent finished;
      finished.record(side_);
      finished.block(caller_);
    } catch (const std::exception&) {  // a device already failing: the error on its way out says so
      (void)cudaGetLastError();
    }
  }

 private:
  c10::cuda::CUDAStream side_, caller_;
};

}  // namespace

void DecodeGraphs::step(SlotDecoder& decoder, int64_t b, int64_t span, at::Device device) {
  if (!impl_->enabled || !device.is_cuda()) return decoder.step(b, span);
  auto found = impl_->graphs.find({b, span});
  if (found != impl_->graphs.end()) {
    found->second->replay();  // on the current stream
    ++impl_->replays;
    return;
  }
  c10::cuda::CUDAGuard on_device(device);
  const c10::cuda::CUDAStream caller = c10::cuda::getCurrentCUDAStream(device.index());
  if (!impl_->side || impl_->side->device_index() != device.index())
    impl_->side = c10::cuda::getStreamFromPool(false, device.index());
  const c10::cuda::CUDAStream side = *impl_->side;
  at::cuda::CUDAEvent ready;
  ready.record(caller);  // what the caller queued (the rows' admission) comes first
  ready.block(side);
  const JoinOnExit join(side, caller);
  {
    c10::cuda::CUDAStreamGuard on_side(side);
    decoder.step(b, span);  // this step's work, and the warm-up capture needs
    if (impl_->pool.first == 0 && impl_->pool.second == 0) impl_->pool = at::cuda::graph_pool_handle();
    auto graph = std::make_unique<at::cuda::CUDAGraph>();
    try {
      // Thread-local: a rollout server's other threads may use the GPU meanwhile.
      graph->capture_begin(impl_->pool, cudaStreamCaptureModeThreadLocal);
      decoder.step(b, span);  // recorded, not run
      graph->capture_end();
    } catch (const std::exception& e) {
      // An operation of the step that cannot be captured (one that waits for
      // the host): this step's work is done (the eager run above), and every
      // later one runs eagerly too, instead of capturing again, and failing
      // again, at each call.
      abandon_capture(side, impl_->pool);
      graph.reset();
      unmark_default_generator(side);
      impl_->pool = {0, 0};  // a pool left mid-capture is not used again
      impl_->enabled = false;
      const std::string what = e.what();
      spdlog::warn("capturing the decoding step of {} rows over {} positions as a CUDA graph failed: {}; this engine "
                   "decodes without graphs from now on (--vllm_enforce_eager true, grpo-rollout --enforce_eager true, "
                   "skips the capture)",
                   b, span, what.substr(0, what.find('\n')));
      return;
    }
    impl_->graphs.emplace(std::make_pair(b, span), std::move(graph));
  }
}

void DecodeGraphs::clear() {
  impl_->graphs.clear();
  impl_->pool = {0, 0};
}

#else  // No CUDA in this build: every step runs eagerly.

struct DecodeGraphs::Impl {
  bool enabled;
  std::map<std::pair<int64_t, int64_t>, int> graphs;
  int64_t replays = 0;
};

void DecodeGraphs::step(SlotDecoder& decoder, int64_t b, int64_t span, at::Device) { decoder.step(b, span); }

void DecodeGraphs::clear() {}

#endif

DecodeGraphs::DecodeGraphs(bool enabled) : impl_(std::make_unique<Impl>()) { impl_->enabled = enabled; }
DecodeGraphs::~DecodeGraphs() = default;
int64_t DecodeGraphs::captured() const { return static_cast<int64_t>(impl_->graphs.size()); }
int64_t DecodeGraphs::replays() const { return impl_->replays; }

}  // namespace grpo::model
