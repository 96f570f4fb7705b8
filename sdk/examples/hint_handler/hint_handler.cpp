// hint: a multi-turn handler (grpo::MultiturnBase) built against the installed
// SDK alone. After the policy's first answer it asks the user's follow-up
// (option `hint`) once; after the second answer the conversation ends. Its
// per-conversation state is one bool: whether it asked already.
#include <grpo/sdk.hpp>

struct Hint : grpo::MultiturnBase<bool> {
  static constexpr const char* name = "hint";
  static constexpr const char* version = "1.0.0";
  static constexpr const char* description = "asks one follow-up question, then ends the conversation";
  static std::vector<grpo::OptionSpec> options() {
    return {{"hint", "string", "\"Are you sure? Check it once more.\"", "the follow-up the user asks"}};
  }

  Hint(const grpo::Options& o, const grpo::Host&) : hint(o.get_string("hint", "Are you sure? Check it once more.")) {}

  void step(bool& asked, const grpo::Turn&, grpo::TurnResult& out) const {
    if (asked) return out.finish();
    asked = true;
    out.append("user", hint);  // rendered by the run's chat template; its tokens carry no loss
  }

  std::string hint;
};

GRPO_EXPORT_MULTITURN(Hint)
