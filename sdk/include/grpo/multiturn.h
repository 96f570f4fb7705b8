/* Multi-turn handlers: "grpo.multiturn/1" — tools and environments that answer
 * the policy between its turns (ms-swift's multi_turn_scheduler, TRL's
 * environment_factory).
 *
 * One conversation per completion: G per prompt. The host samples a turn for
 * every live conversation in one batched generate call, then asks the handler,
 * conversation by conversation, what follows: messages to append (a tool's
 * answer, a user's hint) or the end. The host renders appended messages with
 * the run's chat template into token ids that carry no loss; the policy's own
 * tokens are kept exactly as sampled, never re-tokenized. Since SDK 1.2. */
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

#define GRPO_MULTITURN_INTERFACE "grpo.multiturn/1"

typedef struct grpo_multiturn_instance grpo_multiturn_instance; /* opaque, plugin-owned */
typedef struct grpo_conversation grpo_conversation; /* opaque, plugin-owned state of one conversation */

/* A conversation as it starts. Borrowed for the begin() call. */
typedef struct grpo_conversation_info {
  uint32_t struct_size;
  uint64_t conversation_id;      /* unique within the run */
  int64_t prompt_index;          /* the G conversations of a prompt share it */
  uint32_t copy_index;           /* 0..G-1 within its prompt */
  grpo_str prompt_messages_json; /* the dataset row's messages, JSON array */
  const grpo_column* columns;    /* every dataset column of the row */
  size_t n_columns;
  grpo_str columns_json;
  const grpo_trainer_state* state;
} grpo_conversation_info;
#define GRPO_CONVERSATION_INFO_STRUCT_SIZE GRPO_STRUCT_SIZE(grpo_conversation_info, state)

/* The policy's last turn. Borrowed for the step() / reward() call. */
typedef struct grpo_turn_input {
  uint32_t struct_size;
  grpo_str conversation_json;         /* every message so far, prompt first, the last completion last */
  grpo_str last_completion;           /* text of the policy's last turn, special tokens removed */
  const int32_t* last_completion_ids; /* its sampled ids */
  size_t n_last_completion_ids;
  int32_t last_finish_reason;         /* GRPO_FINISH_* of sampler.h */
  uint32_t turn_index;                /* 0 for the first completion */
  int64_t tokens_left;                /* completion tokens the conversation may still add; -1: no total limit */
  const grpo_column* columns;         /* the row's dataset columns */
  size_t n_columns;
  grpo_str columns_json;
  const grpo_trainer_state* state;
} grpo_turn_input;
#define GRPO_TURN_INPUT_STRUCT_SIZE GRPO_STRUCT_SIZE(grpo_turn_input, state)

/* Host-owned output of step(). The plugin appends messages through the
 * callback (the host copies the strings before it returns), sets done, and
 * counts the tool calls it handled in this turn. Rationale: a callback
 * instead of a returned buffer means nobody has to agree on who frees text.
 * Roles are "user" or "tool" (as the chat template renders them); appending
 * nothing without setting done also ends the conversation. */
typedef struct grpo_turn_output {
  uint32_t struct_size;
  int32_t done; /* 1: the conversation is finished; no further turn */
  void* host_ctx;
  /* [the thread that called step()] */
  void (*append_message)(void* host_ctx, grpo_str role, grpo_str content);
  uint32_t tool_calls;    /* tool calls found in the last completion (metrics tools/call_frequency) */
  uint32_t tool_failures; /* of those, the ones that failed: malformed, unknown tool, error */
} grpo_turn_output;
#define GRPO_TURN_OUTPUT_STRUCT_SIZE GRPO_STRUCT_SIZE(grpo_turn_output, tool_failures)

#define GRPO_MULTITURN_THREAD_SAFE 1u /* begin/step/reward/end may run concurrently on one instance */
#define GRPO_MULTITURN_HAS_REWARD 2u  /* reward() reports an environment reward as its own column */

typedef struct grpo_multiturn_api {
  uint32_t struct_size;
  uint32_t flags; /* GRPO_MULTITURN_* bits */

  /* [main-thread] As grpo_reward_api.create. */
  grpo_status (*create)(const grpo_host_api* host, grpo_str config_json, grpo_multiturn_instance** out,
                        grpo_error* err);

  /* Optional (NULL: no tools). [main-thread] The tools the policy may call,
   * as a JSON array of OpenAI-style function schemas
   * ([{"type": "function", "function": {"name", "description", "parameters"}}]):
   * the host passes them to the chat template (transformers' `tools=`), which
   * describes them in the system turn. Owned by the instance. */
  grpo_str (*tools_json)(grpo_multiturn_instance* self);

  /* Optional (NULL: stateless; conv is then NULL everywhere). [one call at a
   * time per instance] A conversation starts: *out is its state, owned by
   * the plugin until end(). */
  grpo_status (*begin)(grpo_multiturn_instance* self, const grpo_conversation_info* info,
                       grpo_conversation** out, grpo_error* err);

  /* [one call at a time per instance] What follows the policy's last turn.
   * Not called after a turn that ended by length or abort, nor after the
   * max_turns-th turn: those end the conversation. */
  grpo_status (*step)(grpo_multiturn_instance* self, grpo_conversation* conv, const grpo_turn_input* input,
                      grpo_turn_output* out, grpo_error* err);

  /* Optional; called only with GRPO_MULTITURN_HAS_REWARD. [one call at a time
   * per instance] The environment's reward of a finished conversation (TRL's
   * get_reward), given its last turn; NaN: no opinion. It is a reward column
   * named after the handler, after the reward functions and reward models. */
  grpo_status (*reward)(grpo_multiturn_instance* self, grpo_conversation* conv, const grpo_turn_input* last,
                        double* out, grpo_error* err);

  /* Optional (NULL with begin NULL). [one call at a time per instance] The
   * conversation is over (also when a call on it failed): free its state. */
  void (*end)(grpo_multiturn_instance* self, grpo_conversation* conv);

  /* [main-thread] */
  void (*destroy)(grpo_multiturn_instance* self);
} grpo_multiturn_api;
#define GRPO_MULTITURN_API_STRUCT_SIZE GRPO_STRUCT_SIZE(grpo_multiturn_api, destroy)

#ifdef __cplusplus
}
#endif

#endif /* GRPO_MULTITURN_H */
