#include "trainer/stop_signal.h"

#include <atomic>
#include <csignal>

namespace grpo::trainer {

namespace {

std::atomic<bool> g_stop_requested{false};
extern "C" void request_stop(int) { g_stop_requested = true; }

}  // namespace

StopSignals::StopSignals()
    : previous_int_(std::signal(SIGINT, request_stop)), previous_term_(std::signal(SIGTERM, request_stop)) {}

StopSignals::~StopSignals() {
  std::signal(SIGINT, previous_int_);
  std::signal(SIGTERM, previous_term_);
}

bool stop_requested() { return g_stop_requested; }

}  // namespace grpo::trainer
