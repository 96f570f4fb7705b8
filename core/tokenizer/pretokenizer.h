// The pre-tokenizer of tokenizer.json: cuts normalized text into the pieces
// that BPE encodes independently (words, number digits, whitespace runs...).
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/regex.h"

namespace grpo::tok {

class PreTokenizer {
 public:
  // What a Split step does with the matched ranges (Hugging Face's
  // SplitDelimiterBehavior).
  enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

  // Parses the pre_tokenizer value (null, Split, ByteLevel, Digits, or a
  // Sequence of them). Throws TokenizerError naming `source`.
  static PreTokenizer from_json(const nlohmann::json& value, const std::string& source);

  // Byte-level BPE needs a ByteLevel step; the loader rejects files without.
  bool has_byte_level() const { return has_byte_level_; }

  using PieceSink = std::function<void(std::string_view)>;

  // Calls on_piece for each non-empty piece of `text`, in order. Pieces are
  // streamed rather than collected so that huge inputs need no piece list;
  // a piece is only valid during its call.
  void split(std::string_view text, const PieceSink& on_piece) const;

 private:
  struct Step {
    std::shared_ptr<const Regex> regex;  // null: a ByteLevel step without its own regex
    Behavior behavior = Behavior::kIsolated;
    bool invert = false;
    bool add_prefix_space = false;
  };

  void parse_step(const nlohmann::json& value, const std::string& source);
  // Runs steps_[step...] on one piece.
  void run(size_t step, std::string_view piece, const PieceSink& on_piece) const;
  void split_by_behavior(size_t step, std::string_view piece, const PieceSink& on_piece) const;

  std::vector<Step> steps_;
  bool has_byte_level_ = false;
};

}  // namespace grpo::tok
