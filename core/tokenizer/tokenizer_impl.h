// The loaded state behind a Tokenizer: shared, immutable after loading apart
// from the BPE word cache, which guards itself.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer.h"

namespace grpo::tok {

struct Tokenizer::Impl {
  std::string source;  // the tokenizer.json path, for messages
  Normalizer normalizer;
  PreTokenizer pre_tokenizer;
  std::unique_ptr<BpeModel> model;

  AddedTokenMatcher raw_matcher;         // tokens with normalized == false
  AddedTokenMatcher normalized_matcher;  // tokens with normalized == true
  std::unordered_map<std::string, int32_t> added_ids;

  // Indexed by id; an empty `present` entry is a hole in the id space.
  std::vector<std::string> tokens;  // as written in the file (byte-level text)
  std::vector<std::string> bytes;   // what the token decodes to
  std::vector<char> present;
  std::vector<char> special;

  // Post-processor template of a single sequence, applied with add_special_tokens.
  bool has_template = false;
  std::vector<int32_t> template_prefix;
  std::vector<int32_t> template_suffix;

  // From tokenizer_config.json.
  std::optional<int32_t> bos;
  std::optional<int32_t> eos;
  std::optional<int32_t> pad;
  std::optional<int32_t> unk;
  bool add_bos = false;
  bool add_eos = false;
  bool clean_up_spaces = false;
  std::string chat_template;

  bool valid_id(int32_t id) const {
    return id >= 0 && static_cast<size_t>(id) < present.size() && present[static_cast<size_t>(id)];
  }
};

}  // namespace grpo::tok
