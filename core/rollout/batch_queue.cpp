#include "rollout/batch_queue.h"

#include <spdlog/spdlog.h>

#include <c10/util/Exception.h>

#include <algorithm>
#include <stdexcept>

#include "model/threads.h"

namespace grpo::rollout {

namespace {

bool same_params(const model::SamplingParams& a, const model::SamplingParams& b) {
  return a.temperature == b.temperature && a.top_p == b.top_p && a.top_k == b.top_k && a.min_p == b.min_p &&
         a.repetition_penalty == b.repetition_penalty && a.max_new_tokens == b.max_new_tokens &&
         a.top_logprobs == b.top_logprobs && a.stop_strings == b.stop_strings;
}

// The first line of what the engine threw: LibTorch's errors carry a C++
// backtrace after it, which is no answer for a client.
std::string first_line(const std::exception& e) {
  const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
  std::string text = c10_error ? c10_error->what_without_backtrace() : e.what();
  const size_t end = text.find('\n');
  return end == std::string::npos ? text : text.substr(0, end);
}

constexpr auto kCheckEvery = std::chrono::milliseconds(100);

}  // namespace

int64_t sequences_of(const GenerationJob& job) {
  int64_t total = 0;
  for (const auto& r : job.requests) total += r.n;
  return total;
}

BatchQueue::BatchQueue(model::Engine& engine, std::chrono::microseconds batch_wait, int num_threads,
                       int64_t max_sequences_in_flight)
    : engine_(engine),
      batch_wait_(batch_wait),
      num_threads_(num_threads),
      max_in_flight_(max_sequences_in_flight),
      thread_([this] { loop(); }) {}

BatchQueue::~BatchQueue() { stop(); }

CallCancelled BatchQueue::cancelled_error() const {
  if (shutting_down_)
    return CallCancelled(true, "server shutting down: this call was cancelled before it finished; retry it once the "
                               "server is back");
  return CallCancelled(false, "the client went away: the call was dropped");
}

void BatchQueue::shut_down() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    shutting_down_ = true;
    // Waiting jobs are answered here; running ones leave the engine's batch at its next step.
    for (Pending* p : pending_) {
      p->cancelled = true;
      p->done.set_exception(std::make_exception_ptr(cancelled_error()));
    }
    stats_.cancelled += pending_.size();
    pending_.clear();
    for (Pending* p : running_) p->cancelled = true;
  }
  wake_.notify_all();
}

void BatchQueue::stop() {
  shut_down();
  if (thread_.joinable()) thread_.join();
}

std::vector<model::Completion> BatchQueue::run(const GenerationJob& job, const std::function<bool()>& client_alive) {
  Pending p;
  p.sequences = sequences_of(job);
  // Each request points at the job's flag, so the engine sees a cancel between two decode steps.
  GenerationJob own = job;
  for (auto& r : own.requests) r.cancelled = &p.cancelled;
  p.job = &own;
  auto result = p.done.get_future();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) throw cancelled_error();
    pending_.push_back(&p);
  }
  wake_.notify_one();
  while (result.wait_for(kCheckEvery) != std::future_status::ready) {
    if (!shutting_down_ && client_alive()) continue;
    p.cancelled = true;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = std::find(pending_.begin(), pending_.end(), &p);
      if (it != pending_.end()) {  // still waiting: nobody else holds it
        pending_.erase(it);
        stats_.cancelled += 1;
        throw cancelled_error();
      }
    }
    break;  // taken by the engine thread (or answered by shut_down): it sets the result soon
  }
  return result.get();
}

void BatchQueue::exclusive(const std::function<void(model::Engine&)>& fn) {
  std::lock_guard<std::mutex> lock(model_mutex_);
  fn(engine_);
}

BatchStats BatchQueue::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  BatchStats s = stats_;
  s.calls_waiting = static_cast<int64_t>(pending_.size());
  return s;
}

void BatchQueue::loop() {
  model::configure_cpu_threads(num_threads_);
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return stopping_ || !pending_.empty(); });
    if (stopping_) break;
    if (batch_wait_.count() > 0) {  // let calls that arrive together join this batch
      lock.unlock();
      std::this_thread::sleep_for(batch_wait_);
      lock.lock();
      if (stopping_) break;
      if (pending_.empty()) continue;  // their callers gave up meanwhile
    }
    // Calls in arrival order while their sequences fit under the in-flight
    // limit; the first always goes (a call never exceeds the limit, which the
    // per-call limit ensures), and a large call is never passed by smaller ones.
    std::vector<Pending*> taken;
    int64_t admitted = 0;
    size_t count = 0;
    for (; count < pending_.size(); ++count) {
      if (!taken.empty() && admitted + pending_[count]->sequences > max_in_flight_) break;
      admitted += pending_[count]->sequences;
      taken.push_back(pending_[count]);
    }
    pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(count));
    running_ = taken;
    stats_.sequences_in_flight = admitted;
    lock.unlock();
    // Jobs with equal sampling parameters share one engine call, in arrival order.
    while (!taken.empty()) {
      std::vector<Pending*> group, rest;
      for (Pending* p : taken)
        (group.empty() || same_params(group[0]->job->params, p->job->params) ? group : rest).push_back(p);
      run_group(group);
      taken.swap(rest);
    }
    lock.lock();
    stats_.sequences_in_flight = 0;
  }
  for (Pending* p : pending_) p->done.set_exception(std::make_exception_ptr(cancelled_error()));
  stats_.cancelled += pending_.size();
  pending_.clear();
}

void BatchQueue::run_group(std::vector<Pending*>& group) {
  std::vector<model::GenerateRequest> requests;
  std::vector<size_t> first_request;  // group member -> index of its first request in `requests`
  int64_t batch_sequences = 0;
  for (Pending* p : group) {
    first_request.push_back(requests.size());
    requests.insert(requests.end(), p->job->requests.begin(), p->job->requests.end());
    batch_sequences += p->sequences;
  }
  // Each member's promise is set after it leaves running_, so shut_down never
  // touches a job whose caller has returned.
  auto finish = [&](const std::function<void(size_t)>& answer) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (Pending* p : group) running_.erase(std::find(running_.begin(), running_.end(), p));
    }
    for (size_t i = 0; i < group.size(); ++i) answer(i);
  };
  std::vector<model::Completion> completions;
  try {
    std::lock_guard<std::mutex> model_lock(model_mutex_);
    completions = engine_.generate(requests, group[0]->job->params);
  } catch (const std::exception& e) {
    const std::string cause = first_line(e);
    spdlog::error("engine batch of {} sequences from {} call(s) failed: {}", batch_sequences, group.size(), cause);
    const auto error = std::make_exception_ptr(EngineFailure(cause, batch_sequences, group.size()));
    finish([&](size_t i) { group[i]->done.set_exception(error); });
    return;
  } catch (...) {
    spdlog::error("engine batch of {} sequences from {} call(s) failed", batch_sequences, group.size());
    const auto error = std::make_exception_ptr(EngineFailure("an unknown error", batch_sequences, group.size()));
    finish([&](size_t i) { group[i]->done.set_exception(error); });
    return;
  }
  // Completions come in request order, so each member's are one contiguous run.
  std::vector<std::vector<model::Completion>> split(group.size());
  size_t member = 0;
  for (auto& c : completions) {
    while (member + 1 < group.size() && c.request >= first_request[member + 1]) ++member;
    c.request -= first_request[member];
    split[member].push_back(std::move(c));
  }
  std::vector<bool> dropped(group.size());
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.engine_calls += 1;
    for (size_t i = 0; i < group.size(); ++i) {
      dropped[i] = group[i]->cancelled;  // its completions stopped early: no answer
      (dropped[i] ? stats_.cancelled : stats_.jobs) += 1;
      if (!dropped[i]) stats_.sequences += split[i].size();
    }
  }
  finish([&](size_t i) {
    if (dropped[i]) group[i]->done.set_exception(std::make_exception_ptr(cancelled_error()));
    else group[i]->done.set_value(std::move(split[i]));
  });
}

}  // namespace grpo::rollout
