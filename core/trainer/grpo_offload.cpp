// The trainer's side of --offload_model, --offload_optimizer and
// --gc_collect_after_offload (trainer/offload.h): what leaves the GPU when,
// and the time and bytes it took (time/offload, memory/offloaded_gb).
#include "model/device_memory.h"
#include "trainer/checkpoint.h"
#include "trainer/grpo_trainer.h"
#include "util/clock.h"

namespace grpo::trainer {

namespace {
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// The host memory the offloads hold (pinned: the OS cannot page it out), whatever is parked now.
double host_held_gb(const OffloadArenas& a) {
  return static_cast<double>(a.reference.held_bytes() + a.gradients.held_bytes() + a.moments.held_bytes()) / kGiB;
}
}  // namespace

AwayForSampling GrpoTrainer::offload_for_sampling(bool gradients_zero, Metrics& m) {
  if (!s_.sampling.offload_model || !offloads()) return AwayForSampling();
  const double t0 = util::now_s();
  torch::nn::Module* reference = policy_.reference ? policy_.reference.get() : nullptr;
  AwayForSampling away(reference, s_.model.device, trainable_parameters(*policy_.policy), gradients_zero,
                       &offload_arenas_);
  if (s_.sampling.gc_after_offload) model::release_cached_memory(s_.model.device);
  m["memory/offloaded_gb"] += static_cast<double>(away.bytes()) / kGiB;
  m["memory/offload_host_gb"] = host_held_gb(offload_arenas_);
  m["time/offload"] += util::now_s() - t0;
  return away;
}

void GrpoTrainer::bring_back(AwayForSampling& away, Metrics& m) {
  const double t0 = util::now_s();
  away.restore();
  m["time/offload"] += util::now_s() - t0;
}

void GrpoTrainer::park_optimizer_state(bool parked, Metrics& m) {
  if (!s_.sampling.offload_optimizer || !offloads()) return;
  const double t0 = util::now_s();
  if (parked) {
    const int64_t bytes = optimizer_state_to(*policy_.optimizer, at::kCPU, &offload_arenas_.moments);
    // A checkpoint reads the host copies: they are complete before anything else runs. This
    // stream's copies, not the device's every stream: the asynchronous sampler may be capturing a
    // CUDA graph on its own, and a device-wide synchronize would fail that capture and this step.
    model::wait_for_stream(s_.model.device);
    if (s_.sampling.gc_after_offload) model::release_cached_memory(s_.model.device);
    m["memory/offloaded_gb"] += static_cast<double>(bytes) / kGiB;
    m["memory/offload_host_gb"] = host_held_gb(offload_arenas_);
  } else {
    optimizer_state_to_devices(*policy_.optimizer);
  }
  m["time/offload"] += util::now_s() - t0;
}

}  // namespace grpo::trainer
