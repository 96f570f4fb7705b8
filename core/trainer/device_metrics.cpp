#include "trainer/device_metrics.h"

#include <cmath>

namespace grpo::trainer {

namespace {

// The values as one float64 CPU tensor: one transfer from the device, which
// waits once for what the device still has queued.
std::vector<double> read_all(const std::vector<at::Tensor>& values) {
  if (values.empty()) return {};
  const at::Device device = values.front().device();
  std::vector<at::Tensor> flat;
  flat.reserve(values.size());
  for (const at::Tensor& v : values) flat.push_back(v.detach().reshape({}).to(device, at::kDouble));
  const at::Tensor host = at::stack(flat).to(at::kCPU).contiguous();
  const double* p = host.data_ptr<double>();
  return {p, p + host.numel()};
}

}  // namespace

std::map<std::string, double> read_metrics(const MetricTensors& values) {
  std::vector<at::Tensor> flat;
  for (const auto& [name, v] : values) flat.push_back(v);
  const std::vector<double> host = read_all(flat);
  std::map<std::string, double> out;
  size_t i = 0;
  for (const auto& [name, v] : values) {
    const double x = host[i++];
    if (!std::isnan(x)) out[name] = x;
  }
  return out;
}

void MetricAccumulator::mean(const std::string& name, const at::Tensor& value) { means_[name].push_back(value); }

void MetricAccumulator::mean(const MetricTensors& values) {
  for (const auto& [name, v] : values) mean(name, v);
}

void MetricAccumulator::sum(const std::string& name, const at::Tensor& value) { sums_[name].push_back(value); }

std::map<std::string, double> MetricAccumulator::read() {
  std::vector<at::Tensor> flat;
  for (const auto* group : {&means_, &sums_})
    for (const auto& [name, values] : *group) flat.insert(flat.end(), values.begin(), values.end());
  const std::vector<double> host = read_all(flat);
  std::map<std::string, double> out;
  size_t i = 0;
  for (const auto& [name, values] : means_) {
    double total = 0;
    int count = 0;
    for (size_t k = 0; k < values.size(); ++k, ++i)
      if (!std::isnan(host[i])) total += host[i], ++count;
    if (count > 0) out[name] = total / count;
  }
  for (const auto& [name, values] : sums_) {
    double total = 0;
    for (size_t k = 0; k < values.size(); ++k, ++i) total += host[i];
    out[name] = total;
  }
  means_.clear();
  sums_.clear();
  return out;
}

}  // namespace grpo::trainer
