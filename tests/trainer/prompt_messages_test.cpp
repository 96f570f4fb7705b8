// A dataset row into the prompt's messages: its messages or text column,
// with --system put first unless the row has a system turn of its own.
#include <gtest/gtest.h>

#include "data/dataset.h"

using grpo::data::prompt_messages;

namespace {

grpo::data::Row row(const char* json) {
  grpo::data::Row r;
  r.columns = nlohmann::json::parse(json);
  r.source = "rows.jsonl:1";
  return r;
}

}  // namespace

TEST(PromptMessages, SystemPromptIsAMessageBeforeTheUserTurn) {
  auto m = prompt_messages(row(R"({"problem": "1+1=?"})"), "Think first.");
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0], (nlohmann::json{{"role", "system"}, {"content", "Think first."}}));
  EXPECT_EQ(m[1], (nlohmann::json{{"role", "user"}, {"content", "1+1=?"}}));
}

TEST(PromptMessages, ARowsOwnSystemTurnIsKeptAndTheAnswerDropped) {
  auto m = prompt_messages(row(R"({"messages": [{"role": "system", "content": "Mine."},
                                                {"role": "user", "content": "hi"},
                                                {"role": "assistant", "content": "answer"}]})"),
                           "Think first.");
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0]["content"], "Mine.");
  EXPECT_EQ(m[1]["role"], "user");
}
