#include "kernel_profile.h"

#include <ATen/record_function.h>
#include <torch/csrc/autograd/profiler_kineto.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <set>
#include <vector>

namespace grpo::bench {

namespace {

namespace prof = torch::autograd::profiler;
using torch::profiler::impl::ActivityType;
using torch::profiler::impl::ProfilerConfig;
using torch::profiler::impl::ProfilerState;

constexpr const char* kMarker = "grpo::profiled_call";

struct Tally {
  int64_t count = 0;
  uint64_t ns = 0;
};

// cudaLaunchKernel, cudaGraphLaunch, cuLaunchKernel...: the runtime's and the driver's.
bool is_runtime_call(const std::string& name) { return name.rfind("cu", 0) == 0; }

void print_top(const std::map<std::string, Tally>& by_name, int64_t steps, const char* what) {
  std::vector<std::pair<std::string, Tally>> rows(by_name.begin(), by_name.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.ns > b.second.ns; });
  std::printf("  %10s %12s %10s  %s\n", "per step", "us per step", "us each", what);
  const size_t shown = std::min<size_t>(rows.size(), 25);
  for (size_t i = 0; i < shown; ++i) {
    const Tally& t = rows[i].second;
    std::string name = rows[i].first;
    if (name.size() > 100) name = name.substr(0, 97) + "...";
    std::printf("  %10.2f %12.2f %10.2f  %s\n", static_cast<double>(t.count) / static_cast<double>(steps),
                static_cast<double>(t.ns) / 1e3 / static_cast<double>(steps),
                static_cast<double>(t.ns) / 1e3 / static_cast<double>(t.count), name.c_str());
  }
  if (rows.size() > shown) std::printf("  (%zu more kinds)\n", rows.size() - shown);
}

}  // namespace

void print_kernel_profile(const std::string& title, bool cuda, int64_t steps, const std::function<void()>& setup,
                          const std::function<void()>& call) {
  const ProfilerConfig config(ProfilerState::KINETO);
  std::set<ActivityType> activities{ActivityType::CPU};
  if (cuda) activities.insert(ActivityType::CUDA);
  prof::prepareProfiler(config, activities);
  prof::enableProfiler(config, activities);
  setup();
  const auto t0 = std::chrono::steady_clock::now();
  {
    RECORD_USER_SCOPE(kMarker);
    call();  // returns once its ids are read back: its device work is done
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::unique_ptr<prof::ProfilerResult> result = prof::disableProfiler();

  uint64_t begin = 0, end = 0;
  for (const prof::KinetoEvent& e : result->events())
    if (e.name() == kMarker) begin = e.startNs(), end = e.endNs();
  std::printf("\nprofile: %s: %.3f s, %.1f us per step (%lld steps)\n", title.c_str(), wall,
              wall * 1e6 / static_cast<double>(steps), static_cast<long long>(steps));
  if (end == 0) {
    std::printf("  the profiler recorded no marker for the call: nothing to show\n");
    return;
  }
  std::map<std::string, Tally> device, runtime, ops;
  uint64_t busy = 0;
  int64_t kernels = 0;
  for (const prof::KinetoEvent& e : result->events()) {
    if (e.startNs() < begin || e.startNs() > end || e.name() == kMarker) continue;
    const std::string name = e.name();
    Tally* t;
    if (e.deviceType() == c10::DeviceType::CUDA) {
      t = &device[name];
      busy += e.durationNs();
      ++kernels;
    } else if (is_runtime_call(name)) {
      t = &runtime[name];
    } else {
      t = &ops[name];
    }
    ++t->count;
    t->ns += e.durationNs();
  }
  const auto per_step = [&](double x) { return x / static_cast<double>(steps); };
  if (cuda) {
    std::printf("  device: %.1f kernels and copies per step, busy %.1f us per step (%.0f%% of the wall time)\n",
                per_step(static_cast<double>(kernels)), per_step(static_cast<double>(busy) / 1e3),
                100.0 * static_cast<double>(busy) / 1e9 / wall);
    int64_t op_calls = 0;
    for (const auto& [name, t] : ops) op_calls += t.count;
    std::printf("  host: %.1f at:: op calls per step, nested ones counted (a replayed graph makes none)\n",
                per_step(static_cast<double>(op_calls)));
    if (device.empty()) std::printf("  (no device events: CUPTI recorded nothing here)\n");
    else print_top(device, steps, "kernel or copy");
    if (!runtime.empty()) print_top(runtime, steps, "host call into CUDA");
  } else {
    print_top(ops, steps, "at:: op (times include the ops it calls)");
  }
}

}  // namespace grpo::bench
