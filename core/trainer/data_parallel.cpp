#include "trainer/data_parallel.h"

#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace grpo::trainer {

namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// A metric is a sum over the ranks when it counts failures, else a mean.
bool is_count(const std::string& name) { return ends_with(name, "internal_errors") || ends_with(name, "handler_errors"); }

constexpr const char* kStop = "\x01stop";  // no metric starts with a control character

}  // namespace

int64_t average_gradients(dist::World& world, const std::vector<at::Tensor>& params, int64_t local_active_tokens,
                          int64_t bucket_bytes, const std::string& what) {
  std::vector<at::Tensor> trained;
  for (const at::Tensor& p : params)
    if (p.requires_grad()) trained.push_back(p);
  if (!world.distributed()) return local_active_tokens;
  const int64_t per_bucket = std::max<int64_t>(1, bucket_bytes / 4);
  // Buckets of consecutive parameters: [first, last) each.
  std::vector<std::pair<size_t, size_t>> ranges;
  for (size_t i = 0; i < trained.size();) {
    size_t j = i;
    int64_t n = 0;
    while (j < trained.size() && (j == i || n + trained[j].numel() <= per_bucket)) n += trained[j++].numel();
    ranges.emplace_back(i, j);
    i = j;
  }
  std::vector<at::Tensor> flat;
  flat.push_back(at::full({1}, static_cast<double>(local_active_tokens), at::kDouble));
  for (const auto& [a, b] : ranges) {
    std::vector<at::Tensor> parts;
    for (size_t i = a; i < b; ++i) {
      const at::Tensor& g = trained[i].grad();
      parts.push_back(g.defined() ? g.detach().reshape({-1}).to(at::kFloat) : at::zeros({trained[i].numel()}, at::kFloat));
    }
    flat.push_back(at::cat(parts).contiguous());
  }
  world.all_reduce_sum(flat, dist::Channel::Train, what);
  const double inv = 1.0 / world.size();
  for (size_t k = 0; k < ranges.size(); ++k) {
    at::Tensor& f = flat[k + 1];
    f.mul_(inv);
    int64_t offset = 0;
    for (size_t i = ranges[k].first; i < ranges[k].second; ++i) {
      at::Tensor p = trained[i];
      at::Tensor avg = f.narrow(0, offset, p.numel()).view(p.sizes());
      offset += p.numel();
      at::NoGradGuard no_grad;
      if (p.grad().defined()) {
        p.grad().copy_(avg);
      } else {
        p.mutable_grad() = avg.to(p.scalar_type()).clone();
      }
    }
  }
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
  std::map<std::string, double> sum;
  std::map<std::string, int> count;
  for (const std::string& rank_bytes : world.all_gather(bytes, dist::Channel::Train, what)) {
    std::istringstream in(rank_bytes);
    std::string line;
    while (std::getline(in, line)) {
      const size_t tab = line.rfind('\t');
      sum[line.substr(0, tab)] += std::strtod(line.c_str() + tab + 1, nullptr);
      ++count[line.substr(0, tab)];
    }
  }
  stop = sum[kStop] > 0;
  sum.erase(kStop);
  for (auto& [k, v] : sum)
    if (!is_count(k)) v /= count[k];
  return sum;
}

}  // namespace grpo::trainer
