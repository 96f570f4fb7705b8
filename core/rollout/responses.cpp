// Engine completions as the JSON TRL's VLLMClient and ms-swift's rollout
// client read.
#include <fmt/format.h>

#include <chrono>
#include <random>

#include "rollout/protocol.h"
#include "tokenizer/tokenizer.h"

namespace grpo::rollout {

using nlohmann::json;

namespace {

// One position's logprobs as vLLM reports them, sorted by rank: the sampled
// token alone for logprobs = 0; else the N most likely, plus the sampled
// token after them when it is not among them (so N or N + 1 entries).
void position_logprobs(const model::Completion& c, size_t t, int64_t n_top, json& values, json& ids) {
  values = json::array();
  ids = json::array();
  if (n_top == 0) {
    values.push_back(c.logprobs[t]);
    ids.push_back(c.ids[t]);
    return;
  }
  bool sampled_listed = false;
  for (size_t k = 0; k < c.top_ids[t].size(); ++k) {
    values.push_back(c.top_logprobs[t][k]);  // nlohmann writes NaN and -inf as null, as TRL's server does
    ids.push_back(c.top_ids[t][k]);
    sampled_listed = sampled_listed || c.top_ids[t][k] == c.ids[t];
  }
  if (!sampled_listed) {
    values.push_back(c.logprobs[t]);
    ids.push_back(c.ids[t]);
  }
}

// The completion's text as vLLM returns it: special tokens skipped, cut
// before the first stop string.
std::string completion_text(const model::Completion& c, const model::SamplingParams& params,
                             const tok::Tokenizer& tokenizer) {
  std::string text = tokenizer.decode_sampled(c.ids, /*skip_special_tokens=*/true);
  size_t cut = std::string::npos;
  for (const auto& s : params.stop_strings)
    if (!s.empty()) cut = std::min(cut, text.find(s));
  if (cut != std::string::npos) text.resize(cut);
  return text;
}

std::string completion_id() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("chatcmpl-{:016x}", rng());
}

}  // namespace

json generate_response(const GenerationJob& job, const std::vector<model::Completion>& completions) {
  json prompt_ids = json::array(), completion_ids = json::array();
  for (const auto& r : job.requests) prompt_ids.push_back(r.prompt_ids);
  for (const auto& c : completions) completion_ids.push_back(c.ids);
  json logprobs = nullptr, logprob_ids = nullptr;
  if (job.logprobs >= 0) {  // [seq][tok][k]
    logprobs = json::array();
    logprob_ids = json::array();
    for (const auto& c : completions) {
      json seq_values = json::array(), seq_ids = json::array();
      for (size_t t = 0; t < c.ids.size(); ++t) {
        json values, ids;
        position_logprobs(c, t, job.logprobs, values, ids);
        seq_values.push_back(std::move(values));
        seq_ids.push_back(std::move(ids));
      }
      logprobs.push_back(std::move(seq_values));
      logprob_ids.push_back(std::move(seq_ids));
    }
  }
  return json{{"prompt_ids", std::move(prompt_ids)},
              {"completion_ids", std::move(completion_ids)},
              {"logprobs", std::move(logprobs)},
              {"logprob_token_ids", std::move(logprob_ids)}};
}

json infer_response(const GenerationJob& job, const std::vector<model::Completion>& completions,
                    const tok::Tokenizer& tokenizer, const std::string& model_name) {
  const auto created = std::chrono::duration_cast<std::chrono::seconds>(
                           std::chrono::system_clock::now().time_since_epoch()).count();
  std::vector<json> responses(job.requests.size());
  std::vector<int64_t> completion_tokens(job.requests.size(), 0);
  for (size_t r = 0; r < job.requests.size(); ++r) responses[r]["choices"] = json::array();
  for (const auto& c : completions) {
    json choice{{"index", c.index},
                {"message", {{"role", "assistant"}, {"content", completion_text(c, job.params, tokenizer)}}},
                {"finish_reason", c.finish == model::FinishReason::Stop ? "stop" : "length"},
                {"token_ids", c.ids},
                {"logprobs", nullptr}};
    if (job.logprobs >= 0) {  // OpenAI's chat logprobs: one entry per token with its top alternatives
      json content = json::array();
      for (size_t t = 0; t < c.ids.size(); ++t) {
        json top = json::array();
        for (size_t k = 0; k < (job.logprobs > 0 ? c.top_ids[t].size() : 0); ++k)
          top.push_back({{"token", tokenizer.decode_sampled({c.top_ids[t][k]})}, {"logprob", c.top_logprobs[t][k]}});
        content.push_back({{"token", tokenizer.decode_sampled({c.ids[t]})}, {"logprob", c.logprobs[t]}, {"top_logprobs", top}});
      }
      choice["logprobs"] = {{"content", std::move(content)}};
    }
    responses[c.request]["choices"].push_back(std::move(choice));
    completion_tokens[c.request] += static_cast<int64_t>(c.ids.size());
  }
  json out = json::array();
  for (size_t r = 0; r < job.requests.size(); ++r) {
    const auto prompt_tokens = static_cast<int64_t>(job.requests[r].prompt_ids.size());
    json& resp = responses[r];
    resp["model"] = model_name;
    resp["usage"] = {{"prompt_tokens", prompt_tokens},
                     {"completion_tokens", completion_tokens[r]},
                     {"total_tokens", prompt_tokens + completion_tokens[r]}};
    resp["id"] = completion_id();
    resp["object"] = "chat.completion";
    resp["created"] = created;
    out.push_back(std::move(resp));
  }
  return out;
}

}  // namespace grpo::rollout
