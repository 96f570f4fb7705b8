// Metrics left on the device and read once per step (trainer/device_metrics.h).
#include <cmath>
#include <limits>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "trainer/device_metrics.h"

using namespace grpo::trainer;

namespace {
at::Tensor scalar(double v) { return at::full({}, v, at::kDouble); }
const double kNaN = std::numeric_limits<double>::quiet_NaN();
}  // namespace

TEST(DeviceMetrics, ReadLeavesOutWhatHadNothingToAverage) {
  const auto read = read_metrics({{"kl", scalar(0.25)}, {"clip", scalar(kNaN)}, {"f32", at::full({}, 0.5f)}});
  EXPECT_EQ(read, (std::map<std::string, double>{{"kl", 0.25}, {"f32", 0.5}}));
  EXPECT_TRUE(read_metrics({}).empty());
}

TEST(DeviceMetrics, MeansSkipNaNAndSumsAddEveryMicroBatch) {
  MetricAccumulator acc;
  acc.mean("entropy", scalar(1.0));
  acc.mean("entropy", scalar(kNaN));  // a micro-batch without an active token
  acc.mean("entropy", scalar(2.0));
  acc.mean({{"kl", scalar(kNaN)}});   // never a value: left out, as TRL's nanmean gives NaN
  acc.sum("loss", scalar(0.5));
  acc.sum("loss", at::full({1}, -0.125, at::kFloat));  // any shape of one value, any dtype
  const auto read = acc.read();
  EXPECT_EQ(read, (std::map<std::string, double>{{"entropy", 1.5}, {"loss", 0.375}}));
  EXPECT_TRUE(acc.read().empty()) << "read() empties it for the next step";
}
