/* The thread contracts that tag every function of the SDK, defined once.
 *
 * [main-thread]   The host calls it from the thread that loaded the plugin
 *                 and never at the same time as any other call on the same
 *                 instance. create, destroy, init and deinit are of this kind.
 *
 * [one call at a time per instance]
 *                 The host may call it from any thread, but never twice at
 *                 once on one instance (calls on different instances may
 *                 overlap). A reward that sets GRPO_REWARD_THREAD_SAFE lifts
 *                 this for score(): the host may then score parts of a batch
 *                 on several threads at once.
 *
 * [any-thread]    A host service (grpo_host_api) or host callback that the
 *                 plugin may call from any thread, at any time while the
 *                 instance lives, also concurrently: the host serialises
 *                 what needs it. The sampler's completion sink is of this
 *                 kind (since 1.1; GRPO_SAMPLER_SINK_ANY_THREAD is no longer
 *                 needed).
 *
 * Nothing here is code: this header only documents. */
#ifndef GRPO_THREADING_H
#define GRPO_THREADING_H
#endif /* GRPO_THREADING_H */
