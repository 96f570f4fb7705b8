// The multi-turn loop with real plugins: the fixture sampler
// (tests/fixtures/fixture_sampler.cpp: fixed ids, the first depending on the
// prompt's length, each request reported to a file) and the fixture handler
// (tests/fixtures/fixture_multiturn.cpp: tool messages, per-conversation
// state) on a tiny model's byte tokenizer and ChatML template.
#include "trainer/conversations.h"

#include <chrono>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/cli_util.h"
#include "plugin_paths.h"
#include "plugins/plugin_registry.h"
#include "rewards/reward_set.h"
#include "tokenizer/chat_prompt.h"
#include "trainer/rollout_batch.h"

using namespace grpo;
using grpo::testing::read_file;
using grpo::testing::read_jsonl;
using grpo::testing::tiny_run_dir;
using nlohmann::json;

namespace {

constexpr int32_t kImEnd = 258;  // the byte tokenizer's <|im_end|>

struct Conversations : ::testing::Test {
  void SetUp() override {
    dir = tiny_run_dir(::testing::UnitTest::GetInstance()->current_test_info()->name());
    tokenizer = std::make_unique<tok::Tokenizer>(tok::Tokenizer::from_dir(dir + "/model"));
    family = tok::chat_family_for(*tokenizer, "");
    plugins::PluginSources sources;
    sources.files = {FIXTURE_SAMPLER,           FIXTURE_MULTITURN,          FIXTURE_MULTITURN_STEP_THROWS,
                     FIXTURE_MULTITURN_STEP_HANGS, FIXTURE_MULTITURN_BAD_ROLE, FIXTURE_MULTITURN_HAS_REWARD,
                     FIXTURE_MULTITURN_THREAD_SAFE, FIXTURE_MULTITURN_NOT_UTF8};
    sources.use_env = sources.use_builtin = false;
    registry = plugins::PluginRegistry::discover(sources);
    sampler = plugins::SamplerClient::create(registry.require("fixture_sampler", GRPO_SAMPLER_INTERFACE),
                                             {{"ids", "72 105 258"}, {"vary", true}, {"report", dir + "/report.jsonl"}},
                                             nullptr, "{}");
    const json messages = json::array({{{"role", "user"}, {"content", "1+1=?"}}});
    prompt.messages_json = messages.dump();
    prompt.ids = tok::encode_chat_prompt(*tokenizer, family, tok::messages_from_json(messages));
    prompt.text = tokenizer->decode(prompt.ids);
    prompt.columns = plugins::RowColumns::from_json({{"solution", "2"}});
  }

  // Two conversations of one prompt through `handler` under `limits`.
  std::vector<Sample> run(const std::string& handler_name, trainer::ConversationLimits limits, json options = {},
                          double timeout_s = 0, int threads = 1, uint32_t n = 2) {
    if (options.is_null()) options = json::object();
    options["log"] = dir + "/handler.log";
    handler = plugins::MultiturnHandler::create(registry.require(handler_name, GRPO_MULTITURN_INTERFACE), options,
                                                sink, "{}", {}, timeout_s, threads);
    plugins::SampleRequest r;
    r.prompt_ids = prompt.ids;
    r.prompt_text = prompt.text;
    r.messages_json = prompt.messages_json;
    r.n = n;
    r.seed = 7;
    r.stop_ids = {kImEnd};
    r.prompt = &prompt;
    trainer::ConversationRunner runner(*handler, *tokenizer, family, limits);
    plugins::SampleOptions o;
    o.max_new_tokens = static_cast<int32_t>(limits.max_completion_length);
    return runner.run(*sampler, {r}, o, {}, metrics);
  }

  std::vector<int32_t> encode(const std::string& text) const { return tokenizer->encode(text, false); }

  std::string dir;
  std::unique_ptr<tok::Tokenizer> tokenizer;
  tok::ChatFamily family{};
  plugins::PluginRegistry registry;
  std::unique_ptr<plugins::SamplerClient> sampler;
  std::unique_ptr<plugins::MultiturnHandler> handler;
  Prompt prompt;
  std::map<std::string, double> metrics;
  std::shared_ptr<plugins::MetricsSink> sink = std::make_shared<plugins::MetricsSink>();  // the handler's own metrics
};

std::vector<int32_t> ids_where(const Sample& s, uint8_t sampled) {
  std::vector<int32_t> out;
  for (size_t t = 0; t < s.ids.size(); ++t)
    if (s.sampled[t] == sampled) out.push_back(s.ids[t]);
  return out;
}

}  // namespace

TEST_F(Conversations, SampledTokensAreKeptAsSampledAndAppendedOnesCarryNoLoss) {
  const std::vector<Sample> out = run("fixture_multiturn", {std::nullopt, 64, false}, {{"turns", 2}});
  ASSERT_EQ(out.size(), 2u);
  // One report line per request: the first turn of both copies, then turns 2 and 3 of each conversation.
  const std::vector<json> calls = read_jsonl(dir + "/report.jsonl");
  ASSERT_EQ(calls.size(), 5u);
  const std::string tool0 = tok::render_continuation(*tokenizer, family, {{"tool", "result 0"}}, "<|im_end|>");
  EXPECT_EQ(tool0, "\n<|im_start|>tool\nresult 0<|im_end|>\n<|im_start|>assistant\n");
  const std::vector<int32_t> appended0 = encode(tool0), appended1 = encode(
      tok::render_continuation(*tokenizer, family, {{"tool", "result 1"}}, "<|im_end|>"));
  for (size_t k = 0; k < 2; ++k) {
    const Sample& s = out[k];
    EXPECT_EQ(s.turns, 3u);
    EXPECT_EQ(s.finish, FinishReason::Stop);
    ASSERT_EQ(s.sampled.size(), s.ids.size());
    // The ids, turn by turn: sampled (mask 1), appended (mask 0), sampled, appended, sampled.
    std::vector<int32_t> expected, mask;
    auto add = [&](const std::vector<int32_t>& ids, int32_t m) {
      expected.insert(expected.end(), ids.begin(), ids.end());
      mask.insert(mask.end(), ids.size(), m);
    };
    add(calls[0]["completion"].get<std::vector<int32_t>>(), 1);
    add(appended0, 0);
    add(calls[1 + k]["completion"].get<std::vector<int32_t>>(), 1);
    add(appended1, 0);
    add(calls[3 + k]["completion"].get<std::vector<int32_t>>(), 1);
    EXPECT_EQ(s.ids, expected);
    EXPECT_EQ(std::vector<int32_t>(s.sampled.begin(), s.sampled.end()), mask);
    // Later turns differ from the first (their prompts are longer): the test sees real turns.
    EXPECT_NE(calls[3 + k]["completion"], calls[0]["completion"]);
    // Each later turn's prompt is the prompt and the conversation so far, as ids.
    std::vector<int32_t> second_prompt = prompt.ids;
    second_prompt.insert(second_prompt.end(), s.ids.begin(), s.ids.begin() + 3 + static_cast<long>(appended0.size()));
    EXPECT_EQ(calls[1 + k]["prompt_ids"].get<std::vector<int32_t>>(), second_prompt);
    // Appended ids carry a 0 log-prob placeholder; sampled ones the sampler's.
    ASSERT_EQ(s.logprobs.size(), s.ids.size());
    for (size_t t = 0; t < s.ids.size(); ++t) EXPECT_EQ(s.logprobs[t], s.sampled[t] ? -1.0f : 0.0f) << t;
    // Rewards see the last turn and the whole conversation.
    EXPECT_EQ(s.last_turn_begin, s.ids.size() - 3);
    const json conversation = json::parse(s.conversation_json);
    ASSERT_EQ(conversation.size(), 6u);
    EXPECT_EQ(conversation[2], json({{"role", "tool"}, {"content", "result 0"}}));
    EXPECT_EQ(conversation[5]["role"], "assistant");
    EXPECT_EQ(conversation[5]["content"], s.text);
  }
  // The loss mask of the training tensors is exactly the sampled mask.
  const trainer::RolloutBatch b = trainer::make_rollout_batch(out, 0, 2, 0, false);
  for (int64_t k = 0; k < 2; ++k)
    for (size_t t = 0; t < out[k].ids.size(); ++t)
      EXPECT_EQ(b.completion_mask[k][static_cast<int64_t>(t)].item<float>(), out[k].sampled[t]) << k << ":" << t;
  EXPECT_DOUBLE_EQ(metrics["turns/mean"], 3.0);
  EXPECT_DOUBLE_EQ(metrics["turns/max"], 3.0);
  EXPECT_DOUBLE_EQ(metrics["tools/call_frequency"], 2.0);     // two calls per conversation
  EXPECT_DOUBLE_EQ(metrics["tools/failure_frequency"], 0.5);  // the fixture fails every second one
  // Every conversation's state was created once and ended once, after its last turn.
  EXPECT_EQ(read_file(dir + "/handler.log"), "begin 0\nbegin 1\nend 0 2\nend 1 2\n");
}

TEST_F(Conversations, MaxTurnsEndsTheConversation) {
  const std::vector<Sample> out = run("fixture_multiturn", {2, 64, false}, {{"turns", 5}});
  for (const Sample& s : out) {
    EXPECT_EQ(s.turns, 2u);
    EXPECT_EQ(ids_where(s, 0), encode(tok::render_continuation(*tokenizer, family, {{"tool", "result 0"}}, "<|im_end|>")));
  }
  EXPECT_EQ(read_file(dir + "/handler.log"), "begin 0\nbegin 1\nend 0 1\nend 1 1\n");
}

TEST_F(Conversations, TotalScopeBoundsAllTurnsTogetherAndPerRoundEachTurn) {
  // 3 sampled + 28 appended ids after the first turn: 9 of 40 are left.
  const std::vector<Sample> total = run("fixture_multiturn", {std::nullopt, 40, true}, {{"turns", 2}});
  const std::vector<json> calls = read_jsonl(dir + "/report.jsonl");
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(calls[0]["max_new_tokens"], 0);  // the first turn has the whole budget
  EXPECT_EQ(calls[1]["max_new_tokens"], 40 - 31);
  for (const Sample& s : total) {
    EXPECT_EQ(s.turns, 2u);  // the next tool message would not fit with room to answer
    EXPECT_EQ(s.finish, FinishReason::Length);
    EXPECT_LE(s.ids.size(), 40u);
  }
  std::filesystem::remove(dir + "/report.jsonl");
  const std::vector<Sample> per_round = run("fixture_multiturn", {std::nullopt, 40, false}, {{"turns", 2}});
  for (const Sample& s : per_round) {
    EXPECT_EQ(s.turns, 3u);
    EXPECT_GT(s.ids.size(), 40u);
  }
}

// Before, the per-round scope appended tool messages with no look at the
// model's context: 30 malformed calls made 6,164 tokens on a 4,096-position
// model, 100 took all the machine's memory. Now a conversation ends by length
// once the next message would leave no room to answer, and the last turn's
// budget is what is left of the context.
TEST_F(Conversations, PerRoundConversationsEndAtTheModelsContext) {
  const int64_t context = static_cast<int64_t>(prompt.ids.size()) + 100;
  trainer::ConversationLimits limits{std::nullopt, 40, false, context};
  const std::vector<Sample> out = run("fixture_multiturn", limits, {{"turns", 1000}});
  for (const Sample& s : out) {
    EXPECT_EQ(s.finish, FinishReason::Length);
    EXPECT_GT(s.turns, 2u) << "several turns fit before the context is reached";
    EXPECT_LE(static_cast<int64_t>(prompt.ids.size() + s.ids.size()), context);
  }
  const std::vector<json> calls = read_jsonl(dir + "/report.jsonl");
  ASSERT_FALSE(calls.empty());
  EXPECT_LE(calls.back()["max_new_tokens"].get<int64_t>(), 40);
}

TEST_F(Conversations, AHostBudgetCutsASamplerThatIgnoresIt) {
  // 3 sampled + 28 appended leave 1 token: the fixture sampler sends 3, the host keeps 1.
  const std::vector<Sample> out = run("fixture_multiturn", {std::nullopt, 32, true}, {{"turns", 2}});
  for (const Sample& s : out) {
    EXPECT_EQ(s.ids.size(), 32u);
    EXPECT_EQ(s.finish, FinishReason::Length);
    EXPECT_EQ(s.turns, 2u);
  }
}

TEST_F(Conversations, AThrowingHandlerEndsOnlyThatConversationAndItScoresNothing) {
  const std::vector<Sample> out = run("fixture_multiturn_step_throws", {std::nullopt, 64, false}, {{"turns", 5}});
  for (const Sample& s : out) {
    EXPECT_TRUE(s.handler_failed);
    EXPECT_EQ(s.turns, 2u);
  }
  EXPECT_EQ(handler->failures(), 2);
  EXPECT_DOUBLE_EQ(metrics["multi_turn/handler_errors"], 2.0);
  EXPECT_EQ(read_file(dir + "/handler.log"), "begin 0\nbegin 1\nend 0 1\nend 1 1\n");  // state freed all the same
}

TEST_F(Conversations, AHangingHandlerIsAbandonedAtItsDeadlineAndTrainingGoesOn) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<Sample> out = run("fixture_multiturn_step_hangs", {std::nullopt, 64, false}, {{"turns", 5}}, 1.0);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(seconds, 10.0);  // one deadline, not one per conversation, and not the hour it sleeps
  for (const Sample& s : out) {
    EXPECT_TRUE(s.handler_failed);
    EXPECT_EQ(s.turns, 2u);
  }
  EXPECT_EQ(handler->failures(), 4);  // the first step timed out; the second step and both end()s were refused
  EXPECT_DOUBLE_EQ(metrics["multi_turn/handler_errors"], 4.0);
}

TEST_F(Conversations, AHandlerSpeakingForThePolicyIsRefused) {
  const std::vector<Sample> out = run("fixture_multiturn_bad_role", {std::nullopt, 64, false});
  for (const Sample& s : out) {
    EXPECT_TRUE(s.handler_failed);
    EXPECT_EQ(s.turns, 1u);
    EXPECT_TRUE(ids_where(s, 0).empty());
  }
}

// A handler's text that is not UTF-8 (a tool message quoting `12 × 34` cut
// mid-character, its tool schemas, a metric's name) is repaired where it
// enters, each invalid sequence one U+FFFD. Before, the conversation's JSON
// threw "invalid UTF-8 byte" and the run stopped.
TEST_F(Conversations, AHandlersTextThatIsNotUtf8IsRepairedWhereItEnters) {
  const std::vector<Sample> out = run("fixture_multiturn_not_utf8", {std::nullopt, 64, false}, {{"turns", 1}});
  ASSERT_EQ(out.size(), 2u);
  for (const Sample& s : out) {
    EXPECT_FALSE(s.handler_failed);
    const json conversation = json::parse(s.conversation_json);
    ASSERT_GE(conversation.size(), 3u) << s.conversation_json;
    EXPECT_EQ(conversation[2]["content"], "12 \uFFFD 34 = 408 \uFFFD\uFFFD result 0") << s.conversation_json;
  }
  EXPECT_EQ(json::parse(handler->tools_json())[0]["function"]["description"], "12 \uFFFD 34");
  const std::map<std::string, double> handler_metrics = sink->drain();
  ASSERT_EQ(handler_metrics.size(), 1u);
  EXPECT_EQ(handler_metrics.begin()->first, "tool\uFFFD_calls");
  EXPECT_NO_THROW(json(handler_metrics.begin()->first).dump());
}

TEST_F(Conversations, TheEnvironmentRewardIsReportedPerConversation) {
  const std::vector<Sample> out = run("fixture_multiturn_has_reward", {std::nullopt, 64, false}, {{"turns", 1}});
  ASSERT_TRUE(handler->has_reward());
  for (const Sample& s : out) EXPECT_DOUBLE_EQ(s.environment_reward, 1.0);
  rewards::EnvironmentReward column(handler->name());
  EXPECT_EQ(column.score(out), std::vector<double>({1.0, 1.0}));
}

// A thread-safe handler's steps for different conversations overlap, up to
// the threads given; the turns come out as they do one at a time.
TEST_F(Conversations, AThreadSafeHandlersCallsRunConcurrently) {
  const std::vector<Sample> serial = run("fixture_multiturn", {std::nullopt, 64, false}, {{"turns", 2}}, 0, 1, 6);
  const std::vector<Sample> one = run("fixture_multiturn_thread_safe", {std::nullopt, 64, false}, {{"turns", 2}}, 0, 1, 6);
  EXPECT_EQ(handler->concurrency(), 1u);
  for (const Sample& s : one) EXPECT_DOUBLE_EQ(s.environment_reward, 1.0);
  const std::vector<Sample> four =
      run("fixture_multiturn_thread_safe", {std::nullopt, 64, false}, {{"turns", 2}}, 0, 4, 6);
  EXPECT_EQ(handler->concurrency(), 4u);
  ASSERT_EQ(four.size(), serial.size());
  for (size_t k = 0; k < four.size(); ++k) {
    EXPECT_DOUBLE_EQ(four[k].environment_reward, 4.0) << "six conversations, four workers";
    EXPECT_EQ(four[k].ids, serial[k].ids);
    EXPECT_EQ(four[k].sampled, serial[k].sampled);
    EXPECT_EQ(four[k].turns, serial[k].turns);
    EXPECT_FALSE(four[k].handler_failed);
  }
  // Not thread-safe: one call at a time, whatever the threads.
  run("fixture_multiturn", {std::nullopt, 64, false}, {{"turns", 2}}, 0, 4, 6);
  EXPECT_EQ(handler->concurrency(), 1u);
}
