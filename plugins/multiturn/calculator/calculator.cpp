// calculator: a tool environment. The policy calls the tool as Qwen2.5's
// template tells it to,
//   <tool_call>
//   {"name": "calculator", "arguments": {"expression": "17 * 23"}}
//   </tool_call>
// and gets the exact value back as a `tool` message (rational arithmetic;
// nothing is executed). A malformed call, an unknown tool or a bad
// expression gets an error message instead and counts as a failed call. A
// turn without a tool call is the final answer: the conversation ends.
#include <string>
#include <vector>

#include <grpo/sdk.hpp>

#include "tool_call.h"

namespace {

constexpr std::string_view kOpen = "<tool_call>", kClose = "</tool_call>";

}  // namespace

struct Calculator : grpo::MultiturnBase<> {
  static constexpr const char* name = "calculator";
  static constexpr const char* version = "1.0.0";
  static constexpr const char* description =
      "a calculator tool: <tool_call>{\"name\": \"calculator\", \"arguments\": {\"expression\": ...}}</tool_call> "
      "is answered with the exact value";
  static constexpr bool thread_safe = true;

  static std::vector<grpo::OptionSpec> options() {
    return {{"describe_tools", "bool", "true",
             "describe the tool in the system turn (the Qwen2.5 and Qwen3 templates do); false: the policy knows "
             "the call format from its training (any template)"}};
  }

  Calculator(const grpo::Options& o, const grpo::Host&) : describe(o.get_bool("describe_tools", true)) {}

  std::string tools_json() const {
    if (!describe) return {};
    return R"([{"type": "function", "function": {"name": "calculator", "description": "Evaluate an arithmetic )"
           R"(expression exactly: + - * / ^ and parentheses over integers and decimals.", "parameters": {"type": )"
           R"("object", "properties": {"expression": {"type": "string", "description": "e.g. 17 * 23 - 4"}}, )"
           R"("required": ["expression"]}}}])";
  }

  void step(grpo::NoState&, const grpo::Turn& turn, grpo::TurnResult& out) const {
    const std::string_view text = turn.completion();
    bool any = false;
    for (size_t at = text.find(kOpen); at != std::string_view::npos; at = text.find(kOpen, at + kOpen.size())) {
      any = true;
      const size_t begin = at + kOpen.size(), end = text.find(kClose, begin);
      bool failed = true;
      const std::string reply = end == std::string_view::npos
                                    ? "error: the tool call is not closed with </tool_call>"
                                    : grpo::calculator::answer(text.substr(begin, end - begin), &failed);
      out.count_tool_call(failed);
      out.append("tool", reply);
      if (end == std::string_view::npos) break;
    }
    if (!any) out.finish();  // no call: this turn is the answer
  }

  bool describe;
};

GRPO_EXPORT_MULTITURN(Calculator)
