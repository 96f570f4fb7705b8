/* Services the host hands to every plugin instance. */
#ifndef GRPO_HOST_H
#define GRPO_HOST_H

#include <stddef.h>
#include <stdint.h>

#include "grpo/status.h"
#include "grpo/threading.h"
#include "grpo/version.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef int32_t grpo_log_level;
#define GRPO_LOG_TRACE 0
#define GRPO_LOG_DEBUG 1
#define GRPO_LOG_INFO 2
#define GRPO_LOG_WARN 3
#define GRPO_LOG_ERROR 4

/* Rationale: a plugin never brings its own logger or metrics sink; it calls
 * back into the host, which prefixes the plugin's name and routes messages
 * into its log and metrics into logging.jsonl. The table is specific to one
 * plugin instance (host_ctx identifies it).
 *
 * Ownership: the table is owned by the host and valid until the instance it
 * was given to is destroyed. Every string argument is borrowed for the call. */
typedef struct grpo_host_api {
  uint32_t struct_size;
  grpo_version host_version;
  void* host_ctx; /* opaque; pass back unchanged */

  /* [any-thread] One log line. */
  void (*log)(void* host_ctx, grpo_log_level level, grpo_str message);

  /* [any-thread] A scalar metric; averaged over a logging step and written
   * under this exact name to logging.jsonl. */
  void (*log_metric)(void* host_ctx, grpo_str name, double value);

  /* [any-thread] The run's whole resolved configuration as a JSON object.
   * The returned string is owned by the host and valid as long as the table. */
  grpo_str (*run_config_json)(void* host_ctx);

  /* Since 1.1 — check with GRPO_HAS_FIELD; NULL where the host has no
   * tokenizer (e.g. `grpo-host score`). The run's own tokenizer and chat
   * template, so that a plugin sees text and ids exactly as the trainer does.
   * Each writes into a caller-owned buffer of `capacity` elements and stores
   * the full size in *size (call with capacity 0 to learn it); it fails only
   * on malformed input. [any-thread] */
  grpo_status (*tokenize)(void* host_ctx, grpo_str text, int32_t add_special_tokens, int32_t* ids,
                          size_t capacity, size_t* size, grpo_error* err);
  grpo_status (*detokenize)(void* host_ctx, const int32_t* ids, size_t n_ids, int32_t skip_special_tokens,
                            char* text, size_t capacity, size_t* size, grpo_error* err);
  /* The chat template applied to a JSON array of {"role", "content"} messages,
   * followed by the generation prompt when add_generation_prompt is 1. */
  grpo_status (*render_chat)(void* host_ctx, grpo_str messages_json, int32_t add_generation_prompt, char* text,
                             size_t capacity, size_t* size, grpo_error* err);

  /* Since 1.1: this instance's options by name, as the host resolved them
   * (the schema's defaults filled in, the user's values type-checked), so
   * that a C plugin needs no JSON parser. GRPO_NOT_FOUND when the option is
   * absent or null, GRPO_INVALID_ARGUMENT when it holds another type (an int
   * reads as a double too). A string is owned by the host and valid as long
   * as the table. [any-thread] */
  grpo_status (*option_int)(void* host_ctx, grpo_str name, int64_t* value);
  grpo_status (*option_double)(void* host_ctx, grpo_str name, double* value);
  grpo_status (*option_bool)(void* host_ctx, grpo_str name, int32_t* value);
  grpo_status (*option_string)(void* host_ctx, grpo_str name, grpo_str* value);
} grpo_host_api;
#define GRPO_HOST_API_STRUCT_SIZE GRPO_STRUCT_SIZE(grpo_host_api, option_string)

#ifdef __cplusplus
}
#endif

#endif /* GRPO_HOST_H */
