/* Multi-turn handlers: "grpo.multiturn.draft/0" — tools and environments that answer
 * the policy between its turns. */
#ifndef GRPO_MULTITURN_H
#define GRPO_MULTITURN_H

#include <stddef.h>
#include <stdint.h>

#include "grpo/host.h"
#include "grpo/reward.h"
#include "grpo/status.h"
#include "grpo/threading.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GRPO_MULTITURN_INTERFACE "grpo.multiturn.draft/0"

/* Borrowed for the step() call. */
typedef struct grpo_turn_input {
  uint32_t struct_size;
  grpo_str conversation_json;         /* JSON array of messages so far, last completion included */
  grpo_str last_completion;           /* text of the policy's last turn */
  const int32_t* last_completion_ids; /* its generated ids */
  size_t n_last_completion_ids;
  int32_t last_finish_reason;         /* GRPO_FINISH_* of sampler.h */
  uint32_t turn_index;                /* 0 for the first completion */
  const grpo_column* columns;         /* the row's dataset columns */
  size_t n_columns;
  grpo_str columns_json;
  const grpo_trainer_state* state;
} grpo_turn_input;
#define GRPO_TURN_INPUT_STRUCT_SIZE GRPO_STRUCT_SIZE(grpo_turn_input, state)

/* Host-owned output. The plugin appends messages through the callback (the
 * strings are copied by the host before it returns) and sets done.
 * Rationale: a callback instead of a returned buffer means nobody has to
 * agree on who frees the text. Appended messages are tokenized by the host
 * and masked out of the loss (the policy did not sample them). */
typedef struct grpo_turn_output {
  uint32_t struct_size;
  int32_t done; /* 1: the conversation is finished; no further turn */
  void* host_ctx;
  /* [the thread that called step()] */
  void (*append_message)(void* host_ctx, grpo_str role, grpo_str content);
} grpo_turn_output;
#define GRPO_TURN_OUTPUT_STRUCT_SIZE GRPO_STRUCT_SIZE(grpo_turn_output, append_message)

typedef struct grpo_multiturn_instance grpo_multiturn_instance; /* opaque, plugin-owned */

#define GRPO_MULTITURN_THREAD_SAFE 1u /* step() may run concurrently on one instance */

typedef struct grpo_multiturn_api {
  uint32_t struct_size;
  uint32_t flags; /* GRPO_MULTITURN_* bits */

  /* [main-thread] As grpo_reward_api.create. */
  grpo_status (*create)(const grpo_host_api* host, grpo_str config_json, grpo_multiturn_instance** out,
                        grpo_error* err);

  /* [one call at a time per instance, unless GRPO_MULTITURN_THREAD_SAFE]
   * Decides the next turn of one conversation. */
  grpo_status (*step)(grpo_multiturn_instance* self, const grpo_turn_input* input,
                      grpo_turn_output* out, grpo_error* err);

  /* [main-thread] */
  void (*destroy)(grpo_multiturn_instance* self);
} grpo_multiturn_api;
#define GRPO_MULTITURN_API_STRUCT_SIZE GRPO_STRUCT_SIZE(grpo_multiturn_api, destroy)

#ifdef __cplusplus
}
#endif

#endif /* GRPO_MULTITURN_H */
