// Work a background thread does on a GPU beside the launching thread's
// (async_generate: the next batch sampled while this one trains). On one
// stream both would queue behind each other; here the background thread's
// kernels go to a stream of their own, ordered by hand at both ends:
// - they start after everything the launching thread had queued when it
//   launched them (the weights they read were written there);
// - the background thread returns only once its stream has run them all, so
//   its results, and the memory it frees, are done with before the
//   launching thread touches them.
// On the CPU (or a build without CUDA) both are nothing.
#pragma once

#include <memory>

#include <c10/core/Device.h>

namespace grpo::model {

// On the launching thread: marks what its current stream on `device` has
// queued so far. Null on the CPU.
struct StreamMark;
std::shared_ptr<StreamMark> mark_stream(at::Device device);

// On the background thread, for the scope's life: the current stream on
// `device` is the process's side stream for it (the same one every time, so
// that memory the work keeps across launches stays on one stream), which
// first waits for `mark`. finish() waits until it has run all that was
// queued on it (throwing a kernel's error, so the work's result carries it);
// the scope's end waits too if the work threw before finish(), and restores
// the stream that was current.
class SideStreamScope {
 public:
  SideStreamScope(at::Device device, const std::shared_ptr<StreamMark>& mark);
  ~SideStreamScope();
  void finish();
  SideStreamScope(const SideStreamScope&) = delete;
  SideStreamScope& operator=(const SideStreamScope&) = delete;

  // Whether a side stream is current (on a GPU).
  bool active() const { return impl_ != nullptr; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The calling thread's current GPU and stream for `device` (null on the
// CPU), and a scope that makes them current on another thread: for a helper
// thread that runs part of this thread's work (run_interruptible's), whose
// kernels then queue where this thread's would, the side stream above
// included. CUDA's current device and stream are per thread.
struct StreamContext;
std::shared_ptr<const StreamContext> current_stream_context(at::Device device);

class StreamContextScope {
 public:
  explicit StreamContextScope(const std::shared_ptr<const StreamContext>& context);
  ~StreamContextScope();
  StreamContextScope(const StreamContextScope&) = delete;
  StreamContextScope& operator=(const StreamContextScope&) = delete;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace grpo::model
