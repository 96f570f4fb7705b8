// Runs a CUDA kernel's own source on the host, for the CPU's tests of a
// kernel that only a GPU can run otherwise: each block of the grid in turn
// (in a shuffled order), its threads as std::threads that meet at
// __syncthreads and exchange warp shuffles through their warp's slots. What
// it checks is the kernel's indexing, its barriers and its arithmetic; not
// the GPU's memory model or its speed (the GPU's tests do that).
//
// Include this after every other header but the kernel's: its macros stay
// defined to the end of the file, and it renames kernel_build.h's namespace,
// so the emulated copy never links in place of the CUDA build's. The kernel
// may use threadIdx, blockIdx, blockDim, gridDim, __syncthreads, the warp's
// __shfl_xor_sync, __shfl_up_sync, __shfl_sync and __ballot_sync (every lane
// of the warp taking part, with the full mask), __clz, __ffs, atomicInc,
// __threadfence, __ldcg, rsqrtf (as 1 / sqrtf: the device's is within 2 ulp
// of it), function-local __shared__ variables and GRPO_DYNAMIC_SHARED for
// its dynamic shared memory (NaN until written).
// Function-local __shared__ variables become statics that the blocks, run one
// at a time, share: a block that read one before writing it would see the
// last block's value rather than garbage.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <mutex>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

namespace grpo::testing::cuda_emulation {

struct Index {
  unsigned int x = 0, y = 0, z = 0;
};

// Threads that wait for each other; a wait that lasts 30 s means the kernel
// left some thread out of a barrier: abort with a message rather than hang.
class Barrier {
 public:
  explicit Barrier(int count) : count_(count) {}
  void wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    const uint64_t generation = generation_;
    if (++waiting_ == count_) {
      waiting_ = 0;
      ++generation_;
      changed_.notify_all();
      return;
    }
    if (!changed_.wait_for(lock, std::chrono::seconds(30), [&] { return generation != generation_; })) {
      std::fprintf(stderr, "cuda emulation: a barrier of %d threads waited 30 s with %d there\n", count_, waiting_);
      std::abort();
    }
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  const int count_;
  int waiting_ = 0;
  uint64_t generation_ = 0;
};

struct Block {
  Index index, dim, grid;
  std::vector<float> shared;  // dynamic shared memory, NaN until written
  Barrier all;
  std::vector<std::unique_ptr<Barrier>> warp_barriers;
  std::vector<double> warp_slots;  // a float or a predicate per lane
  Block(Index i, Index d, Index g, size_t shared_floats, int threads)
      : index(i), dim(d), grid(g), shared(shared_floats, std::numeric_limits<float>::quiet_NaN()), all(threads),
        warp_slots(static_cast<size_t>(threads)) {
    for (int w = 0; w < threads / 32; ++w) warp_barriers.push_back(std::make_unique<Barrier>(32));
  }
};

inline thread_local Block* t_block = nullptr;
inline thread_local Index t_thread;
inline std::mutex g_atomics;

inline const Index& thread_index() { return t_thread; }
inline const Index& block_index() { return t_block->index; }
inline float* dynamic_shared() { return t_block->shared.data(); }
inline void sync_threads() { t_block->all.wait(); }

inline const Index& block_dim() { return t_block->dim; }
inline const Index& grid_dim() { return t_block->grid; }

// Every lane of the warp puts v in its slot, then each calls read(slots of
// the warp, its lane) once all are there.
template <class Read>
auto exchange(double v, Read read) {
  const unsigned int lane = t_thread.x % 32, base = t_thread.x - lane;
  Barrier& warp = *t_block->warp_barriers[t_thread.x / 32];
  t_block->warp_slots[base + lane] = v;
  warp.wait();
  const auto got = read(t_block->warp_slots.data() + base, lane);
  warp.wait();  // no lane writes its next value before every lane has read
  return got;
}

inline float shfl_xor(float v, int offset) {
  return exchange(v, [&](const double* slots, unsigned int lane) {
    return static_cast<float>(slots[lane ^ static_cast<unsigned int>(offset)]);
  });
}

inline float shfl_up(float v, int offset) {
  return exchange(v, [&](const double* slots, unsigned int lane) {
    return static_cast<float>(lane >= static_cast<unsigned int>(offset) ? slots[lane - offset] : slots[lane]);
  });
}

inline float shfl(float v, int source) {
  return exchange(v, [&](const double* slots, unsigned int) { return static_cast<float>(slots[source % 32]); });
}

inline unsigned int ballot(bool predicate) {
  return exchange(predicate ? 1.0 : 0.0, [](const double* slots, unsigned int) {
    unsigned int bits = 0;
    for (unsigned int l = 0; l < 32; ++l)
      if (slots[l] != 0.0) bits |= 1u << l;
    return bits;
  });
}

inline unsigned int atomic_inc(unsigned int* at, unsigned int limit) {
  const std::lock_guard<std::mutex> lock(g_atomics);
  const unsigned int old = *at;
  *at = old >= limit ? 0 : old + 1;
  return old;
}

// kernel(args...) over `grid` blocks of `threads` threads (a multiple of 32),
// with `shared_bytes` of dynamic shared memory; blocks one at a time in an
// order drawn from `seed`.
template <class Kernel, class... Args>
void launch(Index grid, int threads, size_t shared_bytes, uint32_t seed, Kernel kernel, Args... args) {
  std::vector<Index> blocks;
  for (unsigned int z = 0; z < grid.z; ++z)
    for (unsigned int y = 0; y < grid.y; ++y)
      for (unsigned int x = 0; x < grid.x; ++x) blocks.push_back({x, y, z});
  std::shuffle(blocks.begin(), blocks.end(), std::mt19937(seed));
  for (const Index& at : blocks) {
    Block block(at, {static_cast<unsigned int>(threads), 1, 1}, grid, shared_bytes / sizeof(float), threads);
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        t_block = &block;
        t_thread = {static_cast<unsigned int>(t), 0, 0};
        kernel(args...);
      });
    for (std::thread& th : pool) th.join();
  }
}

}  // namespace grpo::testing::cuda_emulation

#undef GRPO_KERNEL_BUILD
#define GRPO_KERNEL_BUILD host_emulation
#define __global__
#define __device__
#define __launch_bounds__(n)
#define __shared__ static
#define threadIdx (::grpo::testing::cuda_emulation::thread_index())
#define blockIdx (::grpo::testing::cuda_emulation::block_index())
#define blockDim (::grpo::testing::cuda_emulation::block_dim())
#define gridDim (::grpo::testing::cuda_emulation::grid_dim())
#define __syncthreads() ::grpo::testing::cuda_emulation::sync_threads()
#define __shfl_xor_sync(mask, v, offset) ::grpo::testing::cuda_emulation::shfl_xor((v), (offset))
#define __shfl_up_sync(mask, v, offset) ::grpo::testing::cuda_emulation::shfl_up((v), (offset))
#define __shfl_sync(mask, v, source) ::grpo::testing::cuda_emulation::shfl((v), (source))
#define __ballot_sync(mask, predicate) ::grpo::testing::cuda_emulation::ballot(predicate)
#define __clz(x) ((x) == 0 ? 32 : __builtin_clz(x))
#define __ffs(x) __builtin_ffs(static_cast<int>(x))
#define atomicInc(at, limit) ::grpo::testing::cuda_emulation::atomic_inc((at), (limit))
#define __threadfence() std::atomic_thread_fence(std::memory_order_seq_cst)
#define __ldcg(at) (*(at))
#define rsqrtf(x) (1.0f / std::sqrt(static_cast<float>(x)))
#define GRPO_DYNAMIC_SHARED(name) float* name = ::grpo::testing::cuda_emulation::dynamic_shared()
