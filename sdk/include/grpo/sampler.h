/* Sampler plugins: "grpo.sampler/1" — the trainer's only way to generate. */
#ifndef GRPO_SAMPLER_H
#define GRPO_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

#include "grpo/host.h"
#include "grpo/status.h"
#include "grpo/threading.h"
#include "grpo/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GRPO_SAMPLER_INTERFACE "grpo.sampler/1"

typedef struct grpo_sampling_params {
  uint32_t struct_size;
  double temperature;        /* > 0; 0 is not allowed, use top_k = 1 for greedy */
  double top_p;              /* 1.0 = off */
  int32_t top_k;             /* <= 0 = off */
  double min_p;              /* 0 = off */
  double repetition_penalty; /* 1.0 = off */
  int32_t max_new_tokens;
  const grpo_str* stop_strings; /* n_stop_strings entries; generation ends after a match */
  size_t n_stop_strings;
  int32_t return_logprobs;   /* 1: fill grpo_completion.logprobs */
  /* Since 1.3 — check with GRPO_HAS_FIELD. Multi-turn rollouts call generate()
   * once per turn; turn t + 1's prompt is turn t's prompt, its completion and
   * what the conversation appended. GRPO_PREFIX_CONTINUES: these prompts may
   * extend completions of the previous call, sampled under the same weights,
   * so what the sampler computed for them may be reused. GRPO_PREFIX_KEEP:
   * the next call may extend this call's completions. 0: nothing carries
   * over (weights may have changed). 64 bits wide so that it starts at
   * offset 80, past the tail padding that 1.0 writers counted in struct_size. */
  uint64_t prefix_flags;
} grpo_sampling_params;
#define GRPO_SAMPLING_PARAMS_STRUCT_SIZE GRPO_STRUCT_SIZE(grpo_sampling_params, prefix_flags)
#define GRPO_PREFIX_CONTINUES 1u
#define GRPO_PREFIX_KEEP 2u

/* One prompt, sampled n times. Borrowed for the generate() call. */
typedef struct grpo_generate_request {
  uint32_t struct_size;
  uint64_t request_id;          /* echoed in every completion */
  const int32_t* prompt_ids;    /* the templated prompt as token ids */
  size_t n_prompt_ids;
  grpo_str prompt_text;         /* the same prompt as text (for servers that take text) */
  grpo_str messages_json;       /* the un-templated messages, JSON array; may be empty */
  uint32_t n;                   /* completions to sample for this prompt */
  uint64_t seed;                /* completion i uses a seed derived from (seed, i): never equal copies */
  const int32_t* stop_ids;      /* token ids that end a completion (eos, ...) */
  size_t n_stop_ids;
  /* Since 1.2 — check with GRPO_HAS_FIELD. This request's token budget when
   * it is below params->max_new_tokens (a multi-turn conversation near its
   * total length); 0: the params' value. A sampler that ignores it is cut by
   * the host, which then reports GRPO_FINISH_LENGTH itself. */
  int32_t max_new_tokens;
} grpo_generate_request;
#define GRPO_GENERATE_REQUEST_STRUCT_SIZE GRPO_STRUCT_SIZE(grpo_generate_request, max_new_tokens)

typedef int32_t grpo_finish_reason;
#define GRPO_FINISH_STOP 0   /* a stop id or stop string */
#define GRPO_FINISH_LENGTH 1 /* max_new_tokens reached */
#define GRPO_FINISH_ABORT 2  /* the sampler gave up on it (error) */

/* One completion, streamed to the host. Borrowed for the sink call. */
typedef struct grpo_completion {
  uint32_t struct_size;
  uint64_t request_id;
  uint32_t index;          /* 0..n-1 within the request */
  const int32_t* ids;      /* generated ids, stop id included when it ended on one */
  size_t n_ids;
  const float* logprobs;   /* n_ids entries under the temperature-scaled distribution; NULL if not asked */
  grpo_str text;           /* decoded text, special tokens removed; may be empty if the sampler does not decode */
  grpo_finish_reason finish_reason;
} grpo_completion;
#define GRPO_COMPLETION_STRUCT_SIZE GRPO_STRUCT_SIZE(grpo_completion, finish_reason)

/* [any-thread] during generate(): the host serialises calls, so a sampler may
 * call it from its own worker threads (since 1.1; a 1.0 host needed
 * GRPO_SAMPLER_SINK_ANY_THREAD for that). */
typedef void (*grpo_completion_sink)(void* sink_ctx, const grpo_completion* completion);

typedef struct grpo_sampler_instance grpo_sampler_instance; /* opaque, plugin-owned */

/* load_weights flags */
#define GRPO_WEIGHTS_VIEW 1u      /* tensors are views the trainer keeps updating in place; keep them,
                                     no copy (same process and device): valid until the next
                                     load_weights or destroy */
#define GRPO_WEIGHTS_LAST_BUCKET 2u /* this call completes a full weight update */
#define GRPO_WEIGHTS_MERGED_LORA 4u /* LoRA adapters already merged into these weights (on every
                                       call of a LoRA run: the first and each sync) */

/* api flags */
#define GRPO_SAMPLER_SINK_ANY_THREAD 1u /* kept for 1.0 plugins; since 1.1 every sink is [any-thread] */
#define GRPO_SAMPLER_IN_PROCESS 2u /* can take GRPO_WEIGHTS_VIEW tensors zero-copy */

typedef struct grpo_sampler_api {
  uint32_t struct_size;
  uint32_t flags; /* GRPO_SAMPLER_* bits */

  /* [main-thread] As grpo_reward_api.create. */
  grpo_status (*create)(const grpo_host_api* host, grpo_str config_json, grpo_sampler_instance** out,
                        grpo_error* err);

  /* [one call at a time per instance] Samples every request; each completion
   * is passed to sink exactly once before generate() returns. Requests are
   * `request_stride` bytes apart. */
  grpo_status (*generate)(grpo_sampler_instance* self, const grpo_generate_request* requests,
                          size_t n_requests, size_t request_stride, const grpo_sampling_params* params,
                          grpo_completion_sink sink, void* sink_ctx, grpo_error* err);

  /* [one call at a time per instance] New policy weights, by Hugging Face
   * parameter name; possibly in several buckets. Tensors are borrowed for the
   * call unless flags has GRPO_WEIGHTS_VIEW. */
  grpo_status (*load_weights)(grpo_sampler_instance* self, const grpo_named_tensor* tensors,
                              size_t n_tensors, uint32_t flags, grpo_error* err);

  /* Optional (may be NULL). [draft] No host calls these yet (sleep_level is
   * not built); their contract may change in a minor version until one does:
   * free caches / weights down to `level`, and restore them. */
  grpo_status (*sleep)(grpo_sampler_instance* self, int32_t level, grpo_error* err);
  grpo_status (*wake_up)(grpo_sampler_instance* self, grpo_error* err);

  /* [main-thread] */
  void (*destroy)(grpo_sampler_instance* self);
} grpo_sampler_api;
#define GRPO_SAMPLER_API_STRUCT_SIZE GRPO_STRUCT_SIZE(grpo_sampler_api, destroy)

#ifdef __cplusplus
}
#endif

#endif /* GRPO_SAMPLER_H */
