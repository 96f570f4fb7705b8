// Which backend carries the weights to the rollout servers: NCCL only where
// every rank has a GPU of its own, Gloo otherwise, with the reason.
#include <gtest/gtest.h>

#include "rollout/weight_sender.h"

using grpo::rollout::Backend;
using grpo::rollout::choose_backend;
using grpo::rollout::ServerDevice;

namespace {
const at::Device kGpu0("cuda:0");
const ServerDevice kOnGpu1{"http://a:8000", "cuda:1", "GPU-1"};
const ServerDevice kOnGpu2{"http://b:8000", "cuda:2", "GPU-2"};
}  // namespace

TEST(TransferBackend, NcclWhenEveryRankHasAGpuOfItsOwn) {
  const auto choice = choose_backend(kGpu0, "GPU-0", {kOnGpu1, kOnGpu2}, /*nccl_available=*/true);
  EXPECT_EQ(choice.backend, Backend::Nccl) << choice.why;
}

TEST(TransferBackend, GlooOtherwiseSayingWhy) {
  struct Case {
    at::Device weights;
    std::vector<ServerDevice> servers;
    bool nccl;
    const char* why;
  };
  const std::vector<Case> cases = {
      {at::kCPU, {kOnGpu1}, true, "the weights are in host memory"},
      {kGpu0, {kOnGpu1}, false, "this build has no NCCL"},
      {kGpu0, {kOnGpu1, {"http://c:8000", "cpu", ""}}, true, "http://c:8000 samples on cpu"},
      {kGpu0, {{"http://d:8000", "cuda:0", "GPU-0"}}, true, "another rank is on"},          // the trainer's GPU
      {kGpu0, {kOnGpu1, {"http://e:8000", "cuda:1", "GPU-1"}}, true, "another rank is on"},  // two servers, one GPU
      {kGpu0, {{"http://f:8000", "cuda:3", ""}}, true, "does not say which"},
  };
  for (const Case& c : cases) {
    const auto choice = choose_backend(c.weights, c.weights.is_cuda() ? "GPU-0" : "", c.servers, c.nccl);
    EXPECT_EQ(choice.backend, Backend::Gloo) << c.why;
    EXPECT_NE(choice.why.find(c.why), std::string::npos) << choice.why;
  }
}

TEST(TransferBackend, WeightBackendGlooIsKeptAndNcclIsRefusedWhereItCannotForm) {
  const ServerDevice on_trainers_gpu{"http://d:8000", "cuda:0", "GPU-0"};
  EXPECT_EQ(choose_backend(kGpu0, "GPU-0", {kOnGpu1}, true, Backend::Gloo).backend, Backend::Gloo);
  EXPECT_EQ(choose_backend(kGpu0, "GPU-0", {kOnGpu1}, true, Backend::Nccl).backend, Backend::Nccl);
  EXPECT_EQ(choose_backend(kGpu0, "GPU-0", {on_trainers_gpu}, true).backend, Backend::Gloo);  // auto
  try {
    choose_backend(kGpu0, "GPU-0", {on_trainers_gpu}, true, Backend::Nccl);
    ADD_FAILURE() << "weight_backend nccl with the server on the trainer's GPU was accepted";
  } catch (const grpo::rollout::TransferError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("weight_backend nccl cannot be used"), std::string::npos) << what;
    EXPECT_NE(what.find("another rank is on"), std::string::npos) << what;
  }
}
