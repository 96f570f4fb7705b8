// Tests of the Math-Verify compatible accuracy reward (plugins/rewards/accuracy/math).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "math_verify.h"

namespace gm = grpo::math;

namespace {

double reward(const std::string& completion, const std::string& solution) {
  return gm::accuracy_reward(completion, solution).reward;
}

}  // namespace

// Every reference case; the expected values come from Math-Verify 0.9.0
// (tests/oracles/regenerate_accuracy_cases.py).
TEST(MathVerifyCases, AgreesWithReference) {
  const std::string path = std::string(GRPO_TEST_DATA_DIR) + "/accuracy_cases.json";
  std::ifstream in(path);
  ASSERT_TRUE(in.good()) << "cannot open " << path;
  const nlohmann::json doc = nlohmann::json::parse(in);
  const auto& cases = doc.at("cases");
  ASSERT_FALSE(cases.empty());
  int failures = 0;
  std::ostringstream report;
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& c = cases[i];
    const std::string completion = c.at("completion").get<std::string>();
    const std::string solution = c.at("solution").get<std::string>();
    const double expected = c.at("reward").get<double>();
    const gm::VerifyResult got = gm::accuracy_reward(completion, solution);
    if (got.reward != expected) {
      ++failures;
      report << "case " << i << "\n  completion: " << completion << "\n  solution:   " << solution
             << "\n  expected " << expected << ", got " << got.reward
             << (got.internal_error ? " (internal error)" : "") << "\n";
    }
  }
  EXPECT_EQ(failures, 0) << failures << " of " << cases.size() << " cases differ:\n" << report.str();
}

TEST(MathVerifyExtract, CompletionNeedsBoxOrAnchor) {
  EXPECT_EQ(gm::extract_completion_answer("so \\boxed{42}."), "42");
  EXPECT_EQ(gm::extract_completion_answer("The final answer is $7$"), "7");
  EXPECT_EQ(gm::extract_completion_answer("Answer: $$\\frac{9}{2}$$"), "\\frac{9}{2}");
  EXPECT_EQ(gm::extract_completion_answer("So the answer is \\(x+1\\)."), "x+1");
  EXPECT_FALSE(gm::extract_completion_answer("The answer is 42"));
  EXPECT_FALSE(gm::extract_completion_answer("<answer>42</answer>"));
  EXPECT_FALSE(gm::extract_completion_answer("First $3 \\times 4 = 12$, then we add"));
  EXPECT_FALSE(gm::extract_completion_answer(""));
}

TEST(MathVerifyExtract, BoxedWinsAndRightmostMatch) {
  // \boxed has the highest priority even after an anchored $..$.
  EXPECT_EQ(gm::extract_completion_answer("final answer is $12$, no wait \\boxed{13}"), "13");
  // Several boxes close together form a list; far apart only the last counts.
  EXPECT_EQ(gm::extract_completion_answer("\\boxed{3}, \\boxed{5}"), "3,5");
  EXPECT_EQ(gm::extract_completion_answer("\\boxed{3} " + std::string(80, '.') + " \\boxed{5}"), "5");
  EXPECT_EQ(gm::extract_completion_answer("Thus $n = \\boxed{2023}$."), "n = \\boxed{2023}");
  // Nested braces inside the box.
  EXPECT_EQ(gm::extract_completion_answer("\\boxed{\\frac{\\sqrt{2}}{2}}"), "\\frac{\\sqrt{2}}{2}");
}

TEST(MathVerifyExtract, EnvironmentsAndChains) {
  EXPECT_EQ(gm::extract_completion_answer("**Final Answer**\n\\[\n\\boxed{5}\n\\]"), "\\boxed{5}");
  EXPECT_EQ(gm::extract_completion_answer("the answer is $\\boxed{1}$ and $\\boxed{2}$"),
            "\\boxed{1} and \\boxed{2}");
  EXPECT_EQ(reward("the answer is $\\boxed{1}$ and $\\boxed{2}$", "$\\{1,2\\}$"), 1.0);
  EXPECT_EQ(reward("The final answer is $50$%", "$\\frac{1}{2}$"), 1.0);  // percent after the $..$
  // An escaped dollar is not a delimiter; "$" right after a digit does not open one.
  EXPECT_EQ(reward("costs 5$ and the final answer is $7$", "7"), 1.0);
}

TEST(MathVerifyExtract, GoldForms) {
  EXPECT_EQ(gm::extract_gold_answer("42"), "42");
  EXPECT_EQ(gm::extract_gold_answer("1,000"), "1000");
  EXPECT_EQ(gm::extract_gold_answer("-3"), "-3");
  EXPECT_EQ(gm::extract_gold_answer("0.75"), "0.75");
  EXPECT_EQ(gm::extract_gold_answer("$\\frac{2}{3}$"), "\\frac{2}{3}");
  EXPECT_EQ(gm::extract_gold_answer("so it is $\\boxed{24}$. Check: $5$"), "24");
  EXPECT_EQ(gm::extract_gold_answer("\\frac{4}{9}"), "\\frac{4}{9}");  // bare numeric fraction
  EXPECT_FALSE(gm::extract_gold_answer(""));
  EXPECT_FALSE(gm::extract_gold_answer("No solution exists"));
  EXPECT_FALSE(gm::extract_gold_answer("[0,1]"));
  EXPECT_FALSE(gm::extract_gold_answer("\\frac{\\pi}{4}"));
  EXPECT_FALSE(gm::extract_gold_answer("\\text{Monday}"));
}

TEST(MathVerifyNormalize, BasicLatex) {
  EXPECT_EQ(reward("\\boxed{\\dfrac{1}{2}}", "$\\frac12$"), 1.0);
  EXPECT_EQ(reward("\\boxed{\\left( 1, 2 \\right)}", "$(1,2)$"), 1.0);
  EXPECT_EQ(reward("\\boxed{45^\\circ}", "45"), 1.0);
  EXPECT_EQ(reward("\\boxed{45^{\\circ}}", "$45$"), 1.0);
  EXPECT_EQ(reward("\\boxed{\\$5}", "5"), 1.0);
  EXPECT_EQ(reward("\\boxed{3\\,\\text{cm}}", "3"), 1.0);
  EXPECT_EQ(reward("\\boxed{12 \\text{ meters}}", "12"), 1.0);
  EXPECT_EQ(reward("\\boxed{\\text{5 apples}}", "5"), 0.0);
  EXPECT_EQ(reward("\\boxed{\\!10}", "10"), 1.0);
}

TEST(MathVerifyNormalize, PercentAndThousands) {
  EXPECT_EQ(reward("\\boxed{25\\%}", "$25\\%$"), 1.0);
  EXPECT_EQ(reward("\\boxed{25\\%}", "0.25"), 1.0);
  // 0.9.0 reads "25%" and 25 as equal when both are whole numbers (0.7.0 scored 0).
  EXPECT_EQ(reward("\\boxed{25\\%}", "25"), 1.0);
  EXPECT_EQ(reward("\\boxed{1{,}000{,}000}", "1000000"), 1.0);
  EXPECT_EQ(reward("\\boxed{1,234}", "1234"), 1.0);
  EXPECT_EQ(reward("\\boxed{1,2}", "12"), 0.0);  // not a thousands group: a set
}

// Math-Verify 0.9.0's sympy_numeric_eq compares a percentage of a whole number
// with a whole number by the number before the percent sign ("9% == 9"); every
// other percentage keeps its value (x / 100). Each verdict is 0.9.0's.
TEST(MathVerifyEquiv, PercentOfWholeNumber) {
  EXPECT_EQ(reward("\\boxed{14\\%}", "14"), 1.0);
  EXPECT_EQ(reward("\\boxed{14}", "$14\\%$"), 1.0);
  EXPECT_EQ(reward("\\boxed{\\frac{28}{2}}", "14%"), 1.0);   // sympy's Integer 14
  EXPECT_EQ(reward("\\boxed{14\\%}", "$\\frac{28}{2}$"), 1.0);
  EXPECT_EQ(reward("\\boxed{1\\frac{1}{1}}", "2%"), 1.0);    // a mixed number that is whole
  EXPECT_EQ(reward("\\boxed{14\\%}", "$14\\text{ cm}$"), 1.0);
  EXPECT_EQ(reward("\\boxed{15\\%}", "14"), 0.0);
  EXPECT_EQ(reward("\\boxed{1400}", "14%"), 0.0);
  EXPECT_EQ(reward("\\boxed{30\\%}", "$25\\%$"), 0.0);
  // Past 128 bits, so compared on the general path rather than the fast one.
  const std::string big = "1234567890123456789012345678901234567890";
  EXPECT_EQ(reward("\\boxed{" + big + "\\%}", big), 1.0);
  EXPECT_EQ(reward("\\boxed{" + big + "}", "$" + big + "\\%$"), 1.0);
  EXPECT_EQ(reward("\\boxed{" + big + "\\%}", big + "1"), 0.0);
  // Element by element in sets and tuples, as sympy_expr_eq is applied there.
  EXPECT_EQ(reward("\\boxed{14\\%}, \\boxed{15\\%}", "$\\{14, 15\\}$"), 1.0);
  EXPECT_EQ(reward("\\boxed{14\\%}, \\boxed{16\\%}", "$\\{14, 15\\}$"), 0.0);
  EXPECT_EQ(reward("\\boxed{(14\\%, 15\\%)}", "$(14, 15)$"), 1.0);
  // A decimal on either side: both are rounded values, the percent applied.
  EXPECT_EQ(reward("\\boxed{0.14}", "14%"), 1.0);
  EXPECT_EQ(reward("\\boxed{14\\%}", "0.14"), 1.0);
  EXPECT_EQ(reward("\\boxed{14.5\\%}", "14.5"), 0.0);
  EXPECT_EQ(reward("\\boxed{14.0}", "14%"), 0.0);
  EXPECT_EQ(reward("\\boxed{14\\%}", "14.0"), 0.0);
  EXPECT_EQ(reward("\\boxed{\\frac{7}{50}}", "14%"), 1.0);  // a fraction: by value too
  // sympy keeps "-14\%" as -1*14*(1/100), no longer a percentage of a number.
  EXPECT_EQ(reward("\\boxed{-14\\%}", "-14"), 0.0);
  EXPECT_EQ(reward("\\boxed{-14}", "$-14\\%$"), 0.0);
  // A matrix is evaluated (the percent applied) before its cells are compared.
  EXPECT_EQ(reward("\\boxed{\\begin{pmatrix} 14\\% \\\\ 15 \\end{pmatrix}}",
                   "$\\begin{pmatrix} 14 \\\\ 15 \\end{pmatrix}$"),
            0.0);
  // An equation compares the difference of its sides, which is no number.
  EXPECT_EQ(reward("\\boxed{x = 14\\%}", "$x = 14$"), 0.0);
}

TEST(MathVerifyEquiv, Numbers) {
  EXPECT_EQ(reward("\\boxed{0.666667}", "$\\frac{2}{3}$"), 1.0);
  EXPECT_EQ(reward("\\boxed{0.67}", "$\\frac{2}{3}$"), 0.0);
  EXPECT_EQ(reward("\\boxed{3\\frac{1}{2}}", "3.5"), 1.0);
  EXPECT_EQ(reward("\\boxed{-3\\frac{1}{2}}", "-3.5"), 1.0);
  EXPECT_EQ(reward("\\boxed{4.5 \\times 10^3}", "4500"), 1.0);
  EXPECT_EQ(reward("\\boxed{1000000}", "100000"), 0.0);
  EXPECT_EQ(reward("\\boxed{\\sqrt{8}}", "$2\\sqrt{2}$"), 1.0);
  EXPECT_EQ(reward("\\boxed{\\frac{\\sqrt{3}}{3}}", "$\\frac{1}{\\sqrt3}$"), 1.0);
  EXPECT_EQ(reward("\\boxed{\\frac{\\pi}{4}}", "$0.785398$"), 1.0);
  EXPECT_EQ(reward("\\boxed{2^{10}}", "1024"), 1.0);
  EXPECT_EQ(reward("\\boxed{\\binom{5}{2}}", "10"), 1.0);
  EXPECT_EQ(reward("\\boxed{5!}", "120"), 1.0);
  EXPECT_EQ(reward("\\boxed{|-3|}", "3"), 1.0);
}

TEST(MathVerifyEquiv, Symbolic) {
  EXPECT_EQ(reward("\\boxed{2x+3}", "$3+2x$"), 1.0);
  EXPECT_EQ(reward("\\boxed{(x+1)^2}", "$x^2+2x+1$"), 1.0);
  EXPECT_EQ(reward("\\boxed{\\frac{x^2-1}{x-1}}", "$x+1$"), 1.0);
  EXPECT_EQ(reward("\\boxed{3y+2}", "$3x+2$"), 0.0);
  EXPECT_EQ(reward("\\boxed{\\sin^2 x + \\cos^2 x}", "$1$"), 1.0);
  EXPECT_EQ(reward("\\boxed{C}", "$c$"), 1.0);  // symbols are case-folded
  EXPECT_EQ(reward("\\boxed{C}", "$B$"), 0.0);
}

// Substituting sample points into 0^w used to throw inside GiNaC, which
// leaked what it was building; the sanitizer build (scripts/fuzz.sh) runs
// this under LeakSanitizer.
TEST(MathVerifyEquiv, ZeroToASymbolicPowerIsComparedWithoutSamplePoints) {
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(reward("\\boxed{0^{w}}", "$\\frac{1}{2}$"), 0.0);
    EXPECT_EQ(reward("\\boxed{0^{ww/d2}}", "$0^{w}$"), 0.0);
  }
  EXPECT_EQ(reward("\\boxed{0^{w}}", "$0^{w}$"), 1.0);  // the same expression needs no sample points
  EXPECT_EQ(reward("\\boxed{0^{0}}", "$1$"), 1.0);  // as sympy's 0**0
  for (const char* undefined : {"\\boxed{0^{-1}}", "\\boxed{0^1^{0/o3}}", "\\boxed{0^{1/2x - y^{e}x}}",
                                "\\boxed{\\log_{1} 5}", "\\boxed{\\ln 0}", "\\boxed{\\csc 0}", "\\boxed{\\cot 0}",
                                "\\boxed{2^{777777777777777777771z/4}}", "\\boxed{x^{2 e e e e e e e e e m e e e e}}",
                                "\\boxed{2^{55555555555555555555557777-7N}}"})
    EXPECT_EQ(reward(undefined, "$2$"), 0.0) << undefined;
}

TEST(MathVerifyEquiv, Equations) {
  EXPECT_EQ(reward("\\boxed{x=5}", "5"), 1.0);
  EXPECT_EQ(reward("\\boxed{5}", "$x=5$"), 1.0);
  EXPECT_EQ(reward("\\boxed{y = 1 + 2x}", "$y=2x+1$"), 1.0);
  EXPECT_EQ(reward("\\boxed{y=2x-1}", "$y=2x+1$"), 0.0);
  EXPECT_EQ(reward("\\boxed{2x = 8}", "$x=4$"), 1.0);
  EXPECT_EQ(reward("\\boxed{x = 4}", "$2x+3=11$"), 1.0);
}

TEST(MathVerifyEquiv, SetsTuplesIntervals) {
  EXPECT_EQ(reward("\\boxed{\\{1,2,3\\}}", "$\\{3,2,1\\}$"), 1.0);
  EXPECT_EQ(reward("\\boxed{\\{1,2\\}}", "$\\{1,2,3\\}$"), 0.0);
  EXPECT_EQ(reward("\\boxed{3, 1, 2}", "$\\{1,2,3\\}$"), 1.0);
  EXPECT_EQ(reward("\\boxed{(2,1)}", "$(1,2)$"), 0.0);
  EXPECT_EQ(reward("\\boxed{(1,2)}", "$(1,2)$"), 1.0);
  EXPECT_EQ(reward("\\boxed{(1,2,3)}", "$(1,2,3)$"), 1.0);
  EXPECT_EQ(reward("\\boxed{(3,2,1)}", "$(1,2,3)$"), 0.0);
  EXPECT_EQ(reward("\\boxed{[0,1]}", "$[0,1]$"), 1.0);
  EXPECT_EQ(reward("\\boxed{[0,1)}", "$[0,1]$"), 0.0);
  EXPECT_EQ(reward("\\boxed{(-\\infty, 3)}", "$x<3$"), 1.0);
  EXPECT_EQ(reward("\\boxed{(-\\infty, 3]}", "$x \\le 3$"), 1.0);
  EXPECT_EQ(reward("\\boxed{(-\\infty, 3]}", "$x<3$"), 0.0);
  EXPECT_EQ(reward("\\boxed{(1, 2]}", "$1 < x \\leq 2$"), 1.0);
  EXPECT_EQ(reward("\\boxed{x > 2}", "$x > 2$"), 1.0);
  EXPECT_EQ(reward("\\boxed{2 < x}", "$x > 2$"), 1.0);
  EXPECT_EQ(reward("\\boxed{(-\\infty,1)\\cup(2,\\infty)}", "$(-\\infty,1)\\cup(2,\\infty)$"), 1.0);
  EXPECT_EQ(reward("\\boxed{\\pm 2}", "$\\{2,-2\\}$"), 1.0);
  EXPECT_EQ(reward("\\boxed{(-\\infty, \\infty)}", "$\\mathbb{R}$"), 1.0);
  // As in Math-Verify only a gold relation is read as a set, not a predicted one.
  EXPECT_EQ(reward("\\boxed{x<3}", "$(-\\infty,3)$"), 0.0);
  // (a, b) also reads as a pair, in order.
  EXPECT_EQ(reward("\\boxed{1, 2}", "$(1,2)$"), 1.0);
  EXPECT_EQ(reward("\\boxed{2, 1}", "$(1,2)$"), 0.0);
}

TEST(MathVerifyEquiv, BareLatexApi) {
  EXPECT_TRUE(gm::latex_answers_equivalent("\\frac{1}{2}", "0.5"));
  EXPECT_TRUE(gm::latex_answers_equivalent("x^2-1", "(x-1)(x+1)"));
  EXPECT_FALSE(gm::latex_answers_equivalent("x^2-1", "(x-1)^2"));
  EXPECT_FALSE(gm::latex_answers_equivalent("\\frac{1}{", "1"));
}

TEST(MathVerifyEquiv, Matrices) {
  EXPECT_EQ(reward("\\boxed{\\begin{pmatrix} 1 & 2 \\\\ 3 & 4 \\end{pmatrix}}",
                   "$\\begin{pmatrix} 1 & 2 \\\\ 3 & 4 \\end{pmatrix}$"),
            1.0);
  EXPECT_EQ(reward("\\boxed{\\begin{pmatrix} 1 & 2 \\\\ 3 & 5 \\end{pmatrix}}",
                   "$\\begin{pmatrix} 1 & 2 \\\\ 3 & 4 \\end{pmatrix}$"),
            0.0);
  EXPECT_EQ(reward("\\boxed{\\begin{pmatrix} 0.5 \\\\ 2 \\end{pmatrix}}",
                   "$\\begin{pmatrix} \\frac{1}{2} \\\\ 2 \\end{pmatrix}$"),
            1.0);
}

// Cases where math_verify_oracle_test found us apart from Math-Verify 0.9.
// latex2sympy2_extended needs braced arguments; only the gold is repaired first.
TEST(MathVerifyOracleCases, UnbracedArgumentsParseOnlyInTheGold) {
  EXPECT_EQ(reward("\\boxed{\\frac12}", "$0.5$"), 0.0);
  EXPECT_EQ(reward("\\boxed{6 \\sqrt 5}", "$6\\sqrt{5}$"), 0.0);
  EXPECT_EQ(reward("\\boxed{\\sqrt x}", "$\\sqrt{x}$"), 0.0);
  EXPECT_EQ(reward("\\boxed{\\binom52}", "10"), 0.0);
  EXPECT_EQ(reward("\\boxed{6\\sqrt{5}}", "$6\\sqrt 5$"), 1.0);
  EXPECT_EQ(reward("\\boxed{\\sqrt{x}}", "$\\sqrt x$"), 1.0);
  EXPECT_EQ(reward("\\boxed{\\frac{1}{2}}", "$\\frac12$"), 1.0);
}

// Several boxes make one set, whose elements merge as in sympy's FiniteSet.
TEST(MathVerifyOracleCases, SeveralBoxesMergeLikeSympySets) {
  EXPECT_EQ(reward("\\boxed{\\begin{pmatrix} 0 \\\\ 7 \\end{pmatrix}} or "
                   "\\boxed{\\begin{bmatrix} 0 \\\\ 7 \\end{bmatrix}}",
                   "$\\begin{pmatrix} 0 \\\\ 7 \\end{pmatrix}$"),
            1.0);
  EXPECT_EQ(reward("\\boxed{\\frac{1}{2}}, \\boxed{\\frac{2}{4}}", "$\\frac12$"), 1.0);
  EXPECT_EQ(reward("\\boxed{58\\%}, \\boxed{58 \\%}", "$58\\%$"), 1.0);
  // A percentage is kept apart from the plain number of the same value.
  EXPECT_EQ(reward("\\boxed{\\frac{58}{100}}, \\boxed{58 \\%}", "58%"), 0.0);
  EXPECT_EQ(reward("\\boxed{36%} and \\boxed{0.36}", "\\boxed{0.36}"), 0.0);
}

TEST(MathVerifyRobustness, MalformedInputNeverThrows) {
  const std::vector<std::string> inputs = {
      "", "\\boxed{", "\\boxed{}", "\\boxed{\\frac{1}{0}}", "$$", "$", "\\boxed{)(}", "\\boxed{\\frac{}{}}",
      "\\boxed{x^{10^{10}}}", "\\boxed{2^{100000000}}", "\\boxed{(x+1)^{99999}}", "\\boxed{1000000!}",
      "\\boxed{\\begin{pmatrix} 1 & 2 \\\\ 3 \\end{pmatrix}}", "\\boxed{\\sqrt[}", "\\boxed{|x}",
      "\\boxed{\\log_0 5}", "\\boxed{\\ln 0}", "\xff\xfe\\boxed{\xc3\x28}", "\\boxed{\\left(}",
      std::string(5000, '{') + "1" + std::string(5000, '}'), "\\boxed{" + std::string(3000, '(') + "1" +
      std::string(3000, ')') + "}"};
  for (const std::string& s : inputs) {
    for (const std::string& gold : {std::string("$1$"), s}) {
      gm::VerifyResult r{};
      EXPECT_NO_THROW(r = gm::accuracy_reward(s, gold)) << s.substr(0, 80);
      EXPECT_TRUE(r.reward == 0.0 || r.reward == 1.0);
    }
  }
  EXPECT_EQ(reward("\\boxed{\\frac{1}{0}}", "1"), 0.0);
  EXPECT_EQ(reward("\\boxed{5", "5"), 0.0);  // unclosed box
  const std::string deep = "\\boxed{" + std::string(400, '{') + "7" + std::string(400, '}') + "}";
  EXPECT_EQ(reward(deep, "7"), 0.0);  // too deep to parse: not a crash
  EXPECT_EQ(reward("\\boxed{" + std::string(20, '{') + "7" + std::string(20, '}') + "}", "7"), 1.0);
}

TEST(MathVerifyRobustness, ConcurrentCalls) {
  const std::vector<std::pair<std::string, std::string>> work = {
      {"\\boxed{2x+3}", "$3+2x$"}, {"\\boxed{\\sqrt{8}}", "$2\\sqrt{2}$"}, {"\\boxed{42}", "42"},
      {"\\boxed{(-\\infty, 3)}", "$x<3$"}, {"\\boxed{\\frac{1}{\\sqrt{2}}}", "$\\frac{\\sqrt2}{2}$"}};
  std::vector<std::thread> threads;
  std::vector<int> wrong(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int k = 0; k < 300; ++k) {
        const auto& w = work[(k + t) % work.size()];
        if (gm::accuracy_reward(w.first, w.second).reward != 1.0) ++wrong[t];
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(wrong[t], 0) << "thread " << t;
}
