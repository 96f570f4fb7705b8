#include "trainer/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace grpo::trainer {

LrSchedule::LrSchedule(std::string type, double base_lr, int64_t total_steps, int64_t warmup_steps,
                       double warmup_ratio)
    : type_(std::move(type)), base_(base_lr), total_(std::max<int64_t>(1, total_steps)) {
  warmup_ = warmup_steps >= 0 ? warmup_steps
                              : static_cast<int64_t>(std::ceil(warmup_ratio * static_cast<double>(total_)));
  if (type_ != "cosine" && type_ != "linear" && type_ != "constant" && type_ != "constant_with_warmup")
    throw std::invalid_argument("lr_scheduler_type must be cosine, linear, constant or constant_with_warmup, got '" +
                                type_ + "'");
}

double LrSchedule::lr(int64_t step) const {
  if (type_ == "constant") return base_;
  if (step < warmup_) return base_ * static_cast<double>(step) / static_cast<double>(std::max<int64_t>(1, warmup_));
  if (type_ == "constant_with_warmup") return base_;
  const double progress =
      static_cast<double>(step - warmup_) / static_cast<double>(std::max<int64_t>(1, total_ - warmup_));
  if (type_ == "linear") return base_ * std::max(0.0, 1.0 - progress);
  return base_ * std::max(0.0, 0.5 * (1.0 + std::cos(M_PI * progress)));  // cosine, half a cycle
}

}  // namespace grpo::trainer
