#include "trainer/data_parallel.h"

#include <ATen/core/grad_mode.h>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include <torch/types.h>  // before clip_grad.h, which uses torch::Tensor without including it
#include <torch/nn/utils/clip_grad.h>

#include "trainer/gradient_buckets.h"

namespace grpo::trainer {

namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// A metric is a sum over the ranks when it counts failures, else a mean.
bool is_count(const std::string& name) { return ends_with(name, "internal_errors") || ends_with(name, "handler_errors"); }

constexpr const char* kStop = "\x01stop";  // no metric starts with a control character

// A tensor's memory as bytes, to move parameters of any dtype alike.
at::Tensor as_bytes(const at::Tensor& t) { return t.detach().reshape({-1}).view(at::kByte); }

}  // namespace

ParameterSync::ParameterSync(dist::World& world, std::vector<at::Tensor> trained, int zero_stage, int64_t bucket_bytes)
    : world_(world), trained_(std::move(trained)), owner_(trained_.size(), world.rank()), stage_(zero_stage),
      bucket_bytes_(bucket_bytes) {
  if (world_.distributed() && stage_ < 2)
    overlapped_ = std::make_unique<OverlappedAllReduce>(world_, trained_, bucket_bytes_);
  if (!sharded()) return;
  // Contiguous ranges of about equal size: parameter i goes to the rank whose
  // share of the total its middle falls in.
  double total = 0;
  for (const auto& p : trained_) total += static_cast<double>(p.numel());
  double before = 0;
  for (size_t i = 0; i < trained_.size(); ++i) {
    const double middle = before + static_cast<double>(trained_[i].numel()) / 2;
    owner_[i] = std::min(world_.size() - 1, static_cast<int>(middle * world_.size() / std::max(1.0, total)));
    before += static_cast<double>(trained_[i].numel());
  }
}

std::vector<at::Tensor> ParameterSync::optimized() const {
  std::vector<at::Tensor> out;
  for (size_t i = 0; i < trained_.size(); ++i)
    if (owner_[i] == world_.rank()) out.push_back(trained_[i]);
  return out;
}

void ParameterSync::before_last_backward(const std::string& what) {
  if (overlapped_) overlapped_->arm(what);
}

int64_t ParameterSync::combine_gradients(int64_t local_active_tokens, const std::string& what) {
  if (overlapped_) return overlapped_->finish(local_active_tokens, what);
  if (!sharded() || stage_ < 2) return average_gradients(world_, trained_, local_active_tokens, bucket_bytes_, what);
  std::vector<at::Tensor> active{at::full({1}, static_cast<double>(local_active_tokens), at::kDouble)};
  world_.all_reduce_sum(active, dist::Channel::Train, what + " (loss-carrying tokens)");
  // Each run of one owner's gradients summed on that owner, in float32.
  for (const auto& [a, b] : runs(trained_, owner_, bucket_bytes_)) {
    std::vector<at::Tensor> flat{flat_gradients(trained_, {a, b})};
    world_.reduce_sum(flat, owner_[a], dist::Channel::Train, what);
    if (owner_[a] == world_.rank()) {
      set_gradients(trained_, {a, b}, flat[0], 1.0 / world_.size());
    } else {
      for (size_t i = a; i < b; ++i) trained_[i].mutable_grad().reset();  // another rank's: not kept here
    }
  }
  return static_cast<int64_t>(active[0].item<double>());
}

double ParameterSync::clip(double max_norm, const std::string& what) {
  if (!sharded() || stage_ < 2) return torch::nn::utils::clip_grad_norm_(trained_, max_norm);
  // Each rank holds its own parameters' gradients: the squares summed over all.
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> owned;
  at::Tensor squares = at::zeros({1}, at::kDouble);  // summed where the gradients are, read once
  for (size_t i = 0; i < trained_.size(); ++i)
    if (owner_[i] == world_.rank() && trained_[i].grad().defined()) {
      owned.push_back(trained_[i].grad());
      if (owned.size() == 1) squares = squares.to(owned.back().device());
      // Read in float32 where it lies, no copy: a float64 copy of a bfloat16 embedding's gradient is 4 times its size.
      squares += at::linalg_vector_norm(owned.back(), 2, std::nullopt, false, at::kFloat).to(at::kDouble).square();
    }
  std::vector<at::Tensor> total{squares.to(at::kCPU)};
  world_.all_reduce_sum(total, dist::Channel::Train, what + " (gradient norm)");
  const double norm = std::sqrt(total[0].item<double>());
  const double coef = max_norm / (norm + 1e-6);  // as clip_grad_norm_
  if (coef < 1.0)
    for (at::Tensor& g : owned) g.mul_(coef);
  return norm;
}

void ParameterSync::after_step(const std::string& what) {
  if (!sharded()) return;
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < trained_.size(); ++i)
    if (owner_[i] != world_.rank()) trained_[i].mutable_grad().reset();
  for (const auto& [a, b] : runs(trained_, owner_, bucket_bytes_)) {
    std::vector<at::Tensor> bytes;
    for (size_t i = a; i < b; ++i) bytes.push_back(as_bytes(trained_[i]));
    std::vector<at::Tensor> flat{at::cat(bytes).contiguous()};
    world_.broadcast(flat, owner_[a], dist::Channel::Train, what);
    if (owner_[a] == world_.rank()) continue;
    int64_t offset = 0;
    for (size_t i = a; i < b; ++i) {
      at::Tensor dst = as_bytes(trained_[i]);
      dst.copy_(flat[0].narrow(0, offset, dst.numel()));
      offset += dst.numel();
    }
  }
}

int64_t optimizer_state_bytes(const torch::optim::AdamW& optimizer) {
  int64_t bytes = 0;
  for (const auto& entry : optimizer.state()) {
    const auto* s = dynamic_cast<const torch::optim::AdamWParamState*>(entry.second.get());
    if (!s) continue;
    for (const at::Tensor& t : {s->exp_avg(), s->exp_avg_sq(), s->max_exp_avg_sq()})
      if (t.defined()) bytes += t.nbytes();
  }
  return bytes;
}

int64_t average_gradients(dist::World& world, const std::vector<at::Tensor>& params, int64_t local_active_tokens,
                          int64_t bucket_bytes, const std::string& what) {
  std::vector<at::Tensor> trained;
  for (const at::Tensor& p : params)
    if (p.requires_grad()) trained.push_back(p);
  if (!world.distributed()) return local_active_tokens;
  // One call: the active-token count, then a bucket per run of parameters.
  const auto buckets = runs(trained, std::vector<int>(trained.size(), 0), bucket_bytes);
  std::vector<at::Tensor> flat{at::full({1}, static_cast<double>(local_active_tokens), at::kDouble)};
  for (const ParamRange& range : buckets) flat.push_back(flat_gradients(trained, range));
  world.all_reduce_sum(flat, dist::Channel::Train, what);
  for (size_t k = 0; k < buckets.size(); ++k)
    set_gradients(trained, buckets[k], flat[k + 1], 1.0 / world.size());
  return static_cast<int64_t>(flat[0].item<double>());
}

std::map<std::string, double> global_metrics(dist::World& world, const std::map<std::string, double>& local,
                                             bool& stop, const std::string& what) {
  if (!world.distributed()) return local;
  // name \t value (%a: exact, and NaN and infinities survive) per line.
  std::string bytes;
  char number[64];
  for (const auto& [k, v] : local) {
    std::snprintf(number, sizeof(number), "%a", v);
    bytes += k + '\t' + number + '\n';
  }
  std::snprintf(number, sizeof(number), "%a", stop ? 1.0 : 0.0);
  bytes += std::string(kStop) + '\t' + number + '\n';
  std::map<std::string, double> sum, extremes;
  std::map<std::string, int> count;
  for (const std::string& rank_bytes : world.all_gather(bytes, dist::Channel::Train, what)) {
    std::istringstream in(rank_bytes);
    std::string line;
    while (std::getline(in, line)) {
      const size_t tab = line.rfind('\t');
      const std::string name = line.substr(0, tab);
      const double v = std::strtod(line.c_str() + tab + 1, nullptr);
      sum[name] += v;
      ++count[name];
      if (ends_with(name, "_min")) extremes[name] = extremes.count(name) ? std::min(extremes[name], v) : v;
      if (ends_with(name, "_max")) extremes[name] = extremes.count(name) ? std::max(extremes[name], v) : v;
    }
  }
  stop = sum[kStop] > 0;
  sum.erase(kStop);
  for (auto& [k, v] : sum)
    if (!is_count(k)) v /= count[k];
  for (const auto& [k, v] : extremes) sum[k] = v;
  return sum;
}

}  // namespace grpo::trainer
