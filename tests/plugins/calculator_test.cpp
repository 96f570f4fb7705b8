// The calculator tool's expressions (plugins/multiturn/calculator) on what a
// policy may write: every answer is a value or a message it can learn from,
// in valid UTF-8, and nothing it writes can crash the trainer. Also built in
// the sanitizer build, where the arithmetic at the edges of 64 bits runs
// under UndefinedBehaviorSanitizer.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "rational.h"

namespace calc = grpo::calculator;

namespace {

// The value as the tool answers it, or "error: " and the message.
std::string eval(const std::string& expression) {
  try {
    return calc::format(calc::evaluate(expression));
  } catch (const calc::ExpressionError& e) {
    return std::string("error: ") + e.what();
  }
}

// What the host's JSON writer accepts (nlohmann::json::dump throws on invalid UTF-8).
bool is_utf8(const std::string& text) {
  try {
    (void)nlohmann::json(text).dump();
    return true;
  } catch (const nlohmann::json::exception&) {
    return false;
  }
}

std::string repeat(const std::string& piece, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) out += piece;
  return out;
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

// Each of these recursed once per character and overflowed the stack of the
// thread running the handler (44,000 '-', 33,000 '(' or 44,000 "^1" were enough).
TEST(Calculator, NestingPastTwoHundredLevelsIsAnErrorNotAStackOverflow) {
  const std::string hostile[] = {repeat("-", 99999) + "1", repeat("(", 100000), "2" + repeat("^1", 49999) + "9"};
  for (const std::string& e : hostile) {
    ASSERT_EQ(e.size(), 100000u);
    const std::string answer = eval(e);
    EXPECT_TRUE(has(answer, "error: the expression is nested deeper than 200 levels")) << answer.substr(0, 300);
    EXPECT_LT(answer.size(), 400u) << "a long expression is quoted around the error, not whole";
    EXPECT_TRUE(is_utf8(answer));
  }
  EXPECT_EQ(eval(repeat("(", 150) + "7" + repeat(")", 150)), "7");
  EXPECT_EQ(eval(repeat("-", 150) + "7"), "7");
  EXPECT_EQ(eval("2^2^2^2"), "65536");
}

// Models write the typographic signs; anything else outside ASCII is named
// whole (with its code point, since some are invisible), invalid bytes as \xNN.
TEST(Calculator, ACharacterOutsideAsciiIsNamedWholeInValidUtf8) {
  EXPECT_EQ(eval("12 × 34"), "408");
  EXPECT_EQ(eval("7 ÷ 2"), "3.5");
  EXPECT_EQ(eval("5 − 3"), "2");
  EXPECT_EQ(eval("−2×−3"), "6");
  const std::pair<std::string, std::string> refused[] = {
      {"2 + ٣", "error: unexpected character \"٣\" (U+0663) at position 4 of \"2 + ٣\""},
      {"１２ + 1", "error: unexpected character \"１\" (U+FF11) at position 0 of \"１２ + 1\""},
      {"2\xC2\xA0+ 1", "unexpected character \"\xC2\xA0\" (U+00A0) at position 1"},
      {"2 + 😀", "unexpected character \"😀\" (U+1F600) at position 4"},
      {"2 + \xFF", "error: unexpected byte \\xFF (not UTF-8) at position 4 of \"2 + \\xFF\""},
      {"2 * \xE2\x88", "unexpected byte \\xE2 (not UTF-8) at position 4 of \"2 * \\xE2\\x88\""},
      {"\xED\xA0\x80 + 1", "unexpected byte \\xED (not UTF-8) at position 0"},  // a lone surrogate
      {"\xC0\xAF", "unexpected byte \\xC0"},                                       // an overlong '/'
      {"3 ×", "a number is missing at position 3 of \"3 ×\""},
  };
  for (const auto& [expression, message] : refused) {
    const std::string answer = eval(expression);
    EXPECT_TRUE(has(answer, message)) << answer;
    EXPECT_TRUE(is_utf8(answer)) << answer;
  }
}

// A comma groups thousands as English writes them (1,000,000: groups of
// exactly three digits after a first group of one to three). Any other comma
// in a number is refused: read digit by digit, 0,5 * 2 answered 10.
TEST(Calculator, ACommaOnlyGroupsThousands) {
  EXPECT_EQ(eval("1,000,000 + 1"), "1000001");
  EXPECT_EQ(eval("12,345.5 * 2"), "24691");
  EXPECT_EQ(eval("-1,234"), "-1234");
  const std::string advice = "is not a number (use a point for decimals: 0.5, not 0,5; a comma may only separate "
                             "thousands: 1,000,000)";
  for (const char* e : {"0,5 * 2", "3,5 + 1", "1,,2", "1,0000", "1,000,00", "1234,567", "0,500", "1.000,5", "1,",
                        "1, 2", "12,34"})
    EXPECT_TRUE(has(eval(e), advice)) << e << ": " << eval(e);
  EXPECT_EQ(eval("0,5 * 2"), "error: \"0,5\" " + advice + " at position 0 of \"0,5 * 2\"");
}

// Rationals hold a 64-bit numerator and denominator: a result that fits is
// exact, whatever its intermediate products; one that does not is an error.
TEST(Calculator, ArithmeticAtTheEdgesOf64BitsIsExact) {
  const std::string min = "(-9223372036854775807 - 1)";
  EXPECT_EQ(eval(min), "-9223372036854775808");
  EXPECT_EQ(eval(min + " / " + min), "1");
  EXPECT_EQ(eval(min + " * 1"), "-9223372036854775808");
  EXPECT_EQ(eval(min + " / 2"), "-4611686018427387904");
  EXPECT_EQ(eval(min + " / -2"), "4611686018427387904");
  EXPECT_EQ(eval(min + " / 5"), "-1844674407370955161.6");
  EXPECT_EQ(eval(min + " / (" + min + " / 3)"), "3");
  EXPECT_EQ(eval("-1 - " + min), "9223372036854775807");
  EXPECT_EQ(eval("(-2)^63"), "-9223372036854775808");
  EXPECT_EQ(eval("9223372036854775807/2 + 9223372036854775807/2"), "9223372036854775807");
  EXPECT_EQ(eval("0.50000000000000000000000"), "0.5");
  const std::string overflows[] = {"-" + min,  min + " * -1", min + " / -1",           "1 / " + min,
                                   "0 - " + min, "2^63",       "9223372036854775807 + 1", "9223372036854775808"};
  for (const std::string& e : overflows) {
    EXPECT_TRUE(has(eval(e), "does not fit in 64 bits")) << e << ": " << eval(e);
  }
}
