// accuracy: ms-swift's MathAccuracy (Math-Verify semantics) — 1.0 when the
// completion's anchored answer (\boxed{} first) is mathematically equal to the
// row's `solution`, 0.0 otherwise or when the solution does not parse.
#include <grpo/sdk.hpp>

#include "accuracy_score.h"

struct Accuracy : grpo::RewardBase {
  static constexpr const char* name = "accuracy";
  static constexpr const char* version = "1.0.0";
  static constexpr const char* description =
      "1.0 if the completion's \\boxed{} / anchored answer equals column 'solution' (Math-Verify semantics)";
  // Extraction and plain-number comparisons run in parallel; the engine
  // serialises the computer-algebra part itself.
  static constexpr bool thread_safe = true;

  Accuracy(const grpo::Options&, const grpo::Host& h) : host(h) {}

  void score(const grpo::RewardBatch& batch, double* rewards) const {
    for (size_t i = 0; i < batch.size(); ++i) rewards[i] = grpo::rewards::accuracy_of(batch[i], host, name);
  }

  grpo::Host host;
};

GRPO_EXPORT_REWARD(Accuracy)
