/* The whole grpo plugin SDK (C11). */
#ifndef GRPO_GRPO_H
#define GRPO_GRPO_H

#include "grpo/version.h"
#include "grpo/threading.h"
#include "grpo/status.h"
#include "grpo/tensor.h"
#include "grpo/host.h"
#include "grpo/entry.h"
#include "grpo/reward.h"
#include "grpo/sampler.h"
#include "grpo/multiturn.h"

#endif /* GRPO_GRPO_H */
