// A small byte-level BPE tokenizer of our own, for models created from
// scratch (grpo-host init-model without --tokenizer): the 256 bytes, the
// ChatML special tokens, merges learned from sample text if given, and a
// ChatML chat template.
#pragma once

#include <string>
#include <vector>

#include "tokenizer/bpe_trainer.h"
#include "tokenizer/pretokenizer.h"

namespace grpo::tok {

// Writes dir/tokenizer.json and dir/tokenizer_config.json. The vocabulary
// has 259 ids: bytes 0..255, then <|endoftext|>, <|im_start|>, <|im_end|>;
// each merge adds its token after them, in rank order.
void write_byte_level_tokenizer(const std::string& dir, const std::vector<Merge>& merges = {});

// The pre-tokenizer that tokenizer splits text with (Qwen's), to learn
// merges for it with train_bpe_merges.
PreTokenizer byte_level_pre_tokenizer();

constexpr int kByteTokenizerVocabSize = 259;

}  // namespace grpo::tok
