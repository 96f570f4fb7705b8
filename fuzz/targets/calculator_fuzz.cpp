// The calculator tool's answer to any tool call a policy may write, the bytes
// taken both as the expression and as the whole call: a value or an error
// message, always valid UTF-8 (the host writes it into JSON) and short. A crash,
// a stack overflow or undefined behaviour in the 64-bit arithmetic is a finding.
#include <grpo/sdk_json.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>

#include "fuzz_support.h"
#include "tool_call.h"

namespace {

void check(const std::string& answer) {
  try {
    (void)nlohmann::json(answer).dump();  // throws on invalid UTF-8, as the host's writer does
  } catch (const nlohmann::json::exception& e) {
    std::fprintf(stderr, "the answer is not UTF-8: %s\n", e.what());
    std::abort();
  }
  // The longest message quotes 120 bytes of the input, each at most \xNN.
  if (answer.size() > 1024) {
    std::fprintf(stderr, "an answer of %zu bytes\n", answer.size());
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = grpo::fuzz::text_of(data, size);
  const std::string call =
      "{\"name\": \"calculator\", \"arguments\": {\"expression\": " + grpo::json_quote(text) + "}}";
  bool failed = false;
  check(grpo::calculator::answer(call, &failed));
  check(grpo::calculator::answer(text, &failed));
  return 0;
}
