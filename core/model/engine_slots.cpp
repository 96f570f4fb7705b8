// Engine::decode_in_slots: rows decode in the fixed slots of a SlotDecoder;
// the host reads their progress every few steps, takes finished rows out and
// gives their slots to waiting rows (continuous batching).
#include <algorithm>
#include <deque>
#include <optional>
#include <random>
#include <set>

#include "model/decode_graphs.h"
#include "model/device_memory.h"
#include "model/engine.h"
#include "model/engine_call.h"
#include "model/slot_decoder.h"

namespace grpo::model {

namespace {

int64_t round_up(int64_t n, int64_t step) { return (n + step - 1) / step * step; }

// The batch a step runs: the smallest power of two holding the occupied
// slots, so the few shapes met are each captured once.
int64_t batch_bucket(int64_t occupied_to, int64_t slots) {
  int64_t b = 1;
  while (b < occupied_to) b *= 2;
  return std::min(b, slots);
}

// What a captured step reads of the model by address: its parameters and
// its buffers (the rotary inv_freq, which the step prelude reads; a move
// to another dtype gives it new memory).
std::vector<const void*> storage_of(const CausalLM& model) {
  std::vector<const void*> out;
  for (const auto& p : model->parameters()) out.push_back(p.data_ptr());
  for (const auto& b : model->buffers()) out.push_back(b.data_ptr());
  return out;
}

// The sampling settings a captured step bakes in.
bool same_filters(const SamplingParams& a, const SamplingParams& b) {
  return a.temperature == b.temperature && a.top_p == b.top_p && a.top_k == b.top_k && a.min_p == b.min_p &&
         a.repetition_penalty == b.repetition_penalty;
}

constexpr int64_t kSlotMarginBytes = int64_t{1} << 30;

}  // namespace

// A decoder large enough for this call, kept for the next ones: its shape
// only grows, so the graphs captured for it stay valid across calls. On a GPU
// the memory budget may hold fewer slots than asked: a decoder cut to that
// count still serves calls that ask for more (the budget holds no more), and a
// kept shape that would cost this call slots (one earlier call's long
// capacity) gives way to this call's own.
SlotDecoder& Engine::slot_decoder(const EngineCall& call) {
  const at::TensorOptions weights = model_->model->embed_tokens->weight.options();
  const auto rows = static_cast<int64_t>(call.out.size());
  int64_t longest_prompt = 0, stop_width = 1;
  for (const auto& r : call.requests) {
    longest_prompt = std::max(longest_prompt, static_cast<int64_t>(r.prompt_ids.size()));
    stop_width = std::max(stop_width, static_cast<int64_t>(r.stop_ids.size()));
  }
  SlotShape need;
  need.slots = batch_bucket(rows, options_.max_slots);
  need.capacity = round_up(longest_prompt + call.max_steps, 128);
  need.max_new = round_up(call.max_steps, 64);
  need.stop_width = round_up(stop_width, 4);
  need.top_logprobs = std::min(call.params.top_logprobs, model_->config().vocab_size);
  need.seen = call.params.repetition_penalty != 1.0;
  SlotShape served = need;
  if (slots_ && slots_cut_by_memory_) served.slots = std::min(served.slots, slots_->shape().slots);
  if (slots_ && same_filters(slots_->params(), call.params) && slots_->shape().holds(served)) {
    std::vector<const void*> storage = storage_of(model_);
    if (storage != captured_weights_) graphs_->clear();  // weights replaced, not updated in place
    captured_weights_ = std::move(storage);
    return *slots_;
  }
  SlotShape merged = need;
  const bool can_merge = slots_ && slots_->shape().top_logprobs == need.top_logprobs && slots_->shape().seen == need.seen;
  if (can_merge) {
    merged.slots = std::max(need.slots, slots_->shape().slots);
    merged.capacity = std::max(need.capacity, slots_->shape().capacity);
    merged.max_new = std::max(need.max_new, slots_->shape().max_new);
    merged.stop_width = std::max(need.stop_width, slots_->shape().stop_width);
  }
  graphs_->clear();
  slots_.reset();
  SlotShape shape = merged;
  slots_cut_by_memory_ = false;
  // On a GPU, no more slots than the memory budget holds: the share of the
  // device gpu_memory_utilization gives this process, less what its tensors
  // hold, and never more than it can still obtain (another process on the
  // GPU, the CUDA context, cuBLAS and NCCL workspaces), less a margin for
  // those that come later.
  const at::Device device = weights.device();
  if (auto capacity = device_capacity(device)) {
    const double held = device_memory(device) ? device_memory(device)->allocated_gb * (1 << 30) : 0.0;
    const double budget = std::min(options_.memory_fraction * static_cast<double>(capacity->total) - held,
                                   static_cast<double>(capacity->obtainable - kSlotMarginBytes));
    const int64_t position_bytes = SlotCache::bytes_per_position(model_->config(), weights.dtype().toScalarType());
    // A slot's keys and values, its record of ids, and its row of one step's temporaries: the float32
    // logits, their sorted copy and indices for top-p, the softmax (about 40 bytes a vocabulary entry).
    auto per_slot = [&](const SlotShape& s) {
      return static_cast<double>(s.capacity * position_bytes + (s.seen ? model_->config().vocab_size : 0) +
                                 s.max_new * (20 + 12 * s.top_logprobs) + 40 * model_->config().vocab_size);
    };
    auto fit = [&](const SlotShape& s) { return static_cast<int64_t>(budget / per_slot(s)); };
    if (can_merge && fit(merged) < need.slots) shape = need;
    const int64_t fits = fit(shape);
    if (fits < 1)
      throw std::runtime_error("out of memory for decoding: one row of " + std::to_string(shape.capacity) +
                               " positions needs " + std::to_string(per_slot(shape) / (1 << 20)) + " MiB and " +
                               std::to_string(budget / (1 << 20)) + " MiB are left under gpu_memory_utilization " +
                               std::to_string(options_.memory_fraction) +
                               "; raise vllm_gpu_memory_utilization or lower max_completion_length");
    slots_cut_by_memory_ = fits < shape.slots;
    shape.slots = std::min(shape.slots, fits);
  }
  slots_ = std::make_unique<SlotDecoder>(model_, shape, call.params);
  captured_weights_ = storage_of(model_);
  return *slots_;
}

void Engine::decode_in_slots(EngineCall& call) {
  const auto& requests = call.requests;
  std::vector<Completion>& out = call.out;
  const at::Device device = model_->model->embed_tokens->weight.device();
  SlotDecoder& dec = slot_decoder(call);
  const int64_t S = dec.shape().slots;
  const int64_t every = options_.readback_every > 0 ? options_.readback_every : (device.is_cpu() ? 1 : 8);
  stats_.slots = true;
  stats_.slot_count = S;
  const int64_t replays_before = graphs_->replays();

  std::deque<size_t> waiting;  // completions, in order
  for (size_t i = 0; i < out.size(); ++i) waiting.push_back(i);
  std::set<int64_t> free;
  for (int64_t s = 0; s < S; ++s) free.insert(s);
  std::vector<int64_t> row_of(static_cast<size_t>(S), -1);  // slot -> completion
  std::vector<int64_t> known(static_cast<size_t>(S), 0);    // ids sampled as of the last read
  std::vector<int64_t> checked(static_cast<size_t>(S), 0);  // ids checked for stop strings
  // Where each prompt's keys and values sit in the prefill's cache: read
  // from the device once, so admitting rows reads nothing back.
  const std::vector<std::vector<int64_t>> prompt_positions = call.prompts.real_positions();
  bool first_admission = true;

  auto admit_waiting = [&] {
    std::vector<SlotAdmission> rows;
    std::vector<int64_t> prompt_rows, slots;
    while (!free.empty() && !waiting.empty()) {
      const size_t i = waiting.front();
      waiting.pop_front();
      const Completion& c = out[i];
      if (call.cancelled(c.request)) continue;  // never started
      const int64_t slot = *free.begin();
      free.erase(free.begin());
      row_of[static_cast<size_t>(slot)] = static_cast<int64_t>(i);
      known[static_cast<size_t>(slot)] = 1;
      checked[static_cast<size_t>(slot)] = 0;
      SlotAdmission a;
      a.slot = slot;
      a.prompt = &requests[c.request].prompt_ids;
      a.budget = call.budget(c);
      a.stop_ids = requests[c.request].stop_ids;
      std::mt19937_64 rng(sequence_seed(requests[c.request].seed, static_cast<uint64_t>(c.index)));
      std::vector<std::mt19937_64*> one{&rng};
      for (int64_t t = 0; t < a.budget; ++t) a.draws.push_back(uniform_draws(one).front());
      rows.push_back(std::move(a));
      prompt_rows.push_back(static_cast<int64_t>(c.request));
      slots.push_back(slot);
    }
    if (rows.empty()) return;
    if (!first_admission) stats_.refills += static_cast<int64_t>(rows.size());
    ++stats_.admissions;
    first_admission = false;
    // Every admitted row's prompt into its slot in one gather and one copy
    // per layer (a copy per prompt costs a GPU hundreds of launches a call).
    // Shorter prompts repeat their last position: those slot positions are
    // decoded over before they are read.
    size_t longest = 0;
    for (int64_t p : prompt_rows) longest = std::max(longest, prompt_positions[static_cast<size_t>(p)].size());
    at::Tensor positions = at::empty({static_cast<int64_t>(prompt_rows.size()), static_cast<int64_t>(longest)}, at::kLong);
    auto at_positions = positions.accessor<int64_t, 2>();
    for (size_t i = 0; i < prompt_rows.size(); ++i) {
      const std::vector<int64_t>& real = prompt_positions[static_cast<size_t>(prompt_rows[i])];
      for (size_t t = 0; t < longest; ++t)
        at_positions[static_cast<int64_t>(i)][static_cast<int64_t>(t)] = real[std::min(t, real.size() - 1)];
    }
    const at::Tensor prompt_index = at::tensor(prompt_rows, at::kLong).to(device);
    dec.cache().load_rows(at::tensor(slots, at::kLong).to(device), call.prompts, prompt_index, positions.to(device));
    dec.admit(rows, call.last.index_select(0, prompt_index));
  };

  // What the occupied slots sampled, read back once per read of progress
  // and only when a row leaves or stop strings are searched.
  struct OnHost {
    at::Tensor ids, logp, top_ids, top_logp;  // [b, width(, k)]
  };
  std::optional<OnHost> host;
  int64_t host_b = 0, host_width = 0;
  auto on_host = [&]() -> const OnHost& {
    if (!host) {
      host.emplace();
      host->ids = dec.ids(host_b, host_width).to(at::kCPU).to(at::kInt).contiguous();
      host->logp = dec.logprobs(host_b, host_width).to(at::kCPU).contiguous();
      if (dec.shape().top_logprobs > 0) {
        host->top_ids = dec.top_ids(host_b, host_width).to(at::kCPU).to(at::kInt).contiguous();
        host->top_logp = dec.top_logprobs(host_b, host_width).to(at::kCPU).contiguous();
      }
    }
    return *host;
  };

  // Takes the row of `slot` out: its first n ids into its completion. Without
  // a reason given, the row stopped if its last id is a stop id, else ran
  // out of budget.
  auto finish = [&](int64_t slot, int64_t n, std::optional<FinishReason> reason, bool keep) {
    Completion& c = out[static_cast<size_t>(row_of[static_cast<size_t>(slot)])];
    const OnHost& h = on_host();
    const int32_t* ids = h.ids.data_ptr<int32_t>() + slot * host_width;
    const float* logp = h.logp.data_ptr<float>() + slot * host_width;
    c.ids.assign(ids, ids + n);
    c.logprobs.assign(logp, logp + n);
    if (h.top_ids.defined()) {
      const int64_t k = h.top_ids.size(2);
      const int32_t* top_ids = h.top_ids.data_ptr<int32_t>() + slot * host_width * k;
      const float* top_logp = h.top_logp.data_ptr<float>() + slot * host_width * k;
      for (int64_t t = 0; t < n; ++t) {
        c.top_ids.emplace_back(top_ids + t * k, top_ids + (t + 1) * k);
        c.top_logprobs.emplace_back(top_logp + t * k, top_logp + (t + 1) * k);
      }
    }
    if (!reason) {
      const auto& stops = requests[c.request].stop_ids;
      reason = std::find(stops.begin(), stops.end(), c.ids.back()) != stops.end() ? FinishReason::Stop
                                                                                  : FinishReason::Length;
    }
    c.finish = *reason;
    const auto& prompt = requests[c.request].prompt_ids;
    if (keep && call.reuse.keep) keep_for_next_call(dec.cache().read(slot, static_cast<int64_t>(prompt.size()) + n - 1), prompt, c.ids);
    row_of[static_cast<size_t>(slot)] = -1;
    free.insert(slot);
  };

  // Once no row waits, finished rows leave holes that no row fills: when the
  // rows left fit in half the batch a step runs over, they move into the
  // lowest slots (a copy of their keys and values), so the steps that remain
  // run over half as many.
  auto compact = [&] {
    std::vector<int64_t> occupied;
    for (int64_t s = 0; s < S; ++s)
      if (row_of[static_cast<size_t>(s)] >= 0) occupied.push_back(s);
    if (occupied.empty() || 2 * static_cast<int64_t>(occupied.size()) > batch_bucket(occupied.back() + 1, S)) return;
    std::vector<int64_t> from, to;
    for (auto hole = free.begin(); hole != free.end() && !occupied.empty() && *hole < occupied.back(); ++hole) {
      from.push_back(occupied.back());
      to.push_back(*hole);
      occupied.pop_back();
    }
    if (from.empty()) return;
    dec.move(from, to);
    for (size_t i = 0; i < from.size(); ++i) {
      const auto f = static_cast<size_t>(from[i]), t = static_cast<size_t>(to[i]);
      row_of[t] = row_of[f];
      known[t] = known[f];
      checked[t] = checked[f];
      row_of[f] = -1;
      free.erase(to[i]);
      free.insert(from[i]);
    }
    ++stats_.compactions;
  };

  admit_waiting();
  while (true) {
    int64_t occupied_to = 0, remaining = 0, span = 1;
    for (int64_t s = 0; s < S; ++s) {
      const int64_t i = row_of[static_cast<size_t>(s)];
      if (i < 0) continue;
      occupied_to = s + 1;
      remaining = std::max(remaining, call.budget(out[static_cast<size_t>(i)]) - known[static_cast<size_t>(s)]);
    }
    if (occupied_to == 0) break;  // nothing decoding and nothing waiting
    const int64_t b = batch_bucket(occupied_to, S), steps = std::min(every, remaining);
    for (int64_t s = 0; s < occupied_to; ++s) {
      const int64_t i = row_of[static_cast<size_t>(s)];
      if (i < 0) continue;
      const Completion& c = out[static_cast<size_t>(i)];
      // The last position this row may feed before the next read.
      const int64_t last = static_cast<int64_t>(requests[c.request].prompt_ids.size()) +
                           std::min(known[static_cast<size_t>(s)] + steps, call.budget(c)) - 1;
      span = std::max(span, last + 1);
    }
    span = std::min(round_up(span, 128), dec.shape().capacity);
    for (int64_t t = 0; t < steps; ++t) graphs_->step(dec, b, span, device);
    stats_.steps += steps;
    ++stats_.readbacks;
    const at::Tensor progress = dec.read_progress(b).contiguous();
    const int64_t* done = progress.data_ptr<int64_t>();
    const int64_t* generated = done + b;
    host.reset();
    host_b = b;
    host_width = 1;
    for (int64_t s = 0; s < b; ++s)
      if (row_of[static_cast<size_t>(s)] >= 0) host_width = std::max(host_width, generated[s]);
    const bool stop_strings = !call.params.stop_strings.empty();
    std::vector<int64_t> retired;
    for (int64_t s = 0; s < b; ++s) {
      const int64_t i = row_of[static_cast<size_t>(s)];
      if (i < 0) continue;
      const Completion& c = out[static_cast<size_t>(i)];
      const int64_t n = generated[s];
      known[static_cast<size_t>(s)] = n;
      if (stop_strings) {  // the first id whose text completes a stop string ends the row
        const int32_t* row = on_host().ids.data_ptr<int32_t>() + s * host_width;
        std::vector<int32_t> so_far(row, row + checked[static_cast<size_t>(s)]);
        int64_t hit = -1;
        for (int64_t t = checked[static_cast<size_t>(s)]; t < n && hit < 0; ++t) {
          so_far.push_back(row[t]);
          if (call.hits_stop_string(*tokenizer_, so_far)) hit = t + 1;
        }
        checked[static_cast<size_t>(s)] = n;
        if (hit > 0) {  // at or before any stop id: the device stops at those
          if (!done[s]) retired.push_back(s);
          finish(s, hit, FinishReason::Stop, true);
          continue;
        }
      }
      if (done[s]) {
        finish(s, n, std::nullopt, true);
      } else if (call.cancelled(c.request)) {
        retired.push_back(s);
        finish(s, n, FinishReason::Length, false);
      }
    }
    if (!retired.empty()) dec.retire(retired);
    admit_waiting();
    if (waiting.empty()) compact();
  }
  stats_.graphs = graphs_->captured();
  stats_.replays = graphs_->replays() - replays_before;
}

}  // namespace grpo::model
