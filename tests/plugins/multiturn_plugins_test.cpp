// The built-in multi-turn handlers, loaded from the build's plugin directory
// as the trainer loads them: calculator and ms-swift's math tip schedulers.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "plugins/builtin_plugins.h"
#include "plugins/multiturn_handler.h"

using namespace grpo;
using nlohmann::json;

namespace {

std::unique_ptr<plugins::MultiturnHandler> handler(const std::string& name, json options = json::object()) {
  return plugins::MultiturnHandler::create(grpo::testing::builtin_registry().require(name, GRPO_MULTITURN_INTERFACE),
                                           options, nullptr, "{}");
}

struct Turn {
  std::string completion;
  std::shared_ptr<const plugins::RowColumns> columns = plugins::RowColumns::from_json({{"solution", "391"}});
  std::vector<int32_t> ids;

  plugins::TurnDecision to(plugins::MultiturnHandler& h, grpo_conversation* conv = nullptr, uint32_t turn = 0) const {
    plugins::TurnView v;
    v.conversation_json = "[]";
    v.completion = completion;
    v.ids = &ids;
    v.turn = turn;
    v.columns = columns.get();
    return h.step(conv, v);
  }
};

std::string call(const std::string& expression) {
  return "<tool_call>\n{\"name\": \"calculator\", \"arguments\": {\"expression\": \"" + expression +
         "\"}}\n</tool_call>";
}

}  // namespace

TEST(CalculatorTool, AnswersEachCallExactlyWithAToolMessage) {
  auto calc = handler("calculator");
  plugins::TurnDecision d = Turn{"Let me compute. " + call("17 * 23") + call("1 / 3 + 1/6") + call("2^40 - 1")}.to(*calc);
  EXPECT_FALSE(d.done);
  EXPECT_FALSE(d.failed);
  ASSERT_EQ(d.appended.size(), 3u);
  EXPECT_EQ(d.appended[0].role, "tool");
  EXPECT_EQ(d.appended[0].content, "391");
  EXPECT_EQ(d.appended[1].content, "0.5");
  EXPECT_EQ(d.appended[2].content, "1099511627775");
  EXPECT_EQ(d.tool_calls, 3u);
  EXPECT_EQ(d.tool_failures, 0u);
  EXPECT_EQ(Turn{call("10 / 4")}.to(*calc).appended[0].content, "2.5");
  EXPECT_EQ(Turn{call("-(1 - 8) / 3")}.to(*calc).appended[0].content, "7/3");
}

TEST(CalculatorTool, AMalformedCallGetsAnErrorMessageAndCountsAsFailed) {
  auto calc = handler("calculator");
  const std::pair<std::string, std::string> cases[] = {
      {"<tool_call>{\"name\": \"calculator\", \"arguments\": {\"expression\": \"2 +\"}}</tool_call>", "a number is missing"},
      {"<tool_call>{\"name\": \"calculator\", \"arguments\": {\"expression\": \"1/0\"}}</tool_call>", "division by zero"},
      {"<tool_call>{\"name\": \"search\", \"arguments\": {}}</tool_call>", "there is no tool \"search\""},
      {"<tool_call>{\"name\": \"calculator\"}</tool_call>", "needs arguments"},
      {"<tool_call>not json</tool_call>", "not valid JSON"},
      {"<tool_call>{\"name\": \"calculator\", \"arguments\": {\"expression\": \"os.system('x')\"}}</tool_call>",
       "unexpected character \"o\""},
      {"<tool_call>{\"name\": \"calculator\", \"arguments\": {\"expression\": \"9223372036854775807 + 1\"}}</tool_call>",
       "does not fit in 64 bits"},
      {"<tool_call>{\"name\": \"calculator\"", "not closed"},
  };
  for (const auto& [text, why] : cases) {
    plugins::TurnDecision d = Turn{text}.to(*calc);
    ASSERT_EQ(d.appended.size(), 1u) << text;
    EXPECT_EQ(d.appended[0].content.rfind("error: ", 0), 0u) << d.appended[0].content;
    EXPECT_NE(d.appended[0].content.find(why), std::string::npos) << d.appended[0].content;
    EXPECT_EQ(d.tool_calls, 1u);
    EXPECT_EQ(d.tool_failures, 1u);
    EXPECT_FALSE(d.failed);  // the handler itself did its job
  }
}

// What a policy writes goes back into the conversation, which the host later
// writes as JSON: every answer must be valid UTF-8, and no expression, however
// deep, may crash the handler's thread (tests/plugins/calculator_test.cpp has
// the expressions' rules).
TEST(CalculatorTool, EveryAnswerToAHostileCallIsValidUtf8AndNoCallCrashes) {
  auto calc = handler("calculator");
  std::string powers = "2";
  while (powers.size() < 100000) powers += "^1";
  const std::string calls[] = {
      call("12 × 34"), call("5 − 3"), call("2 + ٣"), call("１２ * 2"), call("2 + \xff"), call("\\ud800 + 1"),
      "<tool_call>{\"name\": \"calc\xe2\x88\"}</tool_call>", "<tool_call>{\"name\": \"\\udc00\"}</tool_call>",
      call(std::string(99999, '-') + "1"), call(std::string(100000, '(')), call(powers)};
  for (const std::string& text : calls) {
    plugins::TurnDecision d = Turn{text}.to(*calc);
    ASSERT_EQ(d.appended.size(), 1u) << text.substr(0, 100);
    EXPECT_NO_THROW((void)json(d.appended[0].content).dump()) << d.appended[0].content.substr(0, 200);
    EXPECT_FALSE(d.failed);
  }
  EXPECT_EQ(Turn{call("12 × 34")}.to(*calc).appended[0].content, "408");
}

TEST(CalculatorTool, ATurnWithoutACallIsTheAnswer) {
  auto calc = handler("calculator");
  plugins::TurnDecision d = Turn{"The answer is \\boxed{391}."}.to(*calc);
  EXPECT_TRUE(d.done);
  EXPECT_TRUE(d.appended.empty());
  EXPECT_EQ(d.tool_calls, 0u);
}

TEST(CalculatorTool, DescribesItsToolForTheChatTemplateUnlessTold) {
  const json tools = json::parse(handler("calculator")->tools_json());
  ASSERT_EQ(tools.size(), 1u);
  EXPECT_EQ(tools[0]["function"]["name"], "calculator");
  EXPECT_EQ(tools[0]["function"]["parameters"]["required"], json({"expression"}));
  EXPECT_EQ(handler("calculator", {{"describe_tools", false}})->tools_json(), "");
}

TEST(MathTipTrick, AWrongAnswerGetsTheTipOnceARightOneEndsIt) {
  for (const char* name : {"math_tip_trick", "math_tip_trick_multi_turn"}) {
    auto tip = handler(name);
    bool failed = false;
    Prompt prompt;
    prompt.columns = plugins::RowColumns::from_json({{"solution", "391"}});
    grpo_conversation* conv = tip->begin(1, prompt, 0, 0, {}, &failed);
    ASSERT_FALSE(failed);
    plugins::TurnDecision first = Turn{"\\boxed{390}"}.to(*tip, conv, 0);
    ASSERT_EQ(first.appended.size(), 1u) << name;
    EXPECT_EQ(first.appended[0].role, "user");
    EXPECT_EQ(first.appended[0].content,
              "The answer is not correct, It seems You made a mistake, you need to recheck very carefully.");
    EXPECT_TRUE(Turn{"\\boxed{392}"}.to(*tip, conv, 1).done) << "the tip is given once";
    tip->end(conv);
    grpo_conversation* right = tip->begin(2, prompt, 0, 1, {}, &failed);
    EXPECT_TRUE(Turn{"\\boxed{391}"}.to(*tip, right, 0).done);
    tip->end(right);
  }
}

TEST(MathTipTrick, ARowWithoutSolutionIsTheHandlersErrorNamingTheColumn) {
  auto tip = handler("math_tip_trick_multi_turn");
  Turn t{"\\boxed{1}"};
  t.columns = plugins::RowColumns::from_json({{"answer", "1"}});
  bool failed = false;
  Prompt prompt;
  grpo_conversation* conv = tip->begin(1, prompt, 0, 0, {}, &failed);
  EXPECT_TRUE(t.to(*tip, conv).failed);
  EXPECT_EQ(tip->failures(), 1);
  tip->end(conv);
}
