// copy_model: the sampler's own weights under async_generate, copied from
// the policy in memory instead of read from the checkpoint files again.
#include <gtest/gtest.h>
#include <torch/types.h>
#include <torch/utils.h>

#include "model/lora.h"
#include "model/weights.h"

using namespace grpo;

TEST(CopyModel, EqualWeightsInStorageOfItsOwnWithoutGradients) {
  model::CausalLM policy = model::load_model(GRPO_TEST_DATA_DIR "/tiny-qwen2");
  {
    torch::NoGradGuard no_grad;  // weights that differ from the files: a copy must not read them again
    for (auto& p : policy->parameters()) p.add_(0.01);
  }
  model::CausalLM copy = model::copy_model(*policy);
  auto a = policy->named_parameters(), b = copy->named_parameters();
  ASSERT_EQ(a.size(), b.size());
  for (const auto& item : b) {
    const at::Tensor& original = a[item.key()];
    EXPECT_TRUE(at::equal(item.value(), original)) << item.key();
    EXPECT_NE(item.value().data_ptr(), original.data_ptr()) << item.key();
    EXPECT_FALSE(item.value().requires_grad()) << item.key();
    EXPECT_EQ(item.value().scalar_type(), original.scalar_type()) << item.key();
  }
  torch::NoGradGuard no_grad;
  const at::Tensor ids = torch::tensor({{1, 2, 3, 4}}, torch::kLong);
  EXPECT_TRUE(at::equal(copy->forward(ids), policy->forward(ids)));
  policy->parameters()[0].add_(1.0);  // training the policy leaves the copy as it was
  EXPECT_FALSE(at::equal(copy->parameters()[0], policy->parameters()[0]));
}

TEST(CopyModel, LeavesLoraAdaptersOut) {
  model::CausalLM policy = model::load_model(GRPO_TEST_DATA_DIR "/tiny-qwen2", at::kBFloat16);
  model::apply_lora(*policy, {});
  model::CausalLM copy = model::copy_model(*policy);
  EXPECT_FALSE(model::has_adapters(*copy));
  EXPECT_EQ(copy->parameters()[0].scalar_type(), at::kBFloat16);
}
