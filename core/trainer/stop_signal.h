// SIGINT / SIGTERM during training. The handler only sets a flag: the loop
// finishes its step and saves. Calls that can stall for minutes (a sampler
// plugin, a rollout server) run through run_interruptible(), which stops
// waiting for them a few seconds after the flag is set, so a scheduler's
// SIGTERM is answered within seconds and never turns into its kill -9.
#pragma once

#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include "model/side_stream.h"

namespace grpo::trainer {

// Thrown when a stop was requested while `what` was still running. That call
// goes on in a thread of its own, inside a plugin: the program must not
// destroy the plugin under it, and exits once it has saved (see train()).
class StopRequested : public std::runtime_error {
 public:
  explicit StopRequested(const std::string& what) : std::runtime_error(what) {}
};

// Installs the handlers for its lifetime; restores the previous ones after.
class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

 private:
  void (*previous_int_)(int);
  void (*previous_term_)(int);
};

bool stop_requested();

// How long a call may still run after a stop is requested before it is
// given up. Calls that finish within it end their step normally, so every
// rank of a data parallel run still stops after the same step.
inline constexpr std::chrono::seconds kStopGrace{3};

// fn() on a thread of its own; its result, or StopRequested(what) once a stop
// has been requested and fn() has not returned kStopGrace later. Exceptions
// of fn() reach the caller. `device` is the one fn() computes on: on a GPU,
// fn()'s kernels queue on the caller's current stream there, as if the caller
// ran it (no default: a caller that forgot it would queue on the default stream).
template <class T>
T run_interruptible(std::function<T()> fn, const std::string& what, at::Device device) {
  auto result = std::make_shared<std::promise<T>>();
  std::future<T> done = result->get_future();
  std::thread([result, fn = std::move(fn), context = model::current_stream_context(device)] {
    const model::StreamContextScope on(context);
    try {
      result->set_value(fn());
    } catch (...) {
      result->set_exception(std::current_exception());
    }
  }).detach();
  while (!stop_requested())
    if (done.wait_for(std::chrono::milliseconds(50)) == std::future_status::ready) return done.get();
  if (done.wait_for(kStopGrace) != std::future_status::ready) throw StopRequested(what);
  return done.get();
}

}  // namespace grpo::trainer
