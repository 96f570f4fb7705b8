#include "model/threads.h"

#include <dlfcn.h>
#include <malloc.h>

#include <thread>

#include <ATen/Parallel.h>

namespace grpo::model {

int configure_cpu_threads(int n) {
  if (n <= 0) n = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  // libblas.so.3 may be OpenBLAS (Debian alternatives) or not: look the
  // setter up instead of linking it. Before torch's own setting: OpenBLAS's
  // OpenMP build sets the calling thread's OpenMP team size too, and torch's
  // operators on this thread would then run on one core.
  using SetThreads = void (*)(int);
  if (auto set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) set(1);
  at::set_num_threads(n);
  // glibc serves blocks over 32 MB (its ceiling for the mmap threshold) with
  // fresh mmaps and unmaps them on free, so a tensor that size costs a page
  // fault per 4 KB every time: at Qwen2.5-0.5B's shape, a decode step's
  // [64, 151936] logits were a fifth of its time in the kernel. From the heap,
  // freed blocks are reused. The heap is never trimmed (-1): a training step
  // frees its activations at the end of the backward — 2.3 GB at that shape
  // in bfloat16 — and with any finite threshold glibc returned them to the
  // kernel and the next step faulted them in again (580,000 page faults a step).
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, -1);
  return n;
}

}  // namespace grpo::model
