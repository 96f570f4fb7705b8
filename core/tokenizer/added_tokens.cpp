#include "tokenizer/added_tokens.h"

#include <algorithm>

#include "tokenizer/utf8.h"

namespace grpo::tok {

void AddedTokenMatcher::add(const AddedToken& token, const std::string& pattern) {
  if (pattern.empty()) return;  // an empty token would match everywhere
  int32_t node = 0;
  for (unsigned char c : pattern) {
    auto& edges = nodes_[node].edges;
    auto it = std::lower_bound(edges.begin(), edges.end(), c,
                               [](const std::pair<unsigned char, int32_t>& e, unsigned char b) { return e.first < b; });
    if (it != edges.end() && it->first == c) {
      node = it->second;
    } else {
      const auto child = static_cast<int32_t>(nodes_.size());
      edges.insert(it, {c, child});
      nodes_.emplace_back();  // invalidates `edges`; not used past this point
      node = child;
    }
  }
  if (nodes_[node].token < 0) {
    nodes_[node].token = static_cast<int32_t>(tokens_.size());
    tokens_.push_back(token);
  }
  first_byte_[static_cast<unsigned char>(pattern[0])] = true;
}

std::pair<int32_t, size_t> AddedTokenMatcher::longest_at(std::string_view text, size_t pos) const {
  std::pair<int32_t, size_t> best{-1, 0};
  int32_t node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    const auto& edges = nodes_[node].edges;
    auto it = std::lower_bound(edges.begin(), edges.end(), c,
                               [](const std::pair<unsigned char, int32_t>& e, unsigned char b) { return e.first < b; });
    if (it == edges.end() || it->first != c) break;
    node = it->second;
    if (nodes_[node].token >= 0) best = {nodes_[node].token, i + 1 - pos};
  }
  return best;
}

void AddedTokenMatcher::split(std::string_view text, std::vector<Segment>* out) const {
  size_t emitted = 0;  // end of the last added token written
  size_t pos = 0;
  while (pos < text.size()) {
    if (!first_byte_[static_cast<unsigned char>(text[pos])]) {
      ++pos;
      continue;
    }
    const auto [index, length] = longest_at(text, pos);
    if (index < 0) {
      ++pos;
      continue;
    }
    const AddedToken& token = tokens_[index];
    size_t start = pos;
    size_t stop = pos + length;
    if (token.single_word) {
      size_t len = 0;
      const bool word_before = start > 0 && utf8::is_word_char(utf8::decode_before(text, start, &len));
      const bool word_after = stop < text.size() && utf8::is_word_char(utf8::decode(text, stop, &len));
      if (word_before || word_after) {
        // The search resumes after a rejected match, as a non-overlapping
        // match iterator does.
        pos = stop;
        continue;
      }
    }
    if (token.lstrip) {
      // Never reach back into what the previous token already took.
      while (start > emitted) {
        size_t len = 0;
        const char32_t cp = utf8::decode_before(text, start, &len);
        if (cp == utf8::kInvalid || !utf8::is_white_space(cp) || start - len < emitted) break;
        start -= len;
      }
    }
    if (token.rstrip) {
      while (stop < text.size()) {
        size_t len = 0;
        const char32_t cp = utf8::decode(text, stop, &len);
        if (cp == utf8::kInvalid || !utf8::is_white_space(cp)) break;
        stop += len;
      }
    }
    if (start > emitted) out->push_back({emitted, start, -1});
    out->push_back({start, stop, token.id});
    emitted = pos = stop;
  }
  if (emitted < text.size()) out->push_back({emitted, text.size(), -1});
}

}  // namespace grpo::tok
