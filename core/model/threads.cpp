#include "model/threads.h"

#include <dlfcn.h>

#include <thread>

#include <ATen/Parallel.h>

namespace grpo::model {

int configure_cpu_threads(int n) {
  if (n <= 0) n = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  at::set_num_threads(n);
  // libblas.so.3 may be OpenBLAS (Debian alternatives) or not: look the
  // setter up instead of linking it.
  using SetThreads = void (*)(int);
  if (auto set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) set(1);
  return n;
}

}  // namespace grpo::model
