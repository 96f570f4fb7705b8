// Added tokens ("added_tokens" of tokenizer.json, e.g. <|im_start|>) are cut
// out of the text before normalization and BPE, so that they always map to
// their own id however the surrounding text would have been merged.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace grpo::tok {

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool special = false;
  bool lstrip = false;       // absorbs the whitespace before it
  bool rstrip = false;       // absorbs the whitespace after it
  bool normalized = false;   // matched in normalized text rather than the raw input
  bool single_word = false;  // only matches when not inside a word
};

// A stretch of text: plain text to encode (id < 0) or one added token.
struct Segment {
  size_t begin;
  size_t end;
  int32_t id;
};

class AddedTokenMatcher {
 public:
  // `pattern` is what to look for: the content, normalized when the token is.
  void add(const AddedToken& token, const std::string& pattern);
  bool empty() const { return tokens_.empty(); }

  // Appends the segments of `text` in order. Matching is leftmost-longest
  // and non-overlapping, as Hugging Face's Aho-Corasick search; empty plain
  // segments are omitted.
  void split(std::string_view text, std::vector<Segment>* out) const;

 private:
  struct Node {
    std::vector<std::pair<unsigned char, int32_t>> edges;  // sorted by byte
    int32_t token = -1;                                    // index into tokens_
  };
  // Longest pattern starting at text[pos]: (token index, length) or (-1, 0).
  std::pair<int32_t, size_t> longest_at(std::string_view text, size_t pos) const;

  std::vector<Node> nodes_{Node{}};
  std::vector<AddedToken> tokens_;
  std::array<bool, 256> first_byte_{};
};

}  // namespace grpo::tok
