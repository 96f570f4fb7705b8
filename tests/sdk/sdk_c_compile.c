/* Every SDK header compiles as strict C11 (-std=c11 -Wall -Wextra -Werror
 * -pedantic) and a C plugin can fill the structs. */
#include <stddef.h>
#include <stdio.h>

#include "grpo/grpo.h"

static uint32_t count(void) { return 0; }
static const grpo_plugin_descriptor* get(uint32_t i) {
  (void)i;
  return NULL;
}
static const void* factory(const char* name, const char* id) {
  (void)name;
  (void)id;
  return NULL;
}

int main(void) {
  grpo_entry entry = {GRPO_ENTRY_STRUCT_SIZE, GRPO_SDK_VERSION_INIT, NULL, NULL, count, get, factory};
  grpo_reward_sample sample = {0};
  grpo_reward_batch batch = {0};
  grpo_sampler_api sampler = {0};
  grpo_multiturn_api multiturn = {0};
  grpo_error err = {0};
  sample.struct_size = sizeof sample;
  batch.struct_size = sizeof batch;
  batch.n = 1;
  batch.samples = &sample;
  batch.sample_stride = sizeof sample;
  if (grpo_reward_batch_sample(&batch, 0) != &sample) return 1;
  if (!GRPO_HAS_FIELD(&batch, grpo_reward_batch, state)) return 1;
  if (entry.abi_version.major != GRPO_SDK_VERSION_MAJOR) return 1;
  (void)sampler;
  (void)multiturn;
  (void)err;
  printf("SDK %d.%d.%d headers compile as C11\n", GRPO_SDK_VERSION_MAJOR, GRPO_SDK_VERSION_MINOR,
         GRPO_SDK_VERSION_PATCH);
  return 0;
}
