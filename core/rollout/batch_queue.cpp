#include "rollout/batch_queue.h"

#include <spdlog/spdlog.h>

#include <stdexcept>

#include "model/threads.h"

namespace grpo::rollout {

namespace {

bool same_params(const model::SamplingParams& a, const model::SamplingParams& b) {
  return a.temperature == b.temperature && a.top_p == b.top_p && a.top_k == b.top_k && a.min_p == b.min_p &&
         a.repetition_penalty == b.repetition_penalty && a.max_new_tokens == b.max_new_tokens &&
         a.top_logprobs == b.top_logprobs && a.stop_strings == b.stop_strings;
}

}  // namespace

BatchQueue::BatchQueue(model::Engine& engine, std::chrono::microseconds batch_wait, int num_threads)
    : engine_(engine), batch_wait_(batch_wait), num_threads_(num_threads), thread_([this] { loop(); }) {}

BatchQueue::~BatchQueue() { stop(); }

void BatchQueue::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::vector<model::Completion> BatchQueue::run(const GenerationJob& job) {
  Pending p{&job, {}};
  auto result = p.done.get_future();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) throw std::runtime_error("the server is shutting down");
    pending_.push_back(&p);
  }
  wake_.notify_one();
  return result.get();
}

void BatchQueue::exclusive(const std::function<void(model::Engine&)>& fn) {
  std::lock_guard<std::mutex> lock(model_mutex_);
  fn(engine_);
}

BatchStats BatchQueue::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
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
    }
    std::vector<Pending*> taken;
    taken.swap(pending_);
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
  }
  for (Pending* p : pending_)
    p->done.set_exception(std::make_exception_ptr(std::runtime_error("the server is shutting down")));
  pending_.clear();
}

void BatchQueue::run_group(std::vector<Pending*>& group) {
  std::vector<model::GenerateRequest> requests;
  std::vector<size_t> first_request;  // group member -> index of its first request in `requests`
  for (Pending* p : group) {
    first_request.push_back(requests.size());
    requests.insert(requests.end(), p->job->requests.begin(), p->job->requests.end());
  }
  std::vector<model::Completion> completions;
  try {
    std::lock_guard<std::mutex> model_lock(model_mutex_);
    completions = engine_.generate(requests, group[0]->job->params);
  } catch (...) {
    spdlog::error("engine batch of {} calls failed", group.size());
    for (Pending* p : group) p->done.set_exception(std::current_exception());
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
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.jobs += group.size();
    stats_.engine_calls += 1;
    stats_.sequences += completions.size();
  }
  for (size_t i = 0; i < group.size(); ++i) group[i]->done.set_value(std::move(split[i]));
}

}  // namespace grpo::rollout
