// The sampler plugin's side of the trainer: creating it with views of the
// weights it samples from, keeping those weights current, and async_generate.
//
// async_generate (grpo.md §7): while the trainer works through generation
// batch k, batch k+1 is sampled and scored on a background thread with the
// weights as they were when it started — one step off-policy. The trainer
// recomputes `old` with its current weights and corrects for the sampler's
// own log-probs (importance_sampling.h).
#include <grpo/sampler.h>
#include <torch/types.h>

#include <thread>

#include "model/device.h"
#include "model/device_memory.h"
#include "model/dtype.h"
#include "model/lora.h"
#include "model/side_stream.h"
#include "model/weights.h"
#include "plugins/plugin_options.h"
#include "trainer/grpo_trainer.h"
#include "trainer/stop_signal.h"
#include "util/clock.h"

namespace grpo::trainer {

using util::now_s;

void GrpoTrainer::create_sampler() {
  model::CausalLMImpl& policy = *policy_.policy;
  // The sampler gets the policy's parameters as views: in process it aliases
  // them, so every optimizer step is visible to the next generation for free;
  // out of process it gets their values now and after every update.
  plugins::ResolvedPlugin sampler = registry_.require(s_.sampling.sampler, GRPO_SAMPLER_INTERFACE);
  // Filled only where the sampler declares these options; sampler_args win.
  nlohmann::json run_values = s_.run.plugin_flag_values;  // its options given as flags (--retries 5)
  run_values["model"] = s_.model.dir;
  run_values["torch_dtype"] = model::weight_dtype_name(s_.model.dtype);
  run_values["device"] = s_.model.device.str();  // in process: the policy's own, so that it aliases its weights
  run_values["load_format"] = "trainer";  // in process: nothing read from disk, its weights are the views below
  run_values["num_threads"] = s_.num_threads;
  run_values["max_num_seqs"] = s_.sampling.max_num_seqs;
  run_values["gpu_memory_utilization"] = s_.sampling.gpu_memory_utilization;
  run_values["enforce_eager"] = s_.sampling.enforce_eager;
  run_values["sleep_level"] = s_.sampling.sleep_level;
  nlohmann::json sampler_args = s_.sampling.sampler_args;
  if (s_.sampling.start_servers > 0) sampler_args["base_urls"] = start_local_servers();
  rollout_.sampler = plugins::SamplerClient::create(
      sampler, plugins::resolve_plugin_options(sampler.info, run_values, sampler_args, "sampler_args"), plugin_metrics_,
      s_.run.json.dump(), text_services_);
  if (s_.model.lora) {  // the sampler's model has no adapters: it reads W + scaling * B A, merged after each step
    rollout_.merged = model::merged_weight_buffers(policy);
    model::merge_lora_into(policy, rollout_.merged);
    std::vector<std::pair<std::string, at::Tensor>> named;
    for (const auto& p : policy.named_parameters())
      if (!model::is_adapter_parameter(p.key()))
        named.emplace_back(p.key(), rollout_.merged.count(p.key()) ? rollout_.merged.at(p.key()) : p.value());
    rollout_.views = std::make_unique<WeightViews>(named);
  } else {
    // It samples while the policy trains: give it its own copy of the weights.
    if (s_.sampling.async && rollout_.sampler->in_process()) rollout_.sampler_copy = model::copy_model(policy);
    rollout_.views = std::make_unique<WeightViews>(rollout_.sampler_copy ? *rollout_.sampler_copy : policy);
  }
  const uint32_t flags = (rollout_.sampler->in_process() ? GRPO_WEIGHTS_VIEW : 0u) | GRPO_WEIGHTS_LAST_BUCKET |
                         (s_.model.lora ? GRPO_WEIGHTS_MERGED_LORA : 0u);
  if (rollout_.sampler->in_process()) {
    rollout_.sampler->load_weights(rollout_.views->tensors(), flags);
  } else {
    push_weights_to_server(flags, "the policy's first weights");
  }
}

// Rank 0 starts the servers on this node and tells the other ranks their
// ports; they share them, as they share a server given by address. On GPUs
// they take the visible GPUs the ranks leave free; on the CPU they divide
// the cores training uses (training waits while they sample).
std::vector<std::string> GrpoTrainer::start_local_servers() {
  const int64_t count = s_.sampling.start_servers;
  if (world_.local_size() != world_.size())
    throw std::runtime_error("--num_infer_workers starts rollout servers on this node, which the other nodes' ranks "
                             "cannot reach; start grpo-rollout on the server machines and give --vllm_server_host");
  at::Tensor ports = at::zeros({count}, at::kLong);
  if (world_.is_main()) {
    LocalServerOptions o;
    o.count = count;
    o.model_dir = s_.model.dir;
    o.torch_dtype = model::weight_dtype_name(s_.model.dtype);
    o.devices = rollout_server_devices(s_.model.device, model::visible_gpus(), world_.local_size(), count);
    o.max_num_seqs = s_.sampling.max_num_seqs;
    o.gpu_memory_utilization = s_.sampling.gpu_memory_utilization;
    o.enforce_eager = s_.sampling.enforce_eager;
    const int cores = s_.num_threads > 0 ? s_.num_threads : static_cast<int>(std::thread::hardware_concurrency());
    o.threads_each = std::max<int>(1, cores / static_cast<int>(count));
    o.log_dir = s_.checkpoint.output_dir;
    o.start_timeout_s = s_.sampling.sampler_args.value("timeout_s", 240.0);
    rollout_.servers = std::make_unique<LocalRolloutServers>(o);
    for (int64_t i = 0; i < count; ++i) ports[i] = rollout_.servers->ports()[static_cast<size_t>(i)];
  }
  std::vector<at::Tensor> shared{ports};
  world_.broadcast(shared, 0, dist::Channel::Train, "the ports of the rollout servers rank 0 started");
  std::vector<std::string> urls;
  for (int64_t i = 0; i < count; ++i) urls.push_back("http://127.0.0.1:" + std::to_string(shared[0][i].item<int64_t>()));
  return urls;
}

// A sampler out of process (a rollout server) is shared by every rank: rank
// 0 alone pushes the weights, and no rank samples before the push is done.
void GrpoTrainer::push_weights_to_server(uint32_t flags, const std::string& what) {
  if (world_.is_main())
    run_interruptible<bool>(
        [this, flags] {
          rollout_.sampler->load_weights(rollout_.views->tensors(), flags);
          return true;
        },
        what + " being pushed to the rollout server", s_.model.device);
  world_.barrier(dist::Channel::Train, what + " pushed to the rollout server by rank 0");
}

void GrpoTrainer::launch_generation() {
  // Everything the background thread needs that the main thread changes is
  // taken here: the prompts, the seed index and the trainer state.
  std::vector<const Prompt*> prompts = prompts_->next(static_cast<size_t>(s_.batch.prompts_per_generation));
  const int64_t generation = rollout_.generations++;
  const plugins::TrainerState state = trainer_state();
  // On a GPU the sampling runs on a stream of its own, beside training's,
  // after what this thread queued so far (the weights it samples from were
  // just written here): model/side_stream.h.
  const std::shared_ptr<model::StreamMark> mark = model::mark_stream(s_.model.device);
  rollout_.pending = std::async(std::launch::async, [this, prompts, generation, state, mark] {
    model::make_current(s_.model.device);  // CUDA's current device is per thread: this rank's GPU here too
    model::SideStreamScope side(s_.model.device, mark);
    RolloutState::Pending out;
    out.batch = rollout(prompts, out.metrics, Purpose::Training, generation, state);
    side.finish();  // the batch is handed over once its kernels have run
    return out;
  });
}

GenerationBatch GrpoTrainer::next_async_batch(Metrics& m) {
  if (!rollout_.pending.valid()) launch_generation();  // the first batch has nothing to overlap with
  const double t0 = now_s();
  RolloutState::Pending ready = rollout_.pending.get();  // rethrows what the background thread threw
  m["time/generate_wait"] += now_s() - t0;
  for (const auto& [k, v] : ready.metrics) m[k] += v;
  return std::move(ready.batch);
}

void GrpoTrainer::wait_for_generation() {
  if (rollout_.pending.valid()) rollout_.pending.wait();
}

void GrpoTrainer::sync_sampler_weights(Metrics& m) {
  plugins::SamplerClient& sampler = *rollout_.sampler;
  if (sampler.in_process() && !rollout_.sampler_copy && !s_.model.lora) return;  // it aliases the policy
  const double t0 = now_s();
  if (s_.model.lora) model::merge_lora_into(*policy_.policy, rollout_.merged);  // what the sampler reads
  if (!sampler.in_process()) {
    push_weights_to_server(GRPO_WEIGHTS_LAST_BUCKET | (s_.model.lora ? GRPO_WEIGHTS_MERGED_LORA : 0u),
                           "the weights of step " + std::to_string(policy_.global_step));
  } else if (rollout_.sampler_copy) {  // the sampler reads its own copy while the policy trains
    torch::NoGradGuard no_grad;
    auto from = policy_.policy->parameters(), to = rollout_.sampler_copy->parameters();
    for (size_t i = 0; i < from.size(); ++i) to[i].copy_(from[i]);
  }
  m["time/weight_sync"] += settled_now() - t0;
}

}  // namespace grpo::trainer
