#include "trainer/conversations.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "tokenizer/chat_prompt.h"

namespace grpo::trainer {

struct ConversationRunner::Live {
  Sample out;                      // the conversation so far, as it will train
  nlohmann::json messages;         // the prompt's messages, then every turn
  std::string text;                // out.ids decoded, special tokens kept: the next prompt's text tail
  uint64_t id = 0;                 // the handler's name for it
  grpo_conversation* state = nullptr;
  bool begin_failed = false;
  bool all_logprobs = true;        // every turn came with its log-probs
  uint32_t turns = 0;              // policy turns so far
  std::vector<int32_t> last_ids;   // the last policy turn
  uint64_t seed = 0;
  std::vector<int32_t> stop_ids;
};

ConversationRunner::ConversationRunner(plugins::MultiturnHandler& handler, const tok::Tokenizer& tokenizer,
                                       tok::ChatFamily family, ConversationLimits limits)
    : handler_(handler), tokenizer_(tokenizer), family_(family), limits_(limits) {}

namespace {

// A seed for every (conversation, turn): distinct across copies and turns.
uint64_t turn_seed(uint64_t conversation_seed, uint32_t turn) {
  uint64_t z = conversation_seed + 0x9E3779B97F4A7C15ull * (turn + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// fn(0), ..., fn(n - 1) on up to `threads` threads; the first exception is
// rethrown once all are done. The handler's calls for different
// conversations overlap this way when it declares itself thread-safe (a tool
// that waits on a sandbox or a server).
void for_each_index(size_t n, size_t threads, const std::function<void(size_t)>& fn) {
  threads = std::min(threads, n);
  if (threads <= 1) {
    for (size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::atomic<size_t> next{0};
  std::mutex error_mutex;
  std::exception_ptr error;
  std::vector<std::thread> pool;
  for (size_t t = 0; t < threads; ++t)
    pool.emplace_back([&] {
      for (size_t i; (i = next++) < n;) {
        try {
          fn(i);
        } catch (...) {
          std::lock_guard<std::mutex> lock(error_mutex);
          if (!error) error = std::current_exception();
        }
      }
    });
  for (std::thread& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace

std::vector<Sample> ConversationRunner::run(const GenerateFn& generate,
                                            const std::vector<plugins::SampleRequest>& requests,
                                            const plugins::TrainerState& state, std::map<std::string, double>& metrics,
                                            const std::string& prefix) {
  const long errors_before = handler_.failures();
  // Conversations in the order one generate call returns completions:
  // request by request, copy by copy.
  std::vector<Live> live;
  for (size_t p = 0; p < requests.size(); ++p) {
    const plugins::SampleRequest& r = requests[p];
    for (uint32_t i = 0; i < r.n; ++i) {
      Live c;
      c.out.prompt = r.prompt;
      c.out.request = p;
      c.out.index = r.first_copy + i;
      c.messages = r.prompt ? nlohmann::json::parse(r.prompt->messages_json) : nlohmann::json::array();
      c.seed = turn_seed(r.seed, i + 1000003u);
      c.stop_ids = r.stop_ids;
      c.id = next_id_++;
      live.push_back(std::move(c));
    }
  }
  const size_t threads = handler_.concurrency();
  for_each_index(live.size(), threads, [&](size_t k) {
    Live& c = live[k];
    if (c.out.prompt)
      c.state = handler_.begin(c.id, *c.out.prompt, static_cast<int64_t>(c.out.request), c.out.index, state,
                               &c.begin_failed);
  });
  // The sampler may keep what it computed for a call's completions while
  // another turn can follow, and reuse it in that turn (prefix_flags).
  auto can_follow = [&](uint32_t turns_done) {
    return !limits_.max_turns || static_cast<int64_t>(turns_done) < *limits_.max_turns;
  };
  std::vector<Sample> turns = generate(requests, can_follow(1) ? GRPO_PREFIX_KEEP : 0u);
  std::vector<size_t> waiting(live.size());  // the conversation of each sample in `turns`
  for (size_t k = 0; k < waiting.size(); ++k) waiting[k] = k;
  while (!waiting.empty()) {
    std::vector<std::optional<plugins::SampleRequest>> after(waiting.size());
    for_each_index(waiting.size(), threads,
                   [&](size_t k) { after[k] = advance(live[waiting[k]], std::move(turns[k]), state); });
    std::vector<plugins::SampleRequest> next;
    std::vector<size_t> still;
    for (size_t k = 0; k < waiting.size(); ++k) {
      if (!after[k]) continue;
      next.push_back(std::move(*after[k]));
      still.push_back(waiting[k]);
    }
    waiting = std::move(still);
    bool more = false;
    for (size_t k : waiting) more = more || can_follow(live[k].turns + 1);
    if (!next.empty()) turns = generate(next, GRPO_PREFIX_CONTINUES | (more ? GRPO_PREFIX_KEEP : 0u));
  }

  for_each_index(live.size(), threads, [&](size_t k) { finish(live[k], state); });
  double total_turns = 0, max_turns = 0, calls = 0, failures = 0;
  std::vector<Sample> out;
  out.reserve(live.size());
  for (Live& c : live) {
    total_turns += c.out.turns;
    max_turns = std::max(max_turns, static_cast<double>(c.out.turns));
    calls += c.out.tool_calls;
    failures += c.out.tool_failures;
    out.push_back(std::move(c.out));
  }
  const auto n = static_cast<double>(std::max<size_t>(1, out.size()));
  metrics[prefix + "turns/mean"] = total_turns / n;
  metrics[prefix + "turns/max"] = max_turns;
  metrics[prefix + "tools/call_frequency"] = calls / n;
  metrics[prefix + "tools/failure_frequency"] = calls > 0 ? failures / calls : 0.0;
  metrics[prefix + "multi_turn/handler_errors"] += static_cast<double>(handler_.failures() - errors_before);
  return out;
}

plugins::TurnView ConversationRunner::last_turn(const Live& c, const plugins::TrainerState& state) const {
  plugins::TurnView v;
  v.conversation_json = c.messages.dump();
  v.completion = c.out.text;
  v.ids = &c.last_ids;
  v.finish = c.out.finish;
  v.turn = c.turns - 1;
  v.columns = c.out.prompt && c.out.prompt->columns ? c.out.prompt->columns.get() : nullptr;
  v.state = state;
  return v;
}

std::optional<plugins::SampleRequest> ConversationRunner::advance(Live& c, Sample&& turn,
                                                                  const plugins::TrainerState& state) {
  Sample& out = c.out;
  out.last_turn_begin = out.ids.size();
  out.ids.insert(out.ids.end(), turn.ids.begin(), turn.ids.end());
  out.sampled.insert(out.sampled.end(), turn.ids.size(), 1);
  if (turn.logprobs.size() == turn.ids.size()) {
    out.logprobs.insert(out.logprobs.end(), turn.logprobs.begin(), turn.logprobs.end());
  } else {
    c.all_logprobs = false;
    out.logprobs.resize(out.ids.size(), 0.0f);
  }
  out.text = tokenizer_.decode_sampled(turn.ids, /*skip_special_tokens=*/true);
  out.finish = turn.finish;
  c.text += tokenizer_.decode_sampled(turn.ids, /*skip_special_tokens=*/false);
  c.messages.push_back({{"role", "assistant"}, {"content", out.text}});
  c.last_ids = std::move(turn.ids);
  const uint32_t policy_turns = ++c.turns;
  out.turns = policy_turns;

  const int64_t max_len = limits_.max_completion_length;
  const auto used = static_cast<int64_t>(out.ids.size());
  // Ended by length or abort, or out of turns or tokens: no handler call.
  if (c.begin_failed || !out.prompt || out.finish != FinishReason::Stop) return std::nullopt;
  if (limits_.max_turns && policy_turns >= *limits_.max_turns) return std::nullopt;
  if (limits_.total_scope && used >= max_len) return std::nullopt;

  plugins::TurnView view = last_turn(c, state);
  view.tokens_left = limits_.total_scope ? max_len - used : -1;
  plugins::TurnDecision d = handler_.step(c.state, view);
  out.tool_calls += d.tool_calls;
  out.tool_failures += d.tool_failures;
  if (d.failed) out.handler_failed = true;
  if (d.done) return std::nullopt;

  const std::string last_sampled =
      c.last_ids.empty() ? "" : tokenizer_.decode_sampled({c.last_ids.back()}, /*skip_special_tokens=*/false);
  std::string appended_text;
  try {
    appended_text = tok::render_continuation(tokenizer_, family_, d.appended, last_sampled);
  } catch (const tok::ChatTemplateError&) {  // e.g. a tool message under a template that has none
    out.handler_failed = true;
    return std::nullopt;
  }
  const std::vector<int32_t> appended = tokenizer_.encode(appended_text, /*add_special_tokens=*/false);
  // With a total budget the appended message must leave room for an answer;
  // otherwise the conversation is cut by length here.
  if (limits_.total_scope && used + static_cast<int64_t>(appended.size()) >= max_len) {
    out.finish = FinishReason::Length;
    return std::nullopt;
  }
  // Whatever the scope, the whole sequence must fit the model: a message
  // that leaves no room for one more token ends the conversation by length
  // (a policy that keeps calling a tool would otherwise grow it without end).
  const auto prompt_len = static_cast<int64_t>(out.prompt->ids.size());
  const int64_t room = limits_.context - prompt_len - used - static_cast<int64_t>(appended.size());
  if (room < 1) {
    if (!told_context_.exchange(true))
      spdlog::warn("multi-turn: a conversation reached the model's context of {} tokens (max_length, else "
                   "max_position_embeddings) after {} turns; it ends there by length, as will any other",
                   limits_.context, policy_turns);
    out.finish = FinishReason::Length;
    return std::nullopt;
  }
  out.ids.insert(out.ids.end(), appended.begin(), appended.end());
  out.sampled.insert(out.sampled.end(), appended.size(), 0);
  out.logprobs.insert(out.logprobs.end(), appended.size(), 0.0f);
  c.text += appended_text;
  for (const tok::ChatMessage& m : d.appended) c.messages.push_back({{"role", m.role}, {"content", m.content}});

  plugins::SampleRequest r;
  r.prompt = out.prompt;
  r.prompt_ids = out.prompt->ids;
  r.prompt_ids.insert(r.prompt_ids.end(), out.ids.begin(), out.ids.end());
  r.prompt_text = out.prompt->text + c.text;
  r.messages_json = c.messages.dump();
  r.n = 1;
  r.seed = turn_seed(c.seed, policy_turns);
  r.stop_ids = c.stop_ids;
  int64_t budget = limits_.total_scope ? max_len - static_cast<int64_t>(out.ids.size()) : max_len;
  budget = std::min(budget, room);
  if (limits_.total_scope || budget < max_len) r.max_new_tokens = static_cast<int32_t>(budget);
  return r;
}

void ConversationRunner::finish(Live& c, const plugins::TrainerState& state) {
  Sample& out = c.out;
  if (handler_.has_reward() && !out.handler_failed && !c.begin_failed) {
    out.environment_reward = handler_.reward(c.state, last_turn(c, state));
  }
  if (c.begin_failed) out.handler_failed = true;
  handler_.end(c.state);
  out.conversation_json = c.messages.dump();
  if (!c.all_logprobs) out.logprobs.clear();
}

}  // namespace grpo::trainer
