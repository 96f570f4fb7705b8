// Where a server's completion ends for the trainer: the native engine stops
// right after the token that is a stop id or that completes a stop string, and
// keeps that token. A server may run past either (a stop id it was not told
// about, or a server that does not take stop strings), so the sampler cuts
// its answer the same way and reports the same finish reason.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace grpo::tok {
class Tokenizer;
}

namespace grpo::external {

struct Cut {
  size_t length = 0;    // ids kept
  bool stopped = false; // ended on a stop id or a stop string
};

// The first position whose token is a stop id, or whose last tokens decode
// to text holding a stop string (the engine's window of len + 1 tokens).
// `tokenizer` may be null when there are no stop strings.
Cut cut_completion(const std::vector<int32_t>& ids, const std::vector<int32_t>& stop_ids,
                   const std::vector<std::string>& stop_strings, const tok::Tokenizer* tokenizer);

}  // namespace grpo::external
