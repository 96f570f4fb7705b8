// Hugging Face tokenizer.json tokenizers for byte-level BPE models (Qwen2,
// Qwen2.5, Qwen3, Llama 3): encode and decode exactly as the `tokenizers`
// library does, without Python.
//
//   auto tok = grpo::tok::Tokenizer::from_dir("/models/Qwen3-0.6B");
//   std::vector<int32_t> ids = tok.encode("<|im_start|>user\nhi<|im_end|>");
//   std::string text = tok.decode(ids);
//
// A Tokenizer is cheap to copy (copies share the loaded tables) and safe to
// use from several threads at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>
#include "util/user_error.h"

namespace grpo::tok {

class TokenizerError : public ::grpo::UserError {
 public:
  using UserError::UserError;
};

// Counters of the BPE word cache, summed over its shards.
struct CacheStats {
  uint64_t hits = 0;
  uint64_t misses = 0;
  size_t entries = 0;
};

class Tokenizer {
 public:
  // Loads a tokenizer.json. Throws TokenizerError naming the file and what
  // is wrong with it.
  static Tokenizer from_file(const std::string& tokenizer_json_path);

  // Loads model_dir/tokenizer.json plus, when present,
  // model_dir/tokenizer_config.json (special tokens, add_bos_token, chat
  // template; a separate chat_template.jinja is read when the config has none).
  static Tokenizer from_dir(const std::string& model_dir);

  // Added and special tokens in the text always map to their ids.
  // add_special_tokens adds what the model expects around a sequence (the
  // post-processor template, or the bos token when add_bos_token is set).
  // Bytes that are not valid UTF-8 are encoded as byte tokens.
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = false) const;

  // Invalid UTF-8 in the result (a sequence cut between tokens) becomes
  // U+FFFD. Throws TokenizerError for an id that is not a token.
  std::string decode(const std::vector<int32_t>& ids, bool skip_special_tokens = false) const;
  // What a model sampled: its embedding may have more rows than the
  // tokenizer has tokens (Qwen2.5: 151,936 rows, 151,665 tokens). Such an id
  // decodes to nothing, as in Hugging Face; count_non_tokens counts them.
  std::string decode_sampled(const std::vector<int32_t>& ids, bool skip_special_tokens = false) const;
  size_t count_non_tokens(const std::vector<int32_t>& ids) const;

  int32_t token_to_id(std::string_view token) const;  // -1 if unknown
  std::string id_to_token(int32_t id) const;          // throws TokenizerError if unknown
  size_t vocab_size() const;                          // including added tokens (max id + 1)

  std::optional<int32_t> bos_id() const;
  std::optional<int32_t> eos_id() const;
  std::optional<int32_t> pad_id() const;
  std::optional<int32_t> unk_id() const;
  bool is_special(int32_t id) const;
  const std::string& chat_template() const;

  // transformers' decode also applies clean_up_tokenization (below) when the
  // config's clean_up_tokenization_spaces is true (Llama 3; not Qwen).
  bool clean_up_tokenization_spaces() const;
  // Removes the space before punctuation and English contractions
  // (" ." -> ".", " n't" -> "n't"), exactly as transformers does.
  static std::string clean_up_tokenization(std::string_view text);

  CacheStats cache_stats() const;

  struct Impl;

 private:
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

}  // namespace grpo::tok
