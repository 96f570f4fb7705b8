// Wall-clock seconds from a monotonic clock, for the timings runs log.
#pragma once

#include <chrono>

namespace grpo::util {

inline double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace grpo::util
