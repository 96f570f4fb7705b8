#include "trainer/overlapped_all_reduce.h"

#include <spdlog/spdlog.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>

namespace grpo::trainer {

OverlappedAllReduce::OverlappedAllReduce(dist::World& world, std::vector<at::Tensor> trained, int64_t bucket_bytes)
    : world_(world), trained_(std::move(trained)), buckets_(runs_from_last(trained_, bucket_bytes)),
      bucket_of_(trained_.size()) {
  for (size_t b = 0; b < buckets_.size(); ++b)
    for (size_t i = buckets_[b].first; i < buckets_[b].second; ++i) bucket_of_[i] = b;
  for (size_t i = 0; i < trained_.size(); ++i) {
    // The tensor holds its accumulator weakly: held here, it and its hook
    // live as long as this object.
    std::shared_ptr<torch::autograd::Node> acc = torch::autograd::impl::grad_accumulator(trained_[i]);
    if (!acc) continue;  // not a leaf that requires grad: never final, counted as zeros
    const uintptr_t key = acc->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
        [this, i](const torch::autograd::variable_list& outputs, const torch::autograd::variable_list&) {
          on_final(i);
          return outputs;
        }));
    hooks_.emplace_back(std::move(acc), key);
  }
}

OverlappedAllReduce::~OverlappedAllReduce() {
  for (auto& [acc, key] : hooks_) acc->del_post_hook(key);
}

void OverlappedAllReduce::arm(const std::string& what) {
  std::lock_guard<std::mutex> lock(mu_);
  reset(what);
  armed_ = true;
}

void OverlappedAllReduce::reset(const std::string& what) {
  what_ = what;
  final_.assign(trained_.size(), false);
  pending_.clear();
  for (const ParamRange& r : buckets_) pending_.push_back(r.second - r.first);
  flat_.assign(buckets_.size(), at::Tensor());
  next_ = 0;
  late_ = false;
  error_ = nullptr;
}

// The accumulator has added this backward's part: the gradient is final.
void OverlappedAllReduce::on_final(size_t param) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!armed_ || error_) return;
  if (final_[param]) {  // accumulated twice in one backward (a nested one)
    if (bucket_of_[param] < next_) late_ = true;
    return;
  }
  final_[param] = true;
  --pending_[bucket_of_[param]];
  try {
    start_ready();
  } catch (...) {
    error_ = std::current_exception();  // an exception inside backward would lose its type; finish() rethrows it
  }
}

void OverlappedAllReduce::start_ready() {
  while (next_ < buckets_.size() && pending_[next_] == 0) start(next_++);
}

void OverlappedAllReduce::start(size_t bucket) {
  flat_[bucket] = flat_gradients(trained_, buckets_[bucket]);
  std::vector<at::Tensor> one{flat_[bucket]};
  world_.start_all_reduce_sum(one, dist::Channel::Train, what_);
}

int64_t OverlappedAllReduce::finish(int64_t local_active_tokens, const std::string& what) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!armed_) reset(what);
  armed_ = false;  // the next step's first backward adds to gradients that are not final
  if (error_) std::rethrow_exception(error_);
  overlapped_ = next_;
  if (late_) {
    // A gradient grew after its bucket had started (a parameter accumulated
    // by two backward passes in one step): those sums are stale. Every rank
    // runs the same graph, so every rank gets here and starts all again.
    world_.finish_started();
    spdlog::warn("{}: a gradient grew after its bucket's all-reduce had started; reduced again after backward", what_);
    overlapped_ = next_ = 0;
  }
  spdlog::debug("{}: {} of {} bucket(s) started during backward", what_, overlapped_, buckets_.size());
  while (next_ < buckets_.size()) start(next_++);
  std::vector<at::Tensor> active{at::full({1}, static_cast<double>(local_active_tokens), at::kDouble)};
  world_.start_all_reduce_sum(active, dist::Channel::Train, what_ + " (loss-carrying tokens)");
  world_.finish_started();
  for (size_t b = 0; b < buckets_.size(); ++b) set_gradients(trained_, buckets_[b], flat_[b], 1.0 / world_.size());
  flat_.assign(buckets_.size(), at::Tensor());
  return static_cast<int64_t>(active[0].item<double>());
}

}  // namespace grpo::trainer
