// Data parallel sampling: each rank samples and scores its share of a
// generation batch, then every rank gathers the whole batch, so advantages,
// dynamic_sample's choice and the completion log see whole groups even when
// a group spans ranks (as TRL gathers rewards before its advantages).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "trainer/generation_batch.h"

namespace grpo::trainer {

// Rank `rank`'s completions of a batch of `n`: [begin, end), contiguous,
// the shares of all ranks covering [0, n) in rank order, sizes differing by
// at most one.
struct Share {
  size_t begin = 0, end = 0;
};
Share share_of(size_t n, int rank, int world);

// One rank's scored share as bytes: every sample field and its reward row.
// A sample's prompt travels as its index in `prompts`, the generation call's
// prompts, which every rank holds alike.
std::string pack_share(const GenerationBatch& share, const std::vector<const Prompt*>& prompts);
// The shares of every rank, in rank order, as one batch.
GenerationBatch unpack_shares(const std::vector<std::string>& shares, const std::vector<const Prompt*>& prompts);

}  // namespace grpo::trainer
