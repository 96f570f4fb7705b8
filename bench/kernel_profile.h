// What one call runs, kernel by kernel, through LibTorch's profiler (Kineto,
// CUPTI on a GPU): where a decoding step's time goes when a figure misses its
// roofline, in the same run as the figure.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace grpo::bench {

// Runs `setup` (say, building and warming an engine: CUDA graphs captured
// before the profiler starts may not show their kernels, so they are
// captured inside it) and then `call` under the profiler, and prints what
// `call` ran per step (`steps` of them, e.g. the tokens decoded): on a GPU
// the kernels and copies with their device time, how busy the device was
// and the host's launches; on the CPU the at:: ops (their times include the
// ops they call). `title` heads the table.
void print_kernel_profile(const std::string& title, bool cuda, int64_t steps, const std::function<void()>& setup,
                          const std::function<void()>& call);

}  // namespace grpo::bench
