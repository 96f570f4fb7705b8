#include "model/slot_decoder.h"

#include <algorithm>

#include "model/cuda_kernels.h"
#include "model/fused_scope.h"

namespace grpo::model {

bool SlotShape::holds(const SlotShape& need) const {
  return slots >= need.slots && capacity >= need.capacity && max_new >= need.max_new &&
         stop_width >= need.stop_width && top_logprobs == need.top_logprobs && seen == need.seen;
}

SlotDecoder::SlotDecoder(CausalLM model, const SlotShape& shape, const SamplingParams& params)
    : model_(std::move(model)),
      shape_(shape),
      params_(params),
      cache_(model_->config(), shape.slots, shape.capacity, model_->model->embed_tokens->weight.options()) {
  const at::TensorOptions on = at::TensorOptions().device(model_->model->embed_tokens->weight.device());
  const at::TensorOptions longs = on.dtype(at::kLong), floats = on.dtype(at::kFloat);
  const int64_t S = shape.slots;
  tokens_ = at::zeros({S}, longs);
  positions_ = at::zeros({S}, longs);
  generated_ = at::zeros({S}, longs);
  budget_ = at::zeros({S}, longs);
  done_ = at::ones({S}, on.dtype(at::kBool));  // an empty slot changes nothing
  stop_ids_ = at::full({S, std::max<int64_t>(shape.stop_width, 1)}, -1, longs);
  draws_ = at::zeros({S, shape.max_new}, floats);
  out_ids_ = at::zeros({S, shape.max_new}, longs);
  out_logprobs_ = at::zeros({S, shape.max_new}, floats);
  if (shape.top_logprobs > 0) {
    out_top_ids_ = at::zeros({S, shape.max_new, shape.top_logprobs}, longs);
    out_top_logprobs_ = at::zeros({S, shape.max_new, shape.top_logprobs}, floats);
  }
  if (shape.seen) seen_ = at::zeros({S, model_->config().vocab_size}, on.dtype(at::kBool));
}

void SlotDecoder::admit(const std::vector<SlotAdmission>& rows, const at::Tensor& logits) {
  const auto m = static_cast<int64_t>(rows.size());
  if (m == 0) return;
  const at::Device device = tokens_.device();
  const int64_t W = stop_ids_.size(1), N = shape_.max_new;
  std::vector<int64_t> slots, lengths, budgets;
  at::Tensor stops = at::full({m, W}, -1, at::kLong), draws = at::zeros({m, N}, at::kFloat);
  auto stop_acc = stops.accessor<int64_t, 2>();
  auto draw_acc = draws.accessor<float, 2>();
  for (int64_t i = 0; i < m; ++i) {
    const SlotAdmission& r = rows[static_cast<size_t>(i)];
    slots.push_back(r.slot);
    lengths.push_back(static_cast<int64_t>(r.prompt->size()));
    budgets.push_back(std::min(r.budget, N));
    for (size_t j = 0; j < r.stop_ids.size() && static_cast<int64_t>(j) < W; ++j) stop_acc[i][static_cast<int64_t>(j)] = r.stop_ids[j];
    for (size_t j = 0; j < r.draws.size() && static_cast<int64_t>(j) < N; ++j) draw_acc[i][static_cast<int64_t>(j)] = r.draws[j];
  }
  const at::Tensor idx = at::tensor(slots, at::kLong).to(device), budget = at::tensor(budgets, at::kLong).to(device);
  stops = stops.to(device);
  draws = draws.to(device);
  at::Tensor seen;
  if (seen_.defined()) {
    seen_.index_fill_(0, idx, false);
    for (int64_t i = 0; i < m; ++i) {
      const std::vector<int32_t>& prompt = *rows[static_cast<size_t>(i)].prompt;
      seen_[slots[static_cast<size_t>(i)]].index_fill_(0, at::tensor(prompt, at::kInt).to(device, at::kLong), true);
    }
    seen = seen_.index_select(0, idx);
  }
  Sampled s = sample_with_draws(logits, seen, params_, draws.select(1, 0));
  s.tokens = s.tokens.to(device);
  s.logprobs = s.logprobs.to(device);
  if (seen_.defined()) seen_.index_put_({idx, s.tokens}, true);
  // Row i's first id in column 0; the other columns are written as it decodes.
  auto first_column = [&](const at::Tensor& buffer, const at::Tensor& value) {
    auto sizes = buffer.sizes().vec();
    sizes[0] = m;
    at::Tensor rows_of = at::zeros(sizes, buffer.options());
    rows_of.select(1, 0).copy_(value);
    buffer.index_copy_(0, idx, rows_of);
  };
  first_column(out_ids_, s.tokens);
  first_column(out_logprobs_, s.logprobs);
  if (out_top_ids_.defined()) {
    first_column(out_top_ids_, s.top_ids.to(device));
    first_column(out_top_logprobs_, s.top_logprobs.to(device));
  }
  tokens_.index_copy_(0, idx, s.tokens);
  positions_.index_copy_(0, idx, at::tensor(lengths, at::kLong).to(device));
  generated_.index_fill_(0, idx, 1);
  budget_.index_copy_(0, idx, budget);
  stop_ids_.index_copy_(0, idx, stops);
  draws_.index_copy_(0, idx, draws);
  done_.index_copy_(0, idx, (s.tokens.unsqueeze(1) == stops).any(1) | (budget <= 1));
}

void SlotDecoder::step(int64_t b, int64_t span) {
  auto first = [b](const at::Tensor& t) { return t.narrow(0, 0, b); };
  at::Tensor logits = model_->decode_slots(first(tokens_), first(positions_), cache_, span);
  at::Tensor generated = first(generated_);
  at::Tensor column = generated.clamp_max(shape_.max_new - 1).unsqueeze(1);  // [b, 1]: where this id goes
  Sampled s = sample_with_draws(logits, seen_.defined() ? first(seen_) : at::Tensor(), params_,
                                first(draws_).gather(1, column).squeeze(1));
  // Without top log-probabilities or seen ids to keep, the record below is
  // one kernel on a GPU while sampling.
  if (!out_top_ids_.defined() && !seen_.defined() && tokens_.is_cuda() && gpu::enabled() && FusedScope::open()) {
    gpu::record_step(s.tokens, s.logprobs, first(budget_), first(stop_ids_), first(done_), generated,
                     first(positions_), first(tokens_), first(out_ids_), first(out_logprobs_));
    return;
  }
  const at::Tensor live = first(done_).logical_not();
  // Writes `value` [b, ...] into column `column` of a per-slot buffer, except
  // in done rows, which keep what they hold.
  auto record = [&](const at::Tensor& buffer, const at::Tensor& value) {
    at::Tensor rows = first(buffer);  // [b, max_new] or [b, max_new, k]
    at::Tensor index = column, keep = live;
    if (rows.dim() == 3) {
      index = column.unsqueeze(2).expand({b, 1, rows.size(2)});
      keep = live.unsqueeze(1);
    }
    const at::Tensor old = rows.gather(1, index).squeeze(1);
    rows.scatter_(1, index, at::where(keep, value, old).unsqueeze(1));
  };
  record(out_ids_, s.tokens);
  record(out_logprobs_, s.logprobs);
  if (out_top_ids_.defined()) {
    record(out_top_ids_, s.top_ids);
    record(out_top_logprobs_, s.top_logprobs);
  }
  if (seen_.defined()) first(seen_).scatter_(1, s.tokens.unsqueeze(1), true);
  const at::Tensor hit = (s.tokens.unsqueeze(1) == first(stop_ids_)).any(1);
  const at::Tensor advance = live.to(at::kLong);
  generated.add_(advance);
  first(done_).logical_or_(live & (hit | (generated >= first(budget_))));
  first(positions_).add_(advance);
  first(tokens_).copy_(at::where(live, s.tokens, first(tokens_)));
}

void SlotDecoder::retire(const std::vector<int64_t>& slots) {
  done_.index_fill_(0, at::tensor(slots, at::kLong).to(done_.device()), true);
}

void SlotDecoder::move(const std::vector<int64_t>& from, const std::vector<int64_t>& to) {
  const at::Tensor src = at::tensor(from, at::kLong).to(done_.device()), dst = at::tensor(to, at::kLong).to(done_.device());
  for (at::Tensor* buffer : {&tokens_, &positions_, &generated_, &budget_, &done_, &stop_ids_, &draws_, &out_ids_,
                             &out_logprobs_, &out_top_ids_, &out_top_logprobs_, &seen_})
    if (buffer->defined()) buffer->index_copy_(0, dst, buffer->index_select(0, src));
  cache_.move(src, dst);
  done_.index_fill_(0, src, true);
}

at::Tensor SlotDecoder::read_progress(int64_t b) const {
  return at::stack({done_.narrow(0, 0, b).to(at::kLong), generated_.narrow(0, 0, b)}).to(at::kCPU);
}

}  // namespace grpo::model
