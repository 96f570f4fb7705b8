#include "model/cpu_sampling.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "model/cpu_float_math.h"

namespace grpo::model::cpu {

namespace {

using detail::load;

// Per thread and reused from token to token: a row of scaled logits, a
// scratch copy for the top-k selection, and the row's block sums.
thread_local std::vector<float> t_row, t_scratch;
thread_local std::vector<double> t_blocks;

// Scaled logits into row, and their maximum.
template <class T>
GRPO_VECTOR_CLONES float load_scaled(const T* x, float* row, int64_t V, float temperature) {
  load(x, row, V);
  float m = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : m)
  for (int64_t i = 0; i < V; ++i) {
    row[i] = row[i] / temperature;
    m = std::max(m, row[i]);
  }
  return m;
}

constexpr int64_t kBlock = 4096;  // float sums within a block, double across blocks

// row[i] <- exp(row[i] - m) where row[i] >= floor, else 0. Returns the sum of
// exp(row[i] - m) over all i (the untruncated softmax's normaliser); blocks[j]
// gets the sum of what block j kept.
GRPO_VECTOR_CLONES double exponentiate(float* row, int64_t V, float m, float floor, std::vector<double>& blocks) {
  blocks.clear();
  double total = 0;
  for (int64_t b = 0; b < V; b += kBlock) {
    const int64_t end = std::min(V, b + kBlock);
    float all = 0, kept = 0;
#pragma omp simd reduction(+ : all, kept)
    for (int64_t i = b; i < end; ++i) {
      const float e = detail::exp(row[i] - m);
      const float k = row[i] >= floor ? e : 0.0f;
      all += e;
      kept += k;
      row[i] = k;
    }
    total += all;
    blocks.push_back(kept);
  }
  return total;
}

// The first index whose running sum of p exceeds u times the kept total,
// skipping whole blocks by their sums; the last nonzero entry when rounding
// leaves the target at or past the total.
int64_t search(const float* p, int64_t V, const std::vector<double>& blocks, float u) {
  double kept = 0;
  for (double s : blocks) kept += s;
  const double target = static_cast<double>(u) * kept;
  double running = 0;
  for (size_t j = 0; j < blocks.size(); ++j) {
    if (running + blocks[j] <= target) {
      running += blocks[j];
      continue;
    }
    const int64_t begin = static_cast<int64_t>(j) * kBlock, end = std::min(V, begin + kBlock);
    for (int64_t i = begin; i < end; ++i) {
      running += p[i];
      if (p[i] != 0.0f && running > target) return i;
    }
  }
  for (int64_t i = V - 1; i > 0; --i)
    if (p[i] != 0.0f) return i;
  return 0;
}

template <class T>
void sample_row(const T* x, int64_t V, float temperature, int64_t top_k, float u, int64_t* token, float* logprob) {
  t_row.resize(static_cast<size_t>(V));
  float* row = t_row.data();
  const float m = load_scaled(x, row, V, temperature);
  float floor = -std::numeric_limits<float>::infinity();
  if (top_k > 0 && top_k < V) {
    t_scratch.assign(row, row + V);
    std::nth_element(t_scratch.begin(), t_scratch.begin() + (top_k - 1), t_scratch.end(), std::greater<float>());
    floor = t_scratch[static_cast<size_t>(top_k - 1)];
  }
  const double all = exponentiate(row, V, m, floor, t_blocks);
  const int64_t t = search(row, V, t_blocks, u);
  *token = t;
  *logprob = static_cast<float>((static_cast<double>(static_cast<float>(x[t]) / temperature) - m) - std::log(all));
}

}  // namespace

void sample_rows(const at::Tensor& logits, double temperature, int64_t top_k, const std::vector<float>& u,
                 int64_t* tokens, float* logprobs) {
  TORCH_CHECK(logits.dim() == 2 && logits.device().is_cpu(), "sample_rows: logits must be [B, V] on the CPU");
  const at::Tensor x = logits.contiguous();
  const int64_t B = x.size(0), V = x.size(1);
  TORCH_CHECK(static_cast<int64_t>(u.size()) == B, "sample_rows: one uniform draw per row");
  detail::dispatch(x.scalar_type(), "sample_rows", [&](auto tag) {
    using T = decltype(tag);
    const T* data = x.data_ptr<T>();
    at::parallel_for(0, B, 1, [&](int64_t begin, int64_t end) {
      for (int64_t b = begin; b < end; ++b)
        sample_row(data + b * V, V, static_cast<float>(temperature), top_k, u[static_cast<size_t>(b)], tokens + b,
                   logprobs + b);
    });
  });
}

}  // namespace grpo::model::cpu
