// Learning-rate schedules with linear warmup, as transformers' get_scheduler
// defines them (the factor multiplies the base learning rate).
#pragma once

#include <cstdint>
#include <string>

namespace grpo::trainer {

class LrSchedule {
 public:
  // type: cosine | linear | constant | constant_with_warmup. warmup_steps < 0
  // means ceil(warmup_ratio * total_steps).
  LrSchedule(std::string type, double base_lr, int64_t total_steps, int64_t warmup_steps, double warmup_ratio);

  // The learning rate of optimizer step `step` (0-based: the first step uses lr(0)).
  double lr(int64_t step) const;
  int64_t warmup_steps() const { return warmup_; }

 private:
  std::string type_;
  double base_;
  int64_t total_, warmup_;
};

}  // namespace grpo::trainer
