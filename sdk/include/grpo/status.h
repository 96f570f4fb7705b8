/* Status codes and the error value that crosses the ABI instead of exceptions. */
#ifndef GRPO_STATUS_H
#define GRPO_STATUS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 0 = OK; the others follow the absl/PJRT status codes so they map 1:1. */
typedef int32_t grpo_status;
#define GRPO_OK 0
#define GRPO_CANCELLED 1
#define GRPO_UNKNOWN 2
#define GRPO_INVALID_ARGUMENT 3
#define GRPO_DEADLINE_EXCEEDED 4
#define GRPO_NOT_FOUND 5
#define GRPO_FAILED_PRECONDITION 9
#define GRPO_OUT_OF_RANGE 11
#define GRPO_UNIMPLEMENTED 12
#define GRPO_INTERNAL 13
#define GRPO_UNAVAILABLE 14
#define GRPO_RESOURCE_EXHAUSTED 8

#define GRPO_ERROR_MESSAGE_SIZE 1024

/* Caller-owned error value. Every fallible call takes one; on failure the
 * callee writes a NUL-terminated message (truncated to fit) and returns the
 * same code it stores in `code`. Fixed-size on purpose: it never grows, so it
 * has no struct_size, and nobody has to free anything. */
typedef struct grpo_error {
  grpo_status code;
  char message[GRPO_ERROR_MESSAGE_SIZE];
} grpo_error;

/* The struct_size a writer sets: the end of the struct's last field, never
 * sizeof, whose tail padding would make a field appended later look present
 * to a newer reader (as PJRT's PJRT_STRUCT_SIZE). Each growable struct has
 * its own GRPO_<TYPE>_STRUCT_SIZE beside it; use that. Since SDK 1.1. */
#define GRPO_STRUCT_SIZE(type, last_field) \
  ((uint32_t)(offsetof(type, last_field) + sizeof(((type*)0)->last_field)))

/* True when the struct `s` (of type `type`) is new enough to carry `field`:
 * the reader of a growable struct uses only what struct_size covers. */
#define GRPO_HAS_FIELD(s, type, field) \
  ((s)->struct_size >= offsetof(type, field) + sizeof(((type*)0)->field))

/* A borrowed string: not NUL-terminated unless said otherwise. */
typedef struct grpo_str {
  const char* data;
  size_t size;
} grpo_str;

#ifdef __cplusplus
}
#endif

#endif /* GRPO_STATUS_H */
