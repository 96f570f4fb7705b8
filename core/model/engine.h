// Batched sampling with a KV cache. Each distinct prompt is prefilled once
// and its cache shared by its n copies. Rows then decode in one of two ways
// (EngineOptions::decode): eagerly, in a batch that finished rows leave at
// once (the CPU's fastest), or in fixed slots with everything of a row on the
// device and steps replayed as CUDA graphs, a finished row's slot taken by a
// waiting one (model/slot_decoder.h; a GPU's fastest).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/prefix_store.h"
#include "model/sampling.h"
#include "model/transformer.h"

namespace grpo::tok {
class Tokenizer;
}

namespace grpo::model {

struct GenerateRequest {
  std::vector<int32_t> prompt_ids;
  int64_t n = 1;                 // completions of this prompt
  uint64_t seed = 0;             // copy i samples with sequence_seed(seed, i)
  std::vector<int32_t> stop_ids; // e.g. eos; the stop id is kept as the last id
  int64_t max_new_tokens = -1;   // this request's budget when below params.max_new_tokens; -1: params'
  // When set (a server's client went away, the server stops), this request's
  // rows leave the batch before the next decode step, as finished rows do,
  // so the rest of the batch goes on and nothing more is spent on them.
  const std::atomic<bool>* cancelled = nullptr;
};

enum class FinishReason { Stop, Length };

struct Completion {
  size_t request = 0;            // index into the requests
  int64_t index = 0;             // 0..n-1 within the request
  std::vector<int32_t> ids;      // generated ids
  std::vector<float> logprobs;   // per id, under softmax(logits / temperature)
  FinishReason finish = FinishReason::Length;
  // Per id, the params.top_logprobs most likely tokens and their logprobs
  // (empty when top_logprobs is 0): what a server's `logprobs: N` returns.
  std::vector<std::vector<int32_t>> top_ids;
  std::vector<std::vector<float>> top_logprobs;
};

// What one call hands on to the next: multi-turn rollouts call the engine
// once per turn, and turn t + 1's prompt is turn t's prompt, its completion
// and what the conversation appended.
struct PrefixReuse {
  bool continues = false;  // the prompts may extend the previous call's completions, under the same weights
  bool keep = false;       // the next call may extend this call's completions: keep their keys and values
};

struct EngineOptions {
  enum class Decode { Auto, Eager, Slots };
  Decode decode = Decode::Auto;  // Auto: slots on a GPU, eager on the CPU
  // Slots: rows decoded at once (vLLM's max_num_seqs); the rows of a call
  // beyond them wait and take the slots of finished rows.
  int64_t max_slots = 256;
  // Slots on a GPU: the share of the device's memory that the process may
  // hold once the slots' keys and values are allocated (vLLM's
  // gpu_memory_utilization); fewer slots are used when max_slots do not fit.
  double memory_fraction = 0.9;
  // Slots: decoding steps between two reads of the rows' progress (0: 1 on
  // the CPU, 8 on a GPU, where each read waits for the device).
  int64_t readback_every = 0;
  bool cuda_graphs = true;  // slots on a GPU: replay steps as CUDA graphs (vLLM's enforce_eager off)
  // Slots: let the cache and the graphs go when a call ends, so that training
  // gets their memory back (vLLM's sleep mode); the next call allocates and
  // captures again.
  bool release_after_call = false;
  // New prompt tokens (padded) one prefill forward takes at most (vLLM's
  // max_num_batched_tokens): more distinct prompts are prefilled a batch of
  // them at a time, and a longer prompt in chunks of it, so the forward's
  // activations stay bounded however many prompts a call has and however
  // long they are. 0: all at once.
  int64_t max_prefill_tokens = 16384;
};

// How the last call decoded.
struct DecodeStats {
  bool slots = false;       // in slots (else eagerly)
  int64_t slot_count = 0;   // slots of the decoder
  int64_t steps = 0;        // decoding steps (each over all occupied slots)
  int64_t readbacks = 0;    // reads of the rows' progress
  int64_t refills = 0;      // rows that took a finished row's slot
  int64_t admissions = 0;   // times rows took slots (each loads its rows' prompts in one gather per layer)
  int64_t compactions = 0;  // times the rows left were packed into the first slots
  int64_t graphs = 0;       // CUDA graphs held after the call
  int64_t replays = 0;      // steps that replayed one
  int64_t prefill_forwards = 0;  // forwards the prompts were prefilled in (EngineOptions::max_prefill_tokens)
};

class SlotDecoder;
class DecodeGraphs;
struct EngineCall;

class Engine {
 public:
  // `tokenizer` is needed only for stop strings; it must outlive the engine.
  explicit Engine(CausalLM model, const tok::Tokenizer* tokenizer = nullptr, EngineOptions options = {});
  ~Engine();

  // Completions in request order, copies in index order. Without
  // reuse.continues nothing of an earlier call is used.
  std::vector<Completion> generate(const std::vector<GenerateRequest>& requests, const SamplingParams& params,
                                   PrefixReuse reuse = {});

  CausalLM& model() { return model_; }

  // The last call's distinct prompts: ids prefilled, and ids whose keys and
  // values came from the previous call's completions instead.
  int64_t prefilled_ids() const { return prefilled_ids_; }
  int64_t reused_ids() const { return reused_ids_; }
  const DecodeStats& decode_stats() const { return stats_; }
  const EngineOptions& options() const { return options_; }
  bool holds_slots() const { return slots_ != nullptr; }  // a slot cache kept for the next call

 private:
  void warm_up();
  void prefill(EngineCall& call);
  void decode_eagerly(EngineCall& call);
  void decode_in_slots(EngineCall& call);
  SlotDecoder& slot_decoder(const EngineCall& call);
  void keep_for_next_call(std::vector<std::pair<at::Tensor, at::Tensor>> kv, const std::vector<int32_t>& prompt,
                          const std::vector<int32_t>& sampled);
  CausalLM model_;
  const tok::Tokenizer* tokenizer_;
  EngineOptions options_;
  DecodeStats stats_;
  std::unique_ptr<SlotDecoder> slots_;
  bool slots_cut_by_memory_ = false;  // slots_ has fewer slots than asked: the budget held no more
  std::unique_ptr<DecodeGraphs> graphs_;
  std::vector<const void*> captured_weights_;  // the parameters' storage the graphs read
  PrefixStore kept_{int64_t{2} << 30};  // at most 2 GiB of keys and values
  int64_t prefilled_ids_ = 0, reused_ids_ = 0;
};

}  // namespace grpo::model
