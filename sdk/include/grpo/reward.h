/* Reward plugins: "grpo.reward/1". */
#ifndef GRPO_REWARD_H
#define GRPO_REWARD_H

#include <stddef.h>
#include <stdint.h>

#include "grpo/host.h"
#include "grpo/status.h"
#include "grpo/threading.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GRPO_REWARD_INTERFACE "grpo.reward/1"

/* One dataset column of a row. Fixed layout (never grows). All borrowed for
 * the call. `json` is the value as JSON; `text` is the decoded string when
 * the value is a JSON string, else the same bytes as `json`. */
typedef struct grpo_column {
  grpo_str name;
  grpo_str json;
  grpo_str text;
} grpo_column;

typedef struct grpo_trainer_state {
  uint32_t struct_size;
  int64_t global_step; /* optimizer steps done */
  int64_t max_steps;   /* 0 when unknown */
  double epoch;
} grpo_trainer_state;
#define GRPO_TRAINER_STATE_STRUCT_SIZE GRPO_STRUCT_SIZE(grpo_trainer_state, epoch)

/* One completion to score. Everything is borrowed for the call. */
typedef struct grpo_reward_sample {
  uint32_t struct_size;
  grpo_str prompt_messages_json; /* JSON array of {"role","content"} */
  grpo_str completion;           /* last assistant turn, special tokens removed */
  const int32_t* completion_ids; /* generated token ids; NULL when unknown */
  size_t n_completion_ids;
  int64_t completion_tokens;     /* generated tokens; -1 when unknown */
  int32_t is_truncated;          /* 1 when it ended by length, not by EOS */
  int64_t prompt_index;          /* the G copies of a prompt share it */
  const grpo_column* columns;    /* every dataset column of the row */
  size_t n_columns;
  grpo_str columns_json;         /* the same columns as one JSON object */
  /* Since 1.2 — check with GRPO_HAS_FIELD. A multi-turn rollout's whole
   * conversation as a JSON array of messages: the prompt's, then every policy
   * turn (assistant) and every message the handler appended (user, tool);
   * `completion` is its last assistant turn. Empty for a single-turn rollout. */
  grpo_str conversation_json;
} grpo_reward_sample;
#define GRPO_REWARD_SAMPLE_STRUCT_SIZE GRPO_STRUCT_SIZE(grpo_reward_sample, conversation_json)

/* Rationale: samples are `sample_stride` bytes apart rather than
 * sizeof(grpo_reward_sample), so a newer host with a larger sample struct
 * still works with an older plugin. Use grpo_reward_batch_sample(). */
typedef struct grpo_reward_batch {
  uint32_t struct_size;
  size_t n;
  const grpo_reward_sample* samples;
  size_t sample_stride;
  const grpo_trainer_state* state;
} grpo_reward_batch;
#define GRPO_REWARD_BATCH_STRUCT_SIZE GRPO_STRUCT_SIZE(grpo_reward_batch, state)

static inline const grpo_reward_sample* grpo_reward_batch_sample(const grpo_reward_batch* batch,
                                                                 size_t i) {
  return (const grpo_reward_sample*)((const char*)batch->samples + i * batch->sample_stride);
}

/* Host-owned output: the plugin writes one reward per sample into
 * rewards[0..capacity) and sets count. NaN means "no opinion" (excluded from
 * sums and means, like None in ms-swift and TRL). */
typedef struct grpo_reward_output {
  uint32_t struct_size;
  double* rewards;
  size_t capacity;
  size_t count;
} grpo_reward_output;
#define GRPO_REWARD_OUTPUT_STRUCT_SIZE GRPO_STRUCT_SIZE(grpo_reward_output, count)

typedef struct grpo_reward_instance grpo_reward_instance; /* opaque, plugin-owned */

/* score() may be called concurrently on one instance: the host then splits a
 * batch across threads. */
#define GRPO_REWARD_THREAD_SAFE 1u

typedef struct grpo_reward_api {
  uint32_t struct_size;
  uint32_t flags; /* GRPO_REWARD_* bits */

  /* [main-thread] `config_json` is this plugin's options as a JSON object,
   * borrowed for the call. `host` stays valid until destroy(). On success
   * *out is owned by the plugin until destroy(). */
  grpo_status (*create)(const grpo_host_api* host, grpo_str config_json, grpo_reward_instance** out,
                        grpo_error* err);

  /* [one call at a time per instance, unless GRPO_REWARD_THREAD_SAFE]
   * Scores a whole batch (a reward model needs batches). */
  grpo_status (*score)(grpo_reward_instance* self, const grpo_reward_batch* batch,
                       grpo_reward_output* out, grpo_error* err);

  /* [main-thread] Frees the instance. */
  void (*destroy)(grpo_reward_instance* self);
} grpo_reward_api;
#define GRPO_REWARD_API_STRUCT_SIZE GRPO_STRUCT_SIZE(grpo_reward_api, destroy)

#ifdef __cplusplus
}
#endif

#endif /* GRPO_REWARD_H */
