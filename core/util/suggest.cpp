#include "util/suggest.h"

#include <algorithm>
#include <cctype>

namespace grpo::util {

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t sub = prev[j - 1] + (std::tolower(a[i - 1]) == std::tolower(b[j - 1]) ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string closest_name(std::string_view name, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_distance = static_cast<size_t>(-1);
  for (const std::string& c : candidates) {
    size_t d = edit_distance(name, c);
    // A candidate that contains the typed name (a truncated name) counts as close too.
    if (name.size() >= 4 && c.find(name) != std::string::npos) d = std::min<size_t>(d, 2);
    if (d < best_distance) {
      best_distance = d;
      best = c;
    }
  }
  const size_t limit = std::max<size_t>(2, name.size() / 3);
  return best_distance <= limit ? best : std::string();
}

}  // namespace grpo::util
