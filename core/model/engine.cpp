#include "model/engine.h"

#include <algorithm>
#include <random>
#include <stdexcept>

#include <c10/core/DeviceGuard.h>
#include <torch/types.h>
#include <torch/utils.h>

#include "model/cpu_kernels.h"
#include "model/decode_graphs.h"
#include "model/device_memory.h"
#include "model/engine_call.h"
#include "model/left_padded.h"
#include "model/slot_decoder.h"
#include "tokenizer/tokenizer.h"

namespace grpo::model {

Engine::Engine(CausalLM model, const tok::Tokenizer* tokenizer, EngineOptions options)
    : model_(std::move(model)),
      tokenizer_(tokenizer),
      options_(options),
      graphs_(std::make_unique<DecodeGraphs>(options.cuda_graphs)) {
  warm_up();
}

Engine::~Engine() = default;

// On a GPU the first call would pay for loading every kernel it launches,
// creating cuBLAS handles and growing the allocator's pool: seconds, against
// a fraction of one for a warm call. Two tiny calls pay that when the engine
// loads, one plain and one with every sampling filter; what they allocated
// for decoding is let go (a real call's shape differs).
void Engine::warm_up() {
  if (model_->model->embed_tokens->weight.device().is_cpu()) return;
  SamplingParams plain, filtered;
  plain.max_new_tokens = filtered.max_new_tokens = 3;
  filtered.top_k = 50;
  filtered.top_p = 0.9;
  filtered.min_p = 0.05;
  filtered.repetition_penalty = 1.1;
  filtered.top_logprobs = 2;
  for (const SamplingParams& p : {plain, filtered}) generate({{{1, 2, 3, 4}, 2, 0, {}}}, p);
  graphs_->clear();
  slots_.reset();
  stats_ = DecodeStats{};
}


// A finished row's keys and values, for a next call that continues it: its
// prompt and every sampled id but the last, which was never fed to the model.
void Engine::keep_for_next_call(std::vector<std::pair<at::Tensor, at::Tensor>> kv, const std::vector<int32_t>& prompt,
                                const std::vector<int32_t>& sampled) {
  PrefixStore::Entry e;
  e.ids = prompt;
  e.ids.insert(e.ids.end(), sampled.begin(), sampled.end() - 1);
  e.kv = std::move(kv);
  if (!e.kv.empty() && e.kv.front().first.size(1) == static_cast<int64_t>(e.ids.size())) kept_.add(std::move(e));
}

std::vector<Completion> Engine::generate(const std::vector<GenerateRequest>& requests, const SamplingParams& params,
                                         PrefixReuse reuse) {
  if (!reuse.continues) kept_.clear();  // weights may have changed since
  prefilled_ids_ = reused_ids_ = 0;
  stats_ = DecodeStats{};
  if (params.temperature <= 0) throw std::invalid_argument("temperature must be > 0 (use top_k = 1 for greedy)");
  if (!params.stop_strings.empty() && !tokenizer_)
    throw std::invalid_argument("stop strings need the engine's tokenizer");
  std::vector<Completion> out;
  for (size_t r = 0; r < requests.size(); ++r) {
    if (requests[r].prompt_ids.empty()) throw std::invalid_argument("request " + std::to_string(r) + " has an empty prompt");
    // On a GPU an id past the embedding is a device-side assert that ends the process's CUDA context.
    for (int32_t id : requests[r].prompt_ids)
      if (id < 0 || id >= model_->config().vocab_size)
        throw std::invalid_argument("request " + std::to_string(r) + ": prompt id " + std::to_string(id) +
                                    " is not a token id of this model (vocabulary of " +
                                    std::to_string(model_->config().vocab_size) + ")");
    for (int64_t i = 0; i < requests[r].n; ++i) out.push_back(Completion{r, i, {}, {}, FinishReason::Length});
  }
  EngineCall call{requests, params, reuse, out, {}, {}};
  for (const auto& c : out) call.max_steps = std::max(call.max_steps, call.budget(c));
  const bool all_cancelled = std::all_of(out.begin(), out.end(), [&](const Completion& c) { return call.cancelled(c.request); });
  if (out.empty() || call.max_steps <= 0 || all_cancelled) {
    kept_.clear();
    return out;
  }
  for (const auto& s : params.stop_strings) call.stop_window = std::max(call.stop_window, s.size() + 1);

  torch::NoGradGuard no_grad;
  FusedScope fused;  // sampling only: the fused kernels may replace at:: ops, the lm_head's included
  const at::Device device = model_->model->embed_tokens->weight.device();
  const bool on_gpu = !device.is_cpu();
  // Any thread may call (a rollout server's engine thread, the trainer's asynchronous sampler), and CUDA's
  // current device is per thread: what is made without a tensor to say where (streams, cuBLAS handles, the
  // graphs' pool) must land on the weights' GPU, not on GPU 0.
  c10::OptionalDeviceGuard on_device;
  if (on_gpu) on_device.reset_device(device);
  prefill(call);
  const bool slots = options_.decode == EngineOptions::Decode::Slots ||
                     (options_.decode == EngineOptions::Decode::Auto && on_gpu);
  if (slots) {
    decode_in_slots(call);
    if (options_.release_after_call) {
      graphs_->clear();
      slots_.reset();
      release_cached_memory(device);
    }
  } else {
    decode_eagerly(call);
  }
  return out;
}

// Prefill each distinct prompt once; its copies share the result. A prompt
// that extends a kept completion (a conversation's next turn) starts from that
// completion's keys and values: only the ids after it are prefilled, behind a
// gap of padding where prompts differ in length.
void Engine::prefill(EngineCall& call) {
  const auto& requests = call.requests;
  std::vector<const std::vector<std::pair<at::Tensor, at::Tensor>>*> reused(requests.size(), nullptr);
  std::vector<std::vector<int32_t>> rest;
  for (size_t p = 0; p < requests.size(); ++p) {
    const PrefixStore::Entry* e = kept_.longest_prefix_of(requests[p].prompt_ids);
    const size_t from = e ? e->ids.size() : 0;
    if (e) reused[p] = &e->kv;
    rest.emplace_back(requests[p].prompt_ids.begin() + static_cast<std::ptrdiff_t>(from), requests[p].prompt_ids.end());
    reused_ids_ += static_cast<int64_t>(from);
    prefilled_ids_ += static_cast<int64_t>(rest.back().size());
  }
  // Consecutive prompts whose padded new tokens fit max_prefill_tokens share a forward.
  std::vector<size_t> starts = {0};
  for (size_t p = 0, longest = 0; p < rest.size(); ++p) {
    longest = std::max(longest, rest[p].size());
    const auto rows = static_cast<int64_t>(p + 1 - starts.back());
    if (options_.max_prefill_tokens > 0 && rows > 1 && rows * static_cast<int64_t>(longest) > options_.max_prefill_tokens)
      starts.push_back(p), longest = rest[p].size();
  }
  starts.push_back(rest.size());
  stats_.prefill_forwards = 0;
  const at::Device device = model_->model->embed_tokens->weight.device();
  const auto forward = [&](size_t begin, size_t end, KvCache& cache) {  // the last positions' logits [n, V]
    // A prompt alone past the budget goes in chunks of it, each continuing
    // the cache (vLLM's chunked prefill): one forward's projections and MLP
    // stay bounded however long the prompt (attention's mask spans the chunk
    // times the context).
    using Ids = std::vector<int32_t>;
    const auto it = [](const auto& v, size_t i) { return v.begin() + static_cast<std::ptrdiff_t>(i); };
    std::vector<std::vector<Ids>> forwards = {std::vector<Ids>(it(rest, begin), it(rest, end))};
    const auto budget = static_cast<size_t>(options_.max_prefill_tokens);
    if (end - begin == 1 && budget > 0 && rest[begin].size() > budget) {
      const Ids& ids = rest[begin];
      forwards.clear();
      for (size_t from = 0; from < ids.size(); from += budget)
        forwards.push_back({Ids(it(ids, from), it(ids, std::min(ids.size(), from + budget)))});
    }
    at::Tensor hidden;
    for (const auto& batch : forwards) {
      auto [ids, mask] = left_padded(batch, device);
      hidden = model_->hidden_states(ids, mask, {}, &cache);  // [n, L, H]
      ++stats_.prefill_forwards;
    }
    return model_->logits(hidden.select(1, hidden.size(1) - 1));
  };
  if (starts.size() == 2) {
    call.prompts = KvCache::of_rows(reused);
    call.last = forward(0, rest.size(), call.prompts);
  } else {  // each batch's rows placed in one cache, their padding left out, as each batch is done
    std::vector<int64_t> lengths;
    for (size_t p = 0; p < rest.size(); ++p)
      lengths.push_back((reused[p] ? reused[p]->front().first.size(1) : 0) + static_cast<int64_t>(rest[p].size()));
    call.prompts = KvCache::with_lengths(std::move(lengths));
    std::vector<at::Tensor> last;
    for (size_t c = 0; c + 1 < starts.size(); ++c) {
      const auto begin = static_cast<std::ptrdiff_t>(starts[c]), end = static_cast<std::ptrdiff_t>(starts[c + 1]);
      KvCache part = KvCache::of_rows(decltype(reused)(reused.begin() + begin, reused.begin() + end));
      last.push_back(forward(starts[c], starts[c + 1], part));
      call.prompts.place(part, begin);
    }
    call.last = at::cat(last);
  }
  kept_.clear();  // copied into the cache; this call's completions replace them
}

// Rows decode in one batch; finished rows leave it at once, so no compute
// goes to padding.
void Engine::decode_eagerly(EngineCall& call) {
  const auto& requests = call.requests;
  const SamplingParams& params = call.params;
  std::vector<Completion>& out = call.out;
  const at::Device device = model_->model->embed_tokens->weight.device();
  const int64_t V = model_->config().vocab_size;
  KvCache& cache = call.prompts;
  std::vector<int64_t> copy_of;
  for (const auto& c : out) copy_of.push_back(static_cast<int64_t>(c.request));
  at::Tensor rows = at::tensor(copy_of, at::kLong).to(device);
  cache.select_rows(rows);
  at::Tensor logits = call.last.index_select(0, rows);  // [N, V]

  std::vector<std::mt19937_64> rng_store;
  for (const auto& c : out) rng_store.emplace_back(sequence_seed(requests[c.request].seed, static_cast<uint64_t>(c.index)));
  at::Tensor seen;
  if (params.repetition_penalty != 1.0) {
    seen = at::zeros({static_cast<int64_t>(out.size()), V}, at::kBool);  // filled on the host, moved once
    auto seen_at = seen.accessor<bool, 2>();
    for (size_t i = 0; i < out.size(); ++i)
      for (int32_t id : requests[out[i].request].prompt_ids) seen_at[static_cast<int64_t>(i)][id] = true;
    seen = seen.to(device);
  }

  std::vector<size_t> active(out.size());  // batch row -> completion
  for (size_t i = 0; i < out.size(); ++i) active[i] = i;
  for (int64_t step = 0; step < call.max_steps && !active.empty(); ++step) {
    std::vector<std::mt19937_64*> rngs;
    for (size_t a : active) rngs.push_back(&rng_store[a]);
    Sampled s = sample_next(logits, seen, params, rngs);
    ++stats_.steps;
    at::Tensor tokens_cpu = s.tokens.to(at::kCPU).contiguous(), logp_cpu = s.logprobs.to(at::kCPU).contiguous();
    const int64_t* token_data = tokens_cpu.data_ptr<int64_t>();
    const float* logp_data = logp_cpu.data_ptr<float>();
    at::Tensor top_ids_cpu, top_logp_cpu;
    if (params.top_logprobs > 0) {
      top_ids_cpu = s.top_ids.to(at::kCPU).to(at::kInt).contiguous();
      top_logp_cpu = s.top_logprobs.to(at::kCPU).contiguous();
    }
    std::vector<int64_t> keep;
    for (size_t b = 0; b < active.size(); ++b) {
      Completion& c = out[active[b]];
      const auto token = static_cast<int32_t>(token_data[b]);
      c.ids.push_back(token);
      c.logprobs.push_back(logp_data[b]);
      if (top_ids_cpu.defined()) {
        const int64_t k = top_ids_cpu.size(1), row = static_cast<int64_t>(b) * k;
        c.top_ids.emplace_back(top_ids_cpu.data_ptr<int32_t>() + row, top_ids_cpu.data_ptr<int32_t>() + row + k);
        c.top_logprobs.emplace_back(top_logp_cpu.data_ptr<float>() + row, top_logp_cpu.data_ptr<float>() + row + k);
      }
      const auto& stops = requests[c.request].stop_ids;
      bool stopped = std::find(stops.begin(), stops.end(), token) != stops.end();
      if (!stopped && !params.stop_strings.empty()) stopped = call.hits_stop_string(*tokenizer_, c.ids);
      if (stopped) c.finish = FinishReason::Stop;
      else if (call.cancelled(c.request)) continue;  // leaves the batch, kept for no next call
      else if (static_cast<int64_t>(c.ids.size()) < call.budget(c)) keep.push_back(static_cast<int64_t>(b));
      else stopped = true;
      if (stopped && call.reuse.keep)
        keep_for_next_call(cache.real_row(static_cast<int64_t>(b)), requests[c.request].prompt_ids, c.ids);
    }
    if (keep.empty()) break;
    at::Tensor next = s.tokens;
    if (keep.size() != active.size()) {  // finished rows leave the batch
      at::Tensor index = at::tensor(keep, at::kLong).to(device);
      cache.select_rows(index);
      next = next.index_select(0, index);
      if (seen.defined()) seen = seen.index_select(0, index);
      std::vector<size_t> still;
      for (int64_t b : keep) still.push_back(active[static_cast<size_t>(b)]);
      active = std::move(still);
    }
    if (seen.defined()) seen.scatter_(1, next.unsqueeze(1), true);
    at::Tensor step_mask = at::ones({next.size(0), 1}, at::TensorOptions().dtype(at::kLong).device(device));
    logits = model_->logits(model_->hidden_states(next.unsqueeze(1), step_mask, {}, &cache).squeeze(1));
  }
}

}  // namespace grpo::model
