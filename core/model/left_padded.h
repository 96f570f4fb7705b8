// Token rows of different lengths as one batch, padded on the left so that
// every row's last token is the batch's last position (what a prefill's
// next-token logits and a reward model's score read).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

namespace grpo::model {

// ids and attention mask [rows, longest] (int64, 0-padded) on `device`.
std::pair<at::Tensor, at::Tensor> left_padded(const std::vector<std::vector<int32_t>>& rows, at::Device device);

}  // namespace grpo::model
