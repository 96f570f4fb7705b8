// Learns byte-level BPE merges from sample text, for a tokenizer of our own
// (grpo-host init-model --train_tokenizer): a model trained from scratch on a
// narrow task sees its recurring strings (JSON keys, tags, words) as a few
// tokens instead of one per byte, which shortens sequences and the distances
// attention has to bridge.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/pretokenizer.h"

namespace grpo::tok {

// A merge of two byte-level tokens (GPT-2 alphabet), in rank order.
using Merge = std::pair<std::string, std::string>;

// Pieces longer than this many bytes are learned from in parts of this length.
inline constexpr size_t kMaxPieceBytes = 4096;

// Splits each text with `pre` and learns up to `max_merges` merges the way
// BPE is trained: the most frequent adjacent pair over all pieces is merged,
// again and again; ties go to the pair that sorts first, so the result is
// deterministic. Stops early when no pair occurs twice. Logs its progress
// every few seconds.
std::vector<Merge> train_bpe_merges(const std::vector<std::string>& texts, const PreTokenizer& pre,
                                    size_t max_merges);

}  // namespace grpo::tok
