#include "completion_cut.h"

#include <algorithm>

#include "tokenizer/tokenizer.h"

namespace grpo::external {

namespace {

bool holds_any(const std::string& text, const std::vector<std::string>& stops) {
  return std::any_of(stops.begin(), stops.end(),
                     [&](const std::string& s) { return !s.empty() && text.find(s) != std::string::npos; });
}

}  // namespace

Cut cut_completion(const std::vector<int32_t>& ids, const std::vector<int32_t>& stop_ids,
                   const std::vector<std::string>& stop_strings, const tok::Tokenizer* tokenizer) {
  // Decoding every window is the slow part: skip it when the whole text holds no stop string.
  const bool check_strings = tokenizer && !stop_strings.empty() && holds_any(tokenizer->decode_sampled(ids), stop_strings);
  size_t window = 1;
  for (const auto& s : stop_strings) window = std::max(window, s.size() + 1);
  for (size_t t = 0; t < ids.size(); ++t) {
    if (std::find(stop_ids.begin(), stop_ids.end(), ids[t]) != stop_ids.end()) return {t + 1, true};
    if (check_strings) {
      const size_t from = t + 1 > window ? t + 1 - window : 0;
      std::vector<int32_t> tail(ids.begin() + static_cast<std::ptrdiff_t>(from),
                                ids.begin() + static_cast<std::ptrdiff_t>(t + 1));
      if (holds_any(tokenizer->decode_sampled(tail), stop_strings)) return {t + 1, true};
    }
  }
  return {ids.size(), false};
}

}  // namespace grpo::external
