// "Did you mean ...?" for names users mistype.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace grpo::util {

size_t edit_distance(std::string_view a, std::string_view b);

// The candidate closest to `name`, or "" when none is close enough to be a
// plausible typo (distance more than a third of the name's length, min 2; a
// candidate containing the whole name, 4+ characters, counts as distance 2).
std::string closest_name(std::string_view name, const std::vector<std::string>& candidates);

}  // namespace grpo::util
