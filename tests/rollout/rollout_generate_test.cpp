// grpo-rollout's generation endpoints, driven over HTTP with bodies shaped
// like TRL's VLLMClient and ms-swift's rollout client, checked against the
// in-process engine on the same model.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <thread>

#include "model/engine.h"
#include "model/weights.h"
#include "cli/cli_util.h"
#include "rollout/rollout_process.h"
#include "tokenizer/chat_prompt.h"
#include "tokenizer/tokenizer.h"

using grpo::testing::RolloutProcess;
using nlohmann::json;
namespace model = grpo::model;
namespace tok = grpo::tok;

namespace {

struct Reference {
  tok::Tokenizer tokenizer = tok::Tokenizer::from_dir(grpo::testing::tiny_model_dir());
  model::Engine engine{model::load_model(grpo::testing::tiny_model_dir()), &tokenizer};

  // The in-process engine's completions for prompts sampled with `seed` (top_k = 1: greedy).
  std::vector<model::Completion> run(const std::vector<std::vector<int32_t>>& prompts, int64_t n, uint64_t seed,
                                     int64_t max_tokens, int64_t top_k = 1) {
    return grpo::testing::engine_run(engine, prompts, n, seed, max_tokens, top_k);
  }
};

// TRL VLLMClient.generate's body.
json trl_generate(const json& prompts, int n = 1, double temperature = 1.0, int max_tokens = 16,
                  json generation_kwargs = json::object()) {
  return json{{"prompts", prompts},       {"images", nullptr}, {"n", n},         {"repetition_penalty", 1.0},
              {"temperature", temperature}, {"top_p", 1.0},    {"top_k", -1},    {"min_p", 0.0},
              {"max_tokens", max_tokens}, {"logprobs", 0},     {"structured_outputs_regex", nullptr},
              {"generation_kwargs", generation_kwargs}};
}

class RolloutGenerate : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ref_ = new Reference();
    // A wider gathering window than the default 2 ms, so that the batching
    // check holds on a loaded machine where client threads start slowly.
    server_ = new RolloutProcess(grpo::testing::tiny_model_dir(), {"--batch_wait_ms", "20"});
  }
  static void TearDownTestSuite() {
    delete server_;
    delete ref_;
  }
  static Reference* ref_;
  static RolloutProcess* server_;
};
Reference* RolloutGenerate::ref_ = nullptr;
RolloutProcess* RolloutGenerate::server_ = nullptr;

const std::vector<int32_t> kPromptA = {104, 101, 108, 108, 111, 32, 119};
const std::vector<int32_t> kPromptB = {60, 61, 62};

}  // namespace

TEST_F(RolloutGenerate, HealthAndWorldSize) {
  auto health = server_->get("/health/");
  ASSERT_EQ(health.status, 200);
  EXPECT_EQ(health.body["status"], "ok");
  auto ws = server_->get("/get_world_size/");
  ASSERT_EQ(ws.status, 200);
  EXPECT_EQ(ws.body["world_size"], 1);
}

TEST_F(RolloutGenerate, GreedyTokenIdPromptMatchesInProcessEngine) {
  auto r = server_->post("/generate/", trl_generate({kPromptA}, 1, /*temperature=*/0.0, 12));
  ASSERT_EQ(r.status, 200) << r.raw;
  auto want = ref_->run({kPromptA}, 1, 0, 12);
  EXPECT_EQ(r.body["prompt_ids"], json({kPromptA}));
  ASSERT_EQ(r.body["completion_ids"].size(), 1u);
  EXPECT_EQ(r.body["completion_ids"][0].get<std::vector<int32_t>>(), want[0].ids);
  // logprobs = 0: the sampled token's alone, [seq][tok][1].
  ASSERT_EQ(r.body["logprobs"][0].size(), want[0].ids.size());
  for (size_t t = 0; t < want[0].ids.size(); ++t) {
    ASSERT_EQ(r.body["logprobs"][0][t].size(), 1u);
    EXPECT_NEAR(r.body["logprobs"][0][t][0].get<double>(), want[0].logprobs[t], 1e-4);
    EXPECT_EQ(r.body["logprob_token_ids"][0][t][0], want[0].ids[t]);
  }
}

TEST_F(RolloutGenerate, TextPromptsAreTokenizedLikeVllm) {
  auto r = server_->post("/generate/", trl_generate({"hello world"}, 1, 0.0, 4));
  ASSERT_EQ(r.status, 200) << r.raw;
  auto ids = ref_->tokenizer.encode("hello world", /*add_special_tokens=*/true);
  EXPECT_EQ(r.body["prompt_ids"][0].get<std::vector<int32_t>>(), ids);
  EXPECT_EQ(r.body["completion_ids"][0].get<std::vector<int32_t>>(), ref_->run({ids}, 1, 0, 4)[0].ids);
}

TEST_F(RolloutGenerate, CopiesArePromptMajorAndSeedsReproduce) {
  json kwargs{{"seed", 1234}};
  auto a = server_->post("/generate/", trl_generate({kPromptA, kPromptB}, 3, 1.0, 10, kwargs));
  ASSERT_EQ(a.status, 200) << a.raw;
  ASSERT_EQ(a.body["prompt_ids"].size(), 2u);
  ASSERT_EQ(a.body["completion_ids"].size(), 6u);
  // The engine with the same seed gives prompt 0's three copies, then prompt 1's.
  auto want = ref_->run({kPromptA, kPromptB}, 3, 1234, 10, /*top_k=*/0);
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(a.body["completion_ids"][i].get<std::vector<int32_t>>(), want[i].ids) << i;
  auto again = server_->post("/generate/", trl_generate({kPromptA, kPromptB}, 3, 1.0, 10, kwargs));
  EXPECT_EQ(again.body["completion_ids"], a.body["completion_ids"]);
  auto other = server_->post("/generate/", trl_generate({kPromptA, kPromptB}, 3, 1.0, 10, {{"seed", 99}}));
  EXPECT_NE(other.body["completion_ids"], a.body["completion_ids"]);
}

TEST_F(RolloutGenerate, TopLogprobsAreSortedAndIncludeTheSampledToken) {
  json body = trl_generate({kPromptB}, 2, 1.0, 6, {{"seed", 5}});
  body["logprobs"] = 3;
  auto r = server_->post("/generate/", body);
  ASSERT_EQ(r.status, 200) << r.raw;
  ASSERT_EQ(r.body["logprobs"].size(), 2u);
  for (size_t s = 0; s < 2; ++s) {
    const json& ids = r.body["completion_ids"][s];
    for (size_t t = 0; t < ids.size(); ++t) {
      const json& values = r.body["logprobs"][s][t];
      const json& tokens = r.body["logprob_token_ids"][s][t];
      ASSERT_TRUE(values.size() == 3 || values.size() == 4) << values;
      ASSERT_EQ(tokens.size(), values.size());
      for (size_t k = 1; k < 3; ++k) EXPECT_GE(values[k - 1].get<double>(), values[k].get<double>());
      bool has_sampled = false;
      for (const auto& id : tokens) has_sampled = has_sampled || id == ids[t];
      EXPECT_TRUE(has_sampled);
    }
  }
  body["logprobs"] = nullptr;
  auto none = server_->post("/generate/", body);
  EXPECT_TRUE(none.body["logprobs"].is_null());
  EXPECT_TRUE(none.body["logprob_token_ids"].is_null());
}

TEST_F(RolloutGenerate, ChatRendersTheModelsTemplate) {
  json conversation = json::array({{{"role", "user"}, {"content", "What is 2+2?"}}});
  json body = trl_generate(nullptr, 1, 0.0, 8);
  body.erase("prompts");
  body["messages"] = json::array({conversation});
  body["chat_template_kwargs"] = json::object();
  body["tools"] = nullptr;
  auto r = server_->post("/chat/", body);
  ASSERT_EQ(r.status, 200) << r.raw;
  auto family = tok::chat_family_for(ref_->tokenizer, "");
  auto ids = tok::encode_chat_prompt(ref_->tokenizer, family, {{"user", "What is 2+2?"}});
  EXPECT_EQ(r.body["prompt_ids"][0].get<std::vector<int32_t>>(), ids);
  EXPECT_EQ(r.body["completion_ids"][0].get<std::vector<int32_t>>(), ref_->run({ids}, 1, 0, 8)[0].ids);
}

TEST_F(RolloutGenerate, InferAnswersChatCompletions) {
  json body{{"infer_requests", json::array({{{"messages", {{{"role", "user"}, {"content", "hi"}}}}},
                                            {{"messages", {{{"role", "user"}, {"content", "bye"}}}}}})},
            {"request_config", {{"max_tokens", 5}, {"temperature", 0.0}, {"n", 2}, {"seed", 3}}}};
  auto r = server_->post("/infer/", body);
  ASSERT_EQ(r.status, 200) << r.raw;
  ASSERT_TRUE(r.body.is_array());
  ASSERT_EQ(r.body.size(), 2u);
  auto family = tok::chat_family_for(ref_->tokenizer, "");
  for (size_t i = 0; i < 2; ++i) {
    const json& resp = r.body[i];
    EXPECT_EQ(resp["object"], "chat.completion");
    ASSERT_EQ(resp["choices"].size(), 2u);
    auto ids = tok::encode_chat_prompt(ref_->tokenizer, family, {{"user", i == 0 ? "hi" : "bye"}});
    auto want = ref_->run({ids}, 1, 0, 5)[0];
    for (const json& choice : resp["choices"]) {
      EXPECT_EQ(choice["token_ids"].get<std::vector<int32_t>>(), want.ids);
      EXPECT_EQ(choice["finish_reason"], want.finish == model::FinishReason::Stop ? "stop" : "length");
      EXPECT_EQ(choice["message"]["role"], "assistant");
      EXPECT_EQ(choice["message"]["content"], ref_->tokenizer.decode(want.ids, /*skip_special_tokens=*/true));
    }
    EXPECT_EQ(resp["usage"]["prompt_tokens"], ids.size());
  }
}

TEST_F(RolloutGenerate, ConcurrentRequestsAreBatchedAndAnsweredCorrectly) {
  const int kClients = 8;
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < kClients; ++i) prompts.push_back({static_cast<int32_t>(40 + i), 50, static_cast<int32_t>(60 + 3 * i)});
  const json before = server_->get("/health/").body;
  std::vector<json> answers(kClients);
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i)
    threads.emplace_back([&, i] { answers[i] = server_->post("/generate/", trl_generate({prompts[i]}, 2, 0.0, 24)).body; });
  for (auto& t : threads) t.join();
  const json after = server_->get("/health/").body;
  for (int i = 0; i < kClients; ++i) {
    auto want = ref_->run({prompts[i]}, 2, 0, 24);
    ASSERT_EQ(answers[i]["completion_ids"].size(), 2u) << answers[i];
    for (size_t c = 0; c < 2; ++c)
      EXPECT_EQ(answers[i]["completion_ids"][c].get<std::vector<int32_t>>(), want[c].ids) << "client " << i;
  }
  const auto requests = after["requests"].get<int>() - before["requests"].get<int>();
  const auto calls = after["engine_calls"].get<int>() - before["engine_calls"].get<int>();
  EXPECT_EQ(requests, kClients);
  EXPECT_LT(calls, requests) << "concurrent requests must share engine calls";
}

// grpo-rollout stops where the trainer does: at the eos ids of
// generation_config.json too (model::stop_token_ids, one rule for both).
TEST_F(RolloutGenerate, StopsAtTheEosIdsOfGenerationConfig) {
  const std::vector<int32_t> free_run = ref_->run({kPromptA}, 1, 0, 12)[0].ids;
  ASSERT_EQ(free_run.size(), 12u) << "without the new eos id the greedy run goes to max_tokens";
  const size_t k = 0;  // its first token becomes an eos id
  const std::string dir = grpo::testing::temp_dir("rollout_generation_config");
  std::filesystem::copy(grpo::testing::tiny_model_dir(), dir, std::filesystem::copy_options::recursive);
  grpo::testing::write_file(dir + "/generation_config.json",
                            json{{"eos_token_id", json::array({free_run[k]})}}.dump());
  RolloutProcess server(dir);
  auto r = server.post("/generate/", trl_generate({kPromptA}, 1, /*temperature=*/0.0, 12));
  ASSERT_EQ(r.status, 200) << r.raw;
  const std::vector<int32_t> expected(free_run.begin(), free_run.begin() + static_cast<std::ptrdiff_t>(k) + 1);
  EXPECT_EQ(r.body["completion_ids"][0].get<std::vector<int32_t>>(), expected);
}
