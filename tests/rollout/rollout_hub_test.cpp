// grpo-rollout --model ORG/NAME: the model found in the Hugging Face cache, at a revision.
#include <cstdlib>
#include <filesystem>

#include <gtest/gtest.h>

#include "cli/cli_util.h"
#include "datasets/fake_hub.h"
#include "rollout/rollout_process.h"

namespace {

using namespace grpo::testing;
namespace fs = std::filesystem;

TEST(RolloutHub, ServesAModelByNameAtARevisionFromTheHuggingFaceCache) {
  const std::string cache = temp_dir("rollout_hub");
  const std::string commit = "3f2a9c1e5b7d4f6a8c0e2b4d6f8a0c2e4b6d8f0a";
  std::map<std::string, std::string> files;
  for (const auto& e : fs::directory_iterator(tiny_model_dir())) files[e.path().filename().string()] = e.path().string();
  add_hf_repo(cache, "models", "Org/Tiny-Qwen2.5", commit, files, "v1.0");
  setenv("HF_HUB_CACHE", cache.c_str(), 1);  // the server inherits it
  RolloutProcess server("Org/Tiny-Qwen2.5", {"--model_revision", "v1.0", "--use_hf", "true"});
  unsetenv("HF_HUB_CACHE");
  ASSERT_NE(server.port(), 0) << server.log();
  EXPECT_EQ(server.get("/health/").status, 200);
  EXPECT_NE(server.log().find("snapshots/" + commit), std::string::npos) << server.log();
}

}  // namespace
