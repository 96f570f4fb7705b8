// Peak memory of the training log-prob pass (forward + backward), chunked
// (what the trainer runs) vs the naive path that materialises [B, T, V]
// logits, at growing vocab x length. Each case runs in a fresh child process
// and reports its own peak RSS above the inputs it set up, so cases do not
// share an allocator's high-water mark.
//   bench_logprob_memory [--hidden 64] [--threads N]
#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <unistd.h>

#include <torch/types.h>

#include "model/logprobs.h"
#include "model/threads.h"

namespace {

double current_rss_mb() {
  std::ifstream statm("/proc/self/statm");
  long pages = 0, resident = 0;
  statm >> pages >> resident;
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) / (1024.0 * 1024.0);
}

double peak_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;
}

// Child: one pass; prints the peak RSS above the inputs in MB.
int run_case(int64_t T, int64_t V, int64_t H, bool chunked) {
  torch::manual_seed(0);
  at::Tensor hidden = torch::randn({1, T, H}).requires_grad_(true);
  at::Tensor weight = (torch::randn({V, H}) * 0.02).requires_grad_(true);
  at::Tensor targets = torch::randint(V, {1, T}, at::kLong);
  weight.mutable_grad() = torch::zeros_like(weight);  // the gradient buffers exist in training anyway
  hidden.mutable_grad() = torch::zeros_like(hidden);
  const double base = current_rss_mb();
  at::Tensor logp;
  if (chunked) {
    logp = grpo::model::chunked_logprobs(hidden, weight, targets, {1.0, 256, false}).logprobs;
  } else {
    at::Tensor logits = torch::matmul(hidden, weight.t());  // [1, T, V]
    logp = torch::log_softmax(logits, -1).gather(-1, targets.unsqueeze(-1)).squeeze(-1);
  }
  logp.sum().backward();
  std::printf("%.1f\n", peak_rss_mb() - base);
  return 0;
}

double measure(const char* self, int64_t T, int64_t V, int64_t H, bool chunked, int threads) {
  const std::string cmd = std::string(self) + " --case " + std::to_string(T) + " " + std::to_string(V) + " " +
                          std::to_string(H) + (chunked ? " chunked" : " naive") + " --threads " +
                          std::to_string(threads);
  FILE* p = popen(cmd.c_str(), "r");
  double mb = -1;
  if (p && std::fscanf(p, "%lf", &mb) != 1) mb = -1;
  if (p) pclose(p);
  return mb;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t H = 64;
  int threads = 2;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc) threads = std::atoi(argv[++i]);
    else if (a == "--hidden" && i + 1 < argc) H = std::atoll(argv[++i]);
  }
  grpo::model::configure_cpu_threads(threads);
  if (argc >= 6 && std::string(argv[1]) == "--case")
    return run_case(std::atoll(argv[2]), std::atoll(argv[3]), std::atoll(argv[4]), std::string(argv[5]) == "chunked");

  char self[4096] = {0};  // the shell that popen starts has its own /proc/self
  if (readlink("/proc/self/exe", self, sizeof self - 1) <= 0) return 1;
  std::printf("log-prob pass (forward + backward) peak memory above its inputs, B=1, H=%lld\n",
              static_cast<long long>(H));
  std::printf("%8s %8s %12s %12s %14s %10s\n", "T", "vocab", "chunked MB", "naive MB", "[T,V] f32 MB", "ratio");
  for (int64_t V : {32768L, 151936L})
    for (int64_t T : {256L, 1024L, 2048L}) {
      const double logits_mb = static_cast<double>(T * V) * 4.0 / (1024.0 * 1024.0);
      const double c = measure(self, T, V, H, true, threads);
      const double n = measure(self, T, V, H, false, threads);
      std::printf("%8lld %8lld %12.1f %12.1f %14.1f %10.3f\n", static_cast<long long>(T), static_cast<long long>(V), c,
                  n, logits_mb, n > 0 ? c / n : 0.0);
    }
  return 0;
}
