/* The one symbol a plugin library exports, and the descriptors it lists. */
#ifndef GRPO_ENTRY_H
#define GRPO_ENTRY_H

#include <stdint.h>

#include "grpo/host.h"
#include "grpo/status.h"
#include "grpo/threading.h"
#include "grpo/version.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GRPO_PLUGIN_ENTRY_SYMBOL "grpo_plugin_entry"

#if defined(_WIN32)
#define GRPO_EXPORT __declspec(dllexport)
#else
#define GRPO_EXPORT __attribute__((visibility("default")))
#endif

/* One plugin inside a library. A library may hold several (e.g. all the
 * rule-based rewards). Every pointer is owned by the library and valid until
 * it is unloaded. */
typedef struct grpo_plugin_descriptor {
  uint32_t struct_size;
  const char* name;         /* registered name: what reward_funcs / sampler name */
  const char* interface_id; /* "grpo.reward/1", "grpo.sampler/1", ... */
  const char* version;      /* the plugin's own version, e.g. "1.0.0" */
  const char* description;  /* one line for `grpo-host plugins` */
  /* Options as a JSON array of {"name","type","default","help"} objects, or
   * NULL. Names are the flag names users know (e.g. "cosine_max_len"); the
   * host fills each from the run configuration, then from plugin_args. */
  const char* options_json;
} grpo_plugin_descriptor;
#define GRPO_PLUGIN_DESCRIPTOR_STRUCT_SIZE GRPO_STRUCT_SIZE(grpo_plugin_descriptor, options_json)

/* The exported entry. The host reads struct_size and abi_version before
 * anything else and refuses a different major version.
 *
 * Rationale: capabilities are found by versioned string ids through
 * get_factory, so a breaking change ships as "grpo.reward/2" beside "/1". */
typedef struct grpo_entry {
  uint32_t struct_size;
  grpo_version abi_version; /* GRPO_SDK_VERSION_INIT at build time */

  /* [main-thread] Once after loading, before any other call. May be NULL.
   * `host` is borrowed for the call. */
  grpo_status (*init)(const grpo_host_api* host, grpo_error* err);

  /* [main-thread] Once before unloading, after every object the library
   * created has been destroyed. May be NULL. */
  void (*deinit)(void);

  /* [any-thread] Number of plugins in this library. */
  uint32_t (*plugin_count)(void);

  /* [any-thread] Descriptor `index` (< plugin_count()); NULL if out of range. */
  const grpo_plugin_descriptor* (*get_plugin)(uint32_t index);

  /* [any-thread] The function table of interface `interface_id` (e.g.
   * GRPO_REWARD_INTERFACE) for the plugin called `plugin_name`, or NULL when
   * it does not provide it. The returned table begins with uint32_t
   * struct_size. Both strings are NUL-terminated and borrowed for the call. */
  const void* (*get_factory)(const char* plugin_name, const char* interface_id);
} grpo_entry;
#define GRPO_ENTRY_STRUCT_SIZE GRPO_STRUCT_SIZE(grpo_entry, get_factory)

/* In a plugin written in C:
 *   GRPO_EXPORT const grpo_entry grpo_plugin_entry = {GRPO_ENTRY_STRUCT_SIZE, GRPO_SDK_VERSION_INIT, ...};
 * The C++ layer (grpo/sdk.hpp) defines it with GRPO_EXPORT_REWARD. */

#ifdef __cplusplus
}
#endif

#endif /* GRPO_ENTRY_H */
