// The accuracy reward's LaTeX answer parsing and comparison (Math-Verify
// semantics) on any completion: a verdict, never a crash or a hang.
#include "fuzz_support.h"
#include "math_verify.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = grpo::fuzz::text_of(data, size);
  const size_t split = text.find('\n');
  const std::string_view gold = split == std::string_view::npos ? std::string_view("$\\frac{1}{2}$") : text.substr(0, split);
  const std::string_view completion = split == std::string_view::npos ? text : text.substr(split + 1);
  grpo::fuzz::expect_clean([&] { (void)grpo::math::accuracy_reward(completion, gold); });
  return 0;
}
