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
// again and again. Ties go as Hugging Face's BpeTrainer breaks them (to the
// pair whose tokens it numbers first: the byte-level characters by code
// point, then merges as made), so the merges are the ones it learns with
// min_frequency 2 (tests/tokenizer/bpe_trainer_hf_test.cpp) and do not depend
// on hashing. Stops early when no pair occurs twice. Logs its progress every
// few seconds.
std::vector<Merge> train_bpe_merges(const std::vector<std::string>& texts, const PreTokenizer& pre,
                                    size_t max_merges);

}  // namespace grpo::tok
