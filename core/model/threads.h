// CPU threads and memory for LibTorch work.
#pragma once

namespace grpo::model {

// Torch intra-op threads = n (<= 0: the number of cores), and OpenBLAS kept
// single-threaded: measured here, letting both OpenMP and OpenBLAS spawn
// threads made batch-1 layers 3-8x slower. Also keeps large allocations in
// malloc's heap (see threads.cpp). Returns the thread count used.
int configure_cpu_threads(int n);

}  // namespace grpo::model
