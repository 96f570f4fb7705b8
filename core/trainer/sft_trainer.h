// grpo-host sft: supervised cross-entropy on the assistant answer of each row
// — the warm start a small model needs before RL. Shares the model, the
// optimizer and the checkpoints with the GRPO trainer.
#pragma once

#include "config/config.h"
#include "trainer/settings.h"

namespace grpo::trainer {

// Trains on the last assistant turn of `messages` (or on `response` after
// `query`/`problem`/`prompt`). Throws config::ConfigError / data::DataError
// naming the flag or row on bad input.
void run_sft(const SftSettings& settings);

}  // namespace grpo::trainer
