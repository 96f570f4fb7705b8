// The native sampler: the generation engine in the trainer's process, behind
// the sampler ABI. Weights handed over as views (GRPO_WEIGHTS_VIEW) are used
// in place — the engine's parameters alias the trainer's, so an optimizer
// step is visible to the next generate() without any copy. With load_format
// "trainer" (what grpo-host asks for) the model directory's weights are not
// read at all: the engine is built around the trainer's tensors when they
// arrive, so a 7B run neither reads 15 GB again nor holds a second copy on the
// GPU while it starts. In multi-turn rollouts the engine keeps a turn's keys
// and values for the next turn (grpo_sampling_params.prefix_flags).
#include <algorithm>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include <grpo/sdk.hpp>
#include <torch/types.h>
#include <torch/utils.h>

#include "dlpack_alias.h"
#include "model/device.h"
#include "model/dtype.h"
#include "model/engine.h"
#include "model/model_config.h"
#include "model/skip_init.h"
#include "model/threads.h"
#include "model/weights.h"
#include "tokenizer/tokenizer.h"

namespace {

// A model whose weights the trainer hands over (load_format "trainer"):
// built without memory of its own, filled bucket by bucket.
struct AwaitedModel {
  grpo::model::CausalLM lm{nullptr};
  at::Device device = at::kCPU;
  at::ScalarType dtype = at::kFloat;
  std::set<std::string> given;
  bool aliased = false;  // some parameter is the trainer's own tensor
};

struct NativeSampler {
  grpo::Host host;
  std::unique_ptr<grpo::tok::Tokenizer> tokenizer;
  grpo::model::EngineOptions options;
  std::unique_ptr<grpo::model::Engine> engine;  // null until the trainer's weights arrive (load_format "trainer")
  std::optional<AwaitedModel> awaited;
  std::string dir;
};

// How the engine decodes, under vLLM's option names.
grpo::model::EngineOptions engine_options(grpo::Options& o) {
  grpo::model::EngineOptions e;
  const std::string decode = o.get_string("decode", "auto");
  if (decode == "eager") e.decode = grpo::model::EngineOptions::Decode::Eager;
  else if (decode == "slots") e.decode = grpo::model::EngineOptions::Decode::Slots;
  else if (decode != "auto") throw grpo::Error("the native sampler's decode is auto, eager or slots, not '" + decode + "'");
  e.max_slots = o.get_int("max_num_seqs", 256);
  if (e.max_slots < 1) throw grpo::Error("the native sampler's max_num_seqs must be at least 1");
  e.memory_fraction = o.get_double("gpu_memory_utilization", 0.9);
  if (!(e.memory_fraction > 0 && e.memory_fraction <= 1))
    throw grpo::Error("the native sampler's gpu_memory_utilization must be in (0, 1]");
  e.cuda_graphs = !o.get_bool("enforce_eager", false);
  e.release_after_call = o.get_int("sleep_level", 0) >= 1;
  e.max_prefill_tokens = o.get_int("max_num_batched_tokens", 16384);
  if (e.max_prefill_tokens < 0) throw grpo::Error("the native sampler's max_num_batched_tokens must be >= 0");
  return e;
}

grpo_status create(const grpo_host_api* host_api, grpo_str config, grpo_sampler_instance** out, grpo_error* err) {
  return grpo::detail::guarded(err, [&] {
    grpo::Options o{grpo::view(config)};
    const std::string dir = o.get_string("model", "");
    if (dir.empty()) throw grpo::Error("the native sampler needs 'model': a Hugging Face model directory");
    auto s = std::make_unique<NativeSampler>();
    s->host = grpo::Host(host_api);
    grpo::model::configure_cpu_threads(static_cast<int>(o.get_int("num_threads", 0)));
    // The tokenizer decodes completions and finds stop strings: the model's own unless told otherwise.
    const std::string tok_path = o.get_string("tokenizer", dir);
    s->tokenizer = std::make_unique<grpo::tok::Tokenizer>(
        tok_path.size() > 5 && tok_path.compare(tok_path.size() - 5, 5, ".json") == 0
            ? grpo::tok::Tokenizer::from_file(tok_path)
            : grpo::tok::Tokenizer::from_dir(tok_path));
    const at::Device device = grpo::model::parse_device(o.get_string("device", "cpu"), "the native sampler's device");
    const at::ScalarType dtype = grpo::model::weight_dtype_from_name(o.get_string("torch_dtype", ""));
    s->options = engine_options(o);
    s->dir = dir;
    const std::string load_format = o.get_string("load_format", "auto");
    if (load_format == "trainer") {
      // The parameters take untouched host memory (never committed) until the trainer's tensors replace them.
      grpo::model::SkipInit skip;
      s->awaited = AwaitedModel{grpo::model::CausalLM(grpo::model::ModelConfig::load(dir + "/config.json")), device,
                                dtype, {}};
    } else if (load_format == "auto") {
      s->engine = std::make_unique<grpo::model::Engine>(grpo::model::load_model(dir, dtype, device), s->tokenizer.get(),
                                                        s->options);
      s->host.info("native sampler ready: " + dir + " on " + device.str());
    } else {
      throw grpo::Error("the native sampler's load_format is auto (the model directory's weights) or trainer (the "
                        "trainer's, handed over before the first call), not '" + load_format + "'");
    }
    *out = reinterpret_cast<grpo_sampler_instance*>(s.release());
  });
}

grpo_status generate(grpo_sampler_instance* self, const grpo_generate_request* requests, size_t n_requests,
                     size_t stride, const grpo_sampling_params* params, grpo_completion_sink sink, void* sink_ctx,
                     grpo_error* err) {
  return grpo::detail::guarded(err, [&] {
    auto* s = reinterpret_cast<NativeSampler*>(self);
    if (!s->engine)
      throw grpo::Error("the native sampler was created with load_format 'trainer' and has no weights yet: "
                        "load_weights (every parameter, the last bucket flagged) must come before generate");
    grpo::model::SamplingParams sp;
    sp.temperature = params->temperature;
    sp.top_p = params->top_p;
    sp.top_k = params->top_k;
    sp.min_p = params->min_p;
    sp.repetition_penalty = params->repetition_penalty;
    sp.max_new_tokens = params->max_new_tokens;
    for (size_t i = 0; i < params->n_stop_strings; ++i) sp.stop_strings.emplace_back(grpo::view(params->stop_strings[i]));
    std::vector<grpo::model::GenerateRequest> reqs;
    std::vector<uint64_t> ids;
    for (size_t i = 0; i < n_requests; ++i) {
      const auto* r = reinterpret_cast<const grpo_generate_request*>(reinterpret_cast<const char*>(requests) + i * stride);
      grpo::model::GenerateRequest g;
      g.prompt_ids.assign(r->prompt_ids, r->prompt_ids + r->n_prompt_ids);
      g.n = r->n;
      g.seed = r->seed;
      g.stop_ids.assign(r->stop_ids, r->stop_ids + r->n_stop_ids);
      if (GRPO_HAS_FIELD(r, grpo_generate_request, max_new_tokens) && r->max_new_tokens > 0)
        g.max_new_tokens = r->max_new_tokens;
      reqs.push_back(std::move(g));
      ids.push_back(r->request_id);
    }
    grpo::model::PrefixReuse reuse;
    if (GRPO_HAS_FIELD(params, grpo_sampling_params, prefix_flags)) {
      reuse.continues = (params->prefix_flags & GRPO_PREFIX_CONTINUES) != 0;
      reuse.keep = (params->prefix_flags & GRPO_PREFIX_KEEP) != 0;
    }
    const std::vector<grpo::model::Completion> completions = s->engine->generate(reqs, sp, reuse);
    if (reuse.continues) {  // the share of this turn's prompt ids that were not computed again
      const auto reused = static_cast<double>(s->engine->reused_ids());
      s->host.metric("native/prefix_reused_frac", reused / std::max(1.0, reused + s->engine->prefilled_ids()));
    }
    for (const grpo::model::Completion& c : completions) {
      std::string text = s->tokenizer->decode_sampled(c.ids, /*skip_special_tokens=*/true);
      grpo_completion out{};
      out.struct_size = GRPO_COMPLETION_STRUCT_SIZE;
      out.request_id = ids[c.request];
      out.index = static_cast<uint32_t>(c.index);
      out.ids = c.ids.data();
      out.n_ids = c.ids.size();
      out.logprobs = params->return_logprobs ? c.logprobs.data() : nullptr;
      out.text = grpo::str(text);
      out.finish_reason = c.finish == grpo::model::FinishReason::Stop ? GRPO_FINISH_STOP : GRPO_FINISH_LENGTH;
      sink(sink_ctx, &out);
    }
  });
}

// The model's parameter that `t` names, and `t`'s tensor, checked to have its shape.
std::pair<at::Tensor*, at::Tensor> matched(torch::OrderedDict<std::string, at::Tensor>& params,
                                           const grpo_named_tensor& t) {
  const std::string name(grpo::view(t.name));
  at::Tensor* p = params.find(name);
  if (!p) throw grpo::Error("load_weights: the model has no parameter '" + name + "'");
  at::Tensor src = grpo::samplers::alias_of(t.tensor);
  if (src.sizes() != p->sizes())
    throw grpo::Error("load_weights: '" + name + "' has shape " + c10::str(src.sizes()) + ", the model " +
                      c10::str(p->sizes()));
  return {p, src};
}

// The awaited model's parameters become the given tensors (their storage, on
// their device, where dtype and device are the sampler's; else a copy); after
// the last bucket, with every parameter given, the engine is built.
void fill_awaited(NativeSampler& s, const grpo_named_tensor* tensors, size_t n, uint32_t flags) {
  AwaitedModel& a = *s.awaited;
  torch::NoGradGuard no_grad;
  auto params = a.lm->named_parameters();
  for (size_t i = 0; i < n; ++i) {
    auto [p, src] = matched(params, tensors[i]);
    const bool alias = (flags & GRPO_WEIGHTS_VIEW) && src.scalar_type() == a.dtype && src.device() == a.device;
    p->set_data(alias ? src : src.to(a.device, a.dtype, /*non_blocking=*/false, /*copy=*/true));
    a.aliased = a.aliased || alias;
    a.given.emplace(grpo::view(tensors[i].name));
  }
  if (!(flags & GRPO_WEIGHTS_LAST_BUCKET)) return;
  for (const auto& item : params)
    if (!a.given.count(item.key()))
      throw grpo::Error("load_weights: the last bucket came and '" + item.key() + "' was never given (" +
                        std::to_string(a.given.size()) + " of " + std::to_string(params.size()) +
                        " parameters were): with load_format 'trainer' every parameter must be");
  for (at::Tensor& b : a.lm->buffers()) b.set_data(b.to(a.device));  // RoPE's frequencies, float32 as they are
  // Copies of its own are packed as a loaded model's are. The trainer's tensors are read where they are, never
  // moved (the sampler would stop seeing the trainer's updates): packed where the trainer's lie side by side.
  if (!a.aliased) a.lm->pack_projections();
  s.engine = std::make_unique<grpo::model::Engine>(a.lm, s.tokenizer.get(), s.options);  // warms up with these weights
  s.host.info("native sampler ready: " + s.dir + " on " + a.device.str() + ", with the trainer's weights");
  s.awaited.reset();
}

grpo_status load_weights(grpo_sampler_instance* self, const grpo_named_tensor* tensors, size_t n, uint32_t flags,
                         grpo_error* err) {
  return grpo::detail::guarded(err, [&] {
    auto* s = reinterpret_cast<NativeSampler*>(self);
    if (s->awaited) return fill_awaited(*s, tensors, n, flags);
    torch::NoGradGuard no_grad;
    auto params = s->engine->model()->named_parameters();
    for (size_t i = 0; i < n; ++i) {
      auto [p, src] = matched(params, tensors[i]);
      if ((flags & GRPO_WEIGHTS_VIEW) && src.scalar_type() == p->scalar_type() && src.device() == p->device())
        p->set_(src);  // share the trainer's storage: later in-place updates need no transfer
      else
        p->copy_(src);
    }
  });
}

void destroy(grpo_sampler_instance* self) { delete reinterpret_cast<NativeSampler*>(self); }

const grpo_sampler_api kApi = {GRPO_SAMPLER_API_STRUCT_SIZE, GRPO_SAMPLER_IN_PROCESS, &create, &generate, &load_weights,
                               nullptr, nullptr, &destroy};

const char* kOptions = R"json([
  {"name": "model", "type": "string", "default": null, "help": "Hugging Face model directory"},
  {"name": "tokenizer", "type": "string", "default": null, "help": "tokenizer directory or tokenizer.json (default: the model's)"},
  {"name": "torch_dtype", "type": "string", "default": "float32", "help": "float32, bfloat16 or float16"},
  {"name": "device", "type": "string", "default": "cpu", "help": "cpu, cuda[:N] or auto (the trainer passes its own)"},
  {"name": "load_format", "type": "string", "default": "auto", "help": "auto: the model directory's weights; trainer: none read, the trainer's tensors used as they arrive (grpo-host passes it)"},
  {"name": "num_threads", "type": "int", "default": 0, "help": "CPU threads (0 = all cores)"},
  {"name": "decode", "type": "string", "default": "auto", "help": "auto (slots on a GPU, eager on the CPU), eager or slots"},
  {"name": "max_num_seqs", "type": "int", "default": 256, "help": "rows decoded at once in slots; more wait for a finished row's slot"},
  {"name": "gpu_memory_utilization", "type": "float", "default": 0.9, "help": "share of the GPU's memory the process may hold with the slots' KV cache"},
  {"name": "max_num_batched_tokens", "type": "int", "default": 16384, "help": "new prompt tokens (padded) one prefill forward takes at most; more prompts are prefilled in batches, a longer prompt in chunks (0: all at once)"},
  {"name": "enforce_eager", "type": "bool", "default": false, "help": "decode in slots without CUDA graphs"},
  {"name": "sleep_level", "type": "int", "default": 0, "help": "1 or 2: free the slots' KV cache and CUDA graphs after each call"}])json";

}  // namespace

GRPO_EXPORT_PLUGINS(::grpo::detail::PluginRecord{"native", GRPO_SAMPLER_INTERFACE, "1.0.0",
                                                 "the in-process LibTorch engine (KV cache, shared prompt prefill)",
                                                 kOptions, &kApi, {}})
