#include "rollout/weight_receiver.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <optional>

namespace grpo::rollout {

namespace {

// "'model.norm.weight'" or "bucket of 12 tensors ('model.embed_tokens.weight' .. 'lm_head.weight')".
std::string describe(const std::vector<TensorSpec>& specs) {
  if (specs.size() == 1 && !specs[0].name.empty()) return fmt::format("'{}'", specs[0].name);
  return fmt::format("bucket of {} tensors ('{}' .. '{}')", specs.size(), specs.front().name, specs.back().name);
}

}  // namespace

WeightReceiver::WeightReceiver(ApplyWeights apply, std::chrono::milliseconds timeout, std::string listen_host,
                               at::Device device)
    : apply_(std::move(apply)), timeout_(timeout), listen_host_(std::move(listen_host)), device_(device),
      thread_([this] { loop(); }) {}

WeightReceiver::~WeightReceiver() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void WeightReceiver::enqueue(std::function<void()> work) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(work));
  }
  changed_.notify_all();
}

void WeightReceiver::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    changed_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (stopping_) break;
    auto work = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    std::optional<std::string> failure;
    try {
      work();
    } catch (const std::exception& e) {
      failure = e.what();
      spdlog::error("{}", e.what());
    }
    lock.lock();
    busy_ = false;
    if (failure && !error_) error_ = failure;
    changed_.notify_all();
  }
  if (group_) group_->abandon();  // the server is going: no clean teardown that waits for the trainer
  group_.reset();
}

void WeightReceiver::wait_idle() {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [this] { return stopping_ || (queue_.empty() && !busy_); });
  if (error_) {
    std::string message = std::move(*error_);
    error_.reset();
    throw TransferError(message);
  }
}

void WeightReceiver::init(const std::string& host, int port, int world_size, int rank, Backend backend) {
  uint64_t call = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    init_queued_ = true;
    init_failure_.clear();
    call = ++newest_init_;
  }
  enqueue([this, host, port, world_size, rank, backend, call] {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (call != newest_init_) {  // a newer call came while this one waited: it would only wait out its timeout
        spdlog::warn("weight transfer: the group at {}:{} is not formed: a newer /init_communicator/ replaced it",
                     host, port);
        return;
      }
    }
    // A group still open here was never closed by its trainer (POST /close_communicator/): that trainer
    // is gone, and a clean teardown would wait for it for ever.
    if (group_) group_->abandon();
    group_.reset();
    connected_ = false;
    spdlog::info("weight transfer: {} the group at {}:{} as rank {} of {}, over {}", rank == 0 ? "hosting" : "joining",
                 host, port, rank, world_size, backend_name(backend));
    try {
      group_ = CommGroup::create(host, port, rank, world_size, timeout_, listen_host_, backend, device_);
    } catch (const TransferError& e) {
      // Logged here and named by the next update; calls that do not need the group are not failed by it.
      spdlog::error("init_communicator: {}", e.what());
      std::lock_guard<std::mutex> lock(mutex_);
      if (call == newest_init_) {
        init_queued_ = false;
        init_failure_ = fmt::format("the last POST /init_communicator/ ({}:{}) failed: init_communicator: {}", host,
                                    port, e.what());
      }
      return;
    }
    connected_ = true;
    spdlog::info("weight transfer: the trainer joined");
  });
}

void WeightReceiver::update(std::vector<TensorSpec> specs, bool as_bucket) {
  wait_idle();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!init_queued_)
      throw TransferError(fmt::format("update {}: no communicator is open; {}", describe(specs),
                                      init_failure_.empty() ? "POST /init_communicator/ first" : init_failure_));
  }
  enqueue([this, as_bucket, specs = std::move(specs)] {
    const std::string what = describe(specs);
    try {
      if (!group_) {  // queued behind a group that then did not form, or was replaced
        std::lock_guard<std::mutex> lock(mutex_);
        throw TransferError(init_failure_.empty() ? std::string("no communicator is open") : init_failure_);
      }
      at::Tensor received;
      std::optional<BroadcastSizeError> mismatch;
      try {
        received = group_->receive(as_bucket ? bucket_bytes(specs) : specs[0].nbytes(), what);
      } catch (const BroadcastSizeError& e) {
        mismatch = e;  // the trainer still waits at the barrier: meet it, then fail
      }
      group_->barrier(what);
      if (mismatch) throw *mismatch;
      const std::vector<at::Tensor> tensors =
          as_bucket ? unpack_bucket(received, specs) : std::vector{received.view(specs[0].dtype).view(specs[0].shape)};
      apply_(specs, tensors);
      tensors_received_ += specs.size();
    } catch (const TransferError& e) {
      throw TransferError(fmt::format("update_named_param {}: {}", what, e.what()));
    }
  });
}

void WeightReceiver::close() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    init_queued_ = false;
  }
  enqueue([this] {
    group_.reset();
    connected_ = false;
  });
}

}  // namespace grpo::rollout
