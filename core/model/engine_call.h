// What one Engine::generate call decodes from, shared by its two decoders
// (engine.cpp: a batch that shrinks as rows finish; engine_slots.cpp: fixed
// slots refilled from waiting rows). Internal to the engine.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "model/engine.h"
#include "tokenizer/tokenizer.h"

namespace grpo::model {

struct EngineCall {
  const std::vector<GenerateRequest>& requests;
  const SamplingParams& params;
  PrefixReuse reuse;
  std::vector<Completion>& out;  // one per row, request order, copies in index order
  KvCache prompts;               // the distinct prompts' prefill: row p is request p
  at::Tensor last;               // [P, V] their last logits
  int64_t max_steps = 0;         // the largest budget of a row
  size_t stop_window = 1;        // tokens whose text can hold a stop string

  // A request may ask for fewer tokens than params allow (a multi-turn
  // conversation near its total budget): its rows end there.
  int64_t budget(const Completion& c) const {
    const int64_t own = requests[c.request].max_new_tokens;
    return own >= 0 ? std::min(own, params.max_new_tokens) : params.max_new_tokens;
  }
  bool cancelled(size_t request) const {
    const std::atomic<bool>* flag = requests[request].cancelled;
    return flag && flag->load(std::memory_order_relaxed);
  }
  // A stop string ends a completion once it appears in the text of its last
  // tokens (each token is at least one byte, so a window of len + 1 tokens
  // holds any stop string that the newest token completes).
  bool hits_stop_string(const tok::Tokenizer& tokenizer, const std::vector<int32_t>& ids) const {
    std::vector<int32_t> tail(ids.end() - static_cast<std::ptrdiff_t>(std::min(stop_window, ids.size())), ids.end());
    const std::string text = tokenizer.decode_sampled(tail);
    for (const auto& s : params.stop_strings)
      if (!s.empty() && text.find(s) != std::string::npos) return true;
    return false;
  }
};

}  // namespace grpo::model
