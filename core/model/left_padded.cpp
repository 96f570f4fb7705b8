#include "model/left_padded.h"

#include <algorithm>

namespace grpo::model {

std::pair<at::Tensor, at::Tensor> left_padded(const std::vector<std::vector<int32_t>>& rows, at::Device device) {
  size_t longest = 0;
  for (const auto& row : rows) longest = std::max(longest, row.size());
  const auto P = static_cast<int64_t>(rows.size()), L = static_cast<int64_t>(longest);
  at::Tensor ids = at::zeros({P, L}, at::kLong), mask = at::zeros({P, L}, at::kLong);
  // Written through accessors: a tensor op per id costs microseconds, 65k ids a tenth of a second.
  auto id_at = ids.accessor<int64_t, 2>(), mask_at = mask.accessor<int64_t, 2>();
  for (int64_t p = 0; p < P; ++p) {
    const auto& row = rows[static_cast<size_t>(p)];
    const int64_t pad = L - static_cast<int64_t>(row.size());
    for (size_t t = 0; t < row.size(); ++t) {
      id_at[p][pad + static_cast<int64_t>(t)] = row[t];
      mask_at[p][pad + static_cast<int64_t>(t)] = 1;
    }
  }
  return {ids.to(device), mask.to(device)};
}

}  // namespace grpo::model
