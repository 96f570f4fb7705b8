#include "rollout/replicas.h"

#include <c10/core/DeviceGuard.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <exception>
#include <future>
#include <thread>

#include "model/weights.h"

namespace grpo::rollout {

std::vector<at::Device> replica_devices(at::Device first, int64_t count, int visible_gpus) {
  if (count < 1) throw std::invalid_argument(fmt::format("--data_parallel_size must be at least 1, got {}", count));
  if (!first.is_cuda()) return std::vector<at::Device>(static_cast<size_t>(count), first);
  const int64_t start = first.has_index() ? first.index() : 0;
  if (start + count > visible_gpus)
    throw std::invalid_argument(fmt::format(
        "--data_parallel_size {} from cuda:{} needs GPUs cuda:{}..cuda:{}, and this process sees {}: lower it, start "
        "from a lower --device, or make more GPUs visible (CUDA_VISIBLE_DEVICES)",
        count, start, start, start + count - 1, visible_gpus));
  std::vector<at::Device> devices;
  for (int64_t i = 0; i < count; ++i) devices.emplace_back(at::kCUDA, static_cast<c10::DeviceIndex>(start + i));
  return devices;
}

std::vector<std::pair<size_t, size_t>> split_requests(size_t requests, size_t parts) {
  parts = std::max<size_t>(1, std::min(parts, requests));
  std::vector<std::pair<size_t, size_t>> runs;
  const size_t base = requests / parts, larger = requests % parts;
  size_t begin = 0;
  for (size_t i = 0; i < parts && begin < requests; ++i) {
    const size_t end = begin + base + (i < larger ? 1 : 0);
    runs.emplace_back(begin, end);
    begin = end;
  }
  return runs;
}

Replicas::Replicas(const std::string& model_dir, at::ScalarType dtype, const std::vector<at::Device>& devices,
                   const tok::Tokenizer* tokenizer, const model::EngineOptions& engine,
                   std::chrono::microseconds batch_wait, int num_threads, int64_t max_sequences_in_flight) {
  // Replicas on the CPU share its cores rather than each taking all of them.
  const size_t on_cpu = static_cast<size_t>(std::count_if(devices.begin(), devices.end(),
                                                          [](const at::Device& d) { return d.is_cpu(); }));
  const int cores = num_threads > 0 ? num_threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int cpu_threads = on_cpu > 1 ? std::max(1, cores / static_cast<int>(on_cpu)) : num_threads;
  for (const at::Device& device : devices) {
    c10::OptionalDeviceGuard on_device;  // what the engine makes at load lands on its GPU, not the current one
    if (device.is_cuda()) on_device.reset_device(device);
    Replica r;
    r.device = device;
    r.engine = std::make_unique<model::Engine>(model::load_model(model_dir, dtype, device), tokenizer, engine);
    r.queue = std::make_unique<BatchQueue>(*r.engine, batch_wait, device.is_cpu() ? cpu_threads : num_threads,
                                           max_sequences_in_flight);
    replicas_.push_back(std::move(r));
  }
  if (replicas_.size() > 1) {
    std::string where;
    for (const at::Device& d : devices) where += (where.empty() ? "" : ", ") + d.str();
    spdlog::info("{} replicas of the model, on {}", replicas_.size(), where);
  }
}

Replicas::~Replicas() {
  shut_down();
  for (Replica& r : replicas_) r.queue.reset();  // joins each engine thread before its engine goes
}

namespace {

// The part of `job` from request `begin` to `end`: the job with its other requests left out.
GenerationJob part_of(const GenerationJob& job, size_t begin, size_t end) {
  GenerationJob part = job;
  part.requests.assign(job.requests.begin() + static_cast<std::ptrdiff_t>(begin),
                       job.requests.begin() + static_cast<std::ptrdiff_t>(end));
  return part;
}

constexpr auto kCheckEvery = std::chrono::milliseconds(100);

}  // namespace

std::vector<model::Completion> Replicas::run(const GenerationJob& job, const std::function<bool()>& client_alive) {
  const auto runs = split_requests(job.requests.size(), replicas_.size());
  const size_t first = next_.fetch_add(1) % replicas_.size();
  auto count = [this](bool served) {
    std::lock_guard<std::mutex> lock(mutex_);
    (served ? calls_.jobs : calls_.cancelled) += 1;
  };
  auto counted = [&](auto&& produce) {
    try {
      auto out = produce();
      count(true);
      return out;
    } catch (const CallCancelled&) {
      count(false);
      throw;
    }
  };
  if (runs.size() == 1) return counted([&] { return replicas_[first].queue->run(job, client_alive); });

  // Parts wait on threads of their own; this thread asks whether the client
  // is still there (client_alive reads this thread's connection) and tells
  // them, and so does a part that failed: the call fails, the others stop
  // spending on it.
  std::atomic<bool> dropped{false};
  auto alive = [&dropped] { return !dropped.load(); };
  std::vector<GenerationJob> parts;
  for (const auto& [begin, end] : runs) parts.push_back(part_of(job, begin, end));
  std::vector<std::future<std::vector<model::Completion>>> futures;
  // Set on every way out, before the futures' destructors wait for their parts.
  struct DropOnExit {
    std::atomic<bool>& flag;
    ~DropOnExit() { flag = true; }
  } drop_on_exit{dropped};
  for (size_t i = 0; i < parts.size(); ++i) {
    BatchQueue& queue = *replicas_[(first + i) % replicas_.size()].queue;
    futures.push_back(std::async(std::launch::async, [&queue, &parts, &alive, i] { return queue.run(parts[i], alive); }));
  }
  return counted([&] {
    std::vector<std::vector<model::Completion>> results(futures.size());
    std::vector<bool> done(futures.size(), false);
    std::exception_ptr failure, cancelled;
    for (size_t left = futures.size(); left > 0;) {
      const auto waiting = std::find(done.begin(), done.end(), false) - done.begin();
      futures[static_cast<size_t>(waiting)].wait_for(kCheckEvery);
      for (size_t i = 0; i < futures.size(); ++i) {
        if (done[i] || futures[i].wait_for(std::chrono::seconds(0)) != std::future_status::ready) continue;
        done[i] = true;
        --left;
        try {
          results[i] = futures[i].get();
        } catch (const CallCancelled&) {
          if (!cancelled) cancelled = std::current_exception();
        } catch (...) {
          if (!failure) failure = std::current_exception();
          dropped = true;
        }
      }
      if (left > 0 && !dropped && !client_alive()) dropped = true;
    }
    if (failure) std::rethrow_exception(failure);
    if (cancelled) std::rethrow_exception(cancelled);
    std::vector<model::Completion> out;
    for (size_t i = 0; i < results.size(); ++i)
      for (model::Completion& c : results[i]) {
        c.request += runs[i].first;
        out.push_back(std::move(c));
      }
    return out;
  });
}

void Replicas::exclusive(const std::function<void(model::Engine&)>& fn) {
  // Every replica held (always in the same order), so none generates while
  // the weights change under it. A call whose parts straddle an update may
  // decode some parts before it and some after, as calls on several servers
  // would; trainers push weights between generations, never during one.
  std::function<void(size_t)> hold = [&](size_t i) {
    if (i == replicas_.size()) {
      for (Replica& r : replicas_) fn(*r.engine);
      return;
    }
    replicas_[i].queue->exclusive([&](model::Engine&) { hold(i + 1); });
  };
  hold(0);
}

BatchStats Replicas::stats() const {
  BatchStats total;
  for (const Replica& r : replicas_) {
    const BatchStats s = r.queue->stats();
    total.engine_calls += s.engine_calls;
    total.sequences += s.sequences;
    total.sequences_in_flight += s.sequences_in_flight;
    total.calls_waiting += s.calls_waiting;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  total.jobs = calls_.jobs;
  total.cancelled = calls_.cancelled;
  return total;
}

std::vector<ReplicaStats> Replicas::each() const {
  std::vector<ReplicaStats> out;
  for (const Replica& r : replicas_) out.push_back({r.device, r.queue->stats()});
  return out;
}

void Replicas::shut_down() {
  for (Replica& r : replicas_)
    if (r.queue) r.queue->shut_down();
}

}  // namespace grpo::rollout
