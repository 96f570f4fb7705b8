/* grpo SDK version: the single source of truth for the ABI version.
 * The CMake package version and the project version are read from here. */
#ifndef GRPO_VERSION_H
#define GRPO_VERSION_H

#include <stdint.h>

#define GRPO_SDK_VERSION_MAJOR 1
#define GRPO_SDK_VERSION_MINOR 3
#define GRPO_SDK_VERSION_PATCH 0

#ifdef __cplusplus
extern "C" {
#endif

/* Rationale: a plugin built for 1.x loads in every 1.y host (y >= 0). The host
 * refuses a different major; a newer minor is accepted because every struct
 * carries its own struct_size and fields are only appended. */
typedef struct grpo_version {
  uint32_t major;
  uint32_t minor;
  uint32_t patch;
} grpo_version;

#define GRPO_SDK_VERSION_INIT \
  { GRPO_SDK_VERSION_MAJOR, GRPO_SDK_VERSION_MINOR, GRPO_SDK_VERSION_PATCH }

#ifdef __cplusplus
}
#endif

#endif /* GRPO_VERSION_H */
