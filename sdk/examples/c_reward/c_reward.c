/* A complete reward plugin in C11 against the SDK's headers alone: 1.0 when
 * the completion contains the option `keyword` (default "answer"), else 0.0.
 * Its options come from the host's typed getters (no JSON parser needed). */
#include <stdlib.h>
#include <string.h>

#include <grpo/grpo.h>

typedef struct keyword_reward {
  char* keyword;
} keyword_reward;

static grpo_status create(const grpo_host_api* host, grpo_str config, grpo_reward_instance** out, grpo_error* err) {
  keyword_reward* self = calloc(1, sizeof *self);
  const char name[] = "keyword";
  grpo_str keyword = {"answer", 6};
  (void)config; /* the same options, already parsed by the host: */
  if (!self) return err->code = GRPO_RESOURCE_EXHAUSTED;
  if (GRPO_HAS_FIELD(host, grpo_host_api, option_string) && host->option_string)
    host->option_string(host->host_ctx, (grpo_str){name, sizeof name - 1}, &keyword);
  self->keyword = malloc(keyword.size + 1);
  if (!self->keyword) {
    free(self);
    return err->code = GRPO_RESOURCE_EXHAUSTED;
  }
  memcpy(self->keyword, keyword.data, keyword.size);
  self->keyword[keyword.size] = '\0';
  *out = (grpo_reward_instance*)self;
  return GRPO_OK;
}

/* Whether `needle` occurs in the `size` bytes at `text` (which need not end in NUL). */
static int contains(const char* text, size_t size, const char* needle) {
  const size_t n = strlen(needle);
  for (size_t i = 0; n <= size && i + n <= size; ++i)
    if (memcmp(text + i, needle, n) == 0) return 1;
  return 0;
}

static grpo_status score(grpo_reward_instance* instance, const grpo_reward_batch* batch, grpo_reward_output* out,
                         grpo_error* err) {
  const keyword_reward* self = (const keyword_reward*)instance;
  (void)err;
  for (size_t i = 0; i < batch->n; ++i) {
    const grpo_reward_sample* s = grpo_reward_batch_sample(batch, i);
    out->rewards[i] = contains(s->completion.data, s->completion.size, self->keyword) ? 1.0 : 0.0;
  }
  out->count = batch->n;
  return GRPO_OK;
}

static void destroy(grpo_reward_instance* instance) {
  keyword_reward* self = (keyword_reward*)instance;
  free(self->keyword);
  free(self);
}

static const grpo_reward_api kApi = {GRPO_REWARD_API_STRUCT_SIZE, GRPO_REWARD_THREAD_SAFE, create, score, destroy};

static const grpo_plugin_descriptor kDescriptor = {
    GRPO_PLUGIN_DESCRIPTOR_STRUCT_SIZE, "keyword_reward", GRPO_REWARD_INTERFACE, "1.0.0",
    "1.0 if the completion contains the keyword",
    "[{\"name\": \"keyword\", \"type\": \"string\", \"default\": \"answer\", \"help\": \"text to look for\"}]"};

static uint32_t count(void) { return 1; }
static const grpo_plugin_descriptor* get(uint32_t i) { return i == 0 ? &kDescriptor : NULL; }
static const void* factory(const char* name, const char* interface_id) {
  return strcmp(name, "keyword_reward") == 0 && strcmp(interface_id, GRPO_REWARD_INTERFACE) == 0 ? &kApi : NULL;
}

GRPO_EXPORT const grpo_entry grpo_plugin_entry = {GRPO_ENTRY_STRUCT_SIZE, GRPO_SDK_VERSION_INIT, NULL, NULL,
                                                  count, get, factory};
