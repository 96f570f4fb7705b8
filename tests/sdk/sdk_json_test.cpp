// The SDK's own JSON reader (plugins need nothing beyond the SDK).
#include <cmath>

#include <grpo/sdk.hpp>
#include <gtest/gtest.h>

TEST(SdkJson, ParsesWhatPluginOptionsHold) {
  grpo::Json j = grpo::Json::parse(R"({"a": 1.5, "b": [1, "x", null], "c": {"d": true}, "e": "q\"\u00e9\n"})");
  EXPECT_DOUBLE_EQ(j.find("a")->as_double(), 1.5);
  EXPECT_EQ(j.find("b")->as_array().size(), 3u);
  EXPECT_TRUE(j.find("b")->as_array()[2].is_null());
  EXPECT_TRUE(j.find("c")->find("d")->as_bool());
  EXPECT_EQ(j.find("e")->as_string(), "q\"\xc3\xa9\n");
}

TEST(SdkJson, MalformedInputThrowsWithPosition) {
  for (const char* bad : {"{", "{\"a\" 1}", "[1,]", "\"abc", "{\"a\":1} x", "tru", ""}) {
    EXPECT_THROW(grpo::Json::parse(bad), std::runtime_error) << bad;
  }
}

TEST(SdkJson, DeepNestingIsRefusedNotACrash) {
  std::string deep(100000, '[');
  EXPECT_THROW(grpo::Json::parse(deep), std::runtime_error);
}

TEST(SdkOptions, TypedGettersUseDefaultsAndNameTheKey) {
  grpo::Options o(R"({"n": 3, "x": null, "s": "token", "f": 0.5})");
  EXPECT_EQ(o.get_int("n", 0), 3);
  EXPECT_EQ(o.get_int("x", 7), 7);  // null -> default
  EXPECT_EQ(o.get_int("missing", 9), 9);
  EXPECT_EQ(o.get_string("s", ""), "token");
  EXPECT_DOUBLE_EQ(o.get_double("f", 0), 0.5);
  try {
    o.get_int("s", 0);
    FAIL() << "expected a type error";
  } catch (const grpo::Error& e) {
    EXPECT_NE(std::string(e.what()).find("'s'"), std::string::npos);
  }
  EXPECT_THROW(grpo::Options("[1,2]"), grpo::Error);
  EXPECT_THROW(grpo::Options("{oops"), grpo::Error);
}

// Before: a lone surrogate escape was encoded as it was (bytes that are not
// UTF-8), and a high one followed by another escape was combined with it
// into a code point past U+10FFFF.
TEST(SdkJson, SurrogatesOutsideAPairAreReplacementCharacters) {
  EXPECT_EQ(grpo::Json::parse(R"("\ud83d\ude00")").as_string(), "\xf0\x9f\x98\x80");  // a pair: one code point
  EXPECT_EQ(grpo::Json::parse(R"("a\ud800b")").as_string(), "a\xef\xbf\xbd" "b");
  EXPECT_EQ(grpo::Json::parse(R"("\udc00")").as_string(), "\xef\xbf\xbd");
  EXPECT_EQ(grpo::Json::parse(R"("\ud800\u0041")").as_string(), "\xef\xbf\xbd" "A");
  EXPECT_EQ(grpo::Json::parse(R"("\ud800")").as_string(), "\xef\xbf\xbd");
}

TEST(SdkJson, QuoteRoundTrips) {
  std::string s = "a\"b\\c\n\x01";
  EXPECT_EQ(grpo::Json::parse(grpo::json_quote(s)).as_string(), s);
}
