// util/json_input.h: the bounded parser every outside JSON goes through.
#include <string>

#include <gtest/gtest.h>

#include "util/json_input.h"

using grpo::util::JsonInputError;

namespace {

std::string nested(size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

std::string error_of(const std::string& text, bool is_file = false) {
  try {
    grpo::util::parse_json(text, "input.json", is_file);
  } catch (const JsonInputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(JsonInput, DepthIsCountedOutsideStringsOnly) {
  EXPECT_EQ(grpo::util::json_too_deep_at(nested(512)), std::string::npos);
  EXPECT_EQ(grpo::util::json_too_deep_at(nested(513)), 512u);
  EXPECT_EQ(grpo::util::json_too_deep_at("[\"" + std::string(2000, '[') + "\\\"\"]"), std::string::npos);
  EXPECT_EQ(grpo::util::json_too_deep_at("{\"a\": " + nested(600) + "}"), 517u);
  EXPECT_NO_THROW(grpo::util::parse_json(nested(512), "x"));
}

TEST(JsonInput, TooDeepMalformedAndOutOfRangeAreErrorsNamingTheInput) {
  EXPECT_NE(error_of(nested(100000)).find("input.json: JSON nested deeper than 512 levels (at byte 512)"),
            std::string::npos);
  EXPECT_NE(error_of("{\"a\": 1e999}").find("number overflow"), std::string::npos);
  EXPECT_NE(error_of("{\"a\": 1e999}").find("input.json"), std::string::npos);
  EXPECT_NE(error_of("{\n\"a\": 1,\n\"b\": }", true).find("input.json:3: not valid JSON"), std::string::npos);
  EXPECT_NE(error_of("[1,\n" + nested(600), true).find("input.json:2: JSON nested"), std::string::npos);
  EXPECT_TRUE(grpo::util::try_parse_json(nested(100000)).is_discarded());
  EXPECT_TRUE(grpo::util::try_parse_json("[1e999]").is_discarded());
  EXPECT_EQ(grpo::util::try_parse_json("[1]"), nlohmann::json::array({1}));
}

TEST(JsonInput, ExcerptsQuoteScalarsAndFlatListsAndSummariseTheRest) {
  using grpo::util::json_excerpt;
  EXPECT_EQ(json_excerpt(nlohmann::json("two")), "\"two\"");
  EXPECT_EQ(json_excerpt(nlohmann::json::parse("[2, -1]")), "[2,-1]");
  EXPECT_EQ(json_excerpt(nlohmann::json::parse(nested(300))), "a list with 1 item(s)");
  EXPECT_EQ(json_excerpt(nlohmann::json::parse("{\"a\": {}}")), "an object with 1 item(s)");
  const std::string long_text = json_excerpt(nlohmann::json(std::string(100000, 'x')));
  EXPECT_EQ(long_text.size(), 63u);
  EXPECT_EQ(long_text.substr(60), "...");
}
