// A small byte-level BPE tokenizer of our own, for models created from
// scratch (grpo-host init-model without --tokenizer): the 256 bytes, the
// ChatML special tokens, and a ChatML chat template.
#pragma once

#include <string>

namespace grpo::tok {

// Writes dir/tokenizer.json and dir/tokenizer_config.json. The vocabulary
// has 259 ids: bytes 0..255, then <|endoftext|>, <|im_start|>, <|im_end|>.
void write_byte_level_tokenizer(const std::string& dir);

constexpr int kByteTokenizerVocabSize = 259;

}  // namespace grpo::tok
