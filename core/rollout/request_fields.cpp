#include "rollout/request_fields.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "util/json_input.h"

namespace grpo::rollout {

using nlohmann::json;

std::string field_path(const std::string& parent, const std::string& key) {
  return parent.empty() ? key : parent + "." + key;
}

const json& require_object(const json& value, const std::string& path) {
  if (!value.is_object()) throw RequestError(path, fmt::format("expected a JSON object, got {}", value.type_name()));
  return value;
}

namespace {

const json* find(const json& obj, const std::string& key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

}  // namespace

std::optional<int64_t> read_int(const json& obj, const std::string& key, const std::string& parent) {
  const json* v = find(obj, key);
  if (!v) return std::nullopt;
  // 2.0 is accepted as 2 (pydantic does the same), 2.5 is not; the range is
  // checked before the conversion, which is undefined for -2e52.
  if (v->is_number_float()) {
    const double d = v->get<double>();
    if (std::trunc(d) == d && d >= -9.2e18 && d <= 9.2e18) return static_cast<int64_t>(d);
    if (std::trunc(d) == d) throw RequestError(field_path(parent, key), "integer out of range");
  }
  if (!v->is_number_integer())
    throw RequestError(field_path(parent, key), fmt::format("expected an integer, got {}", util::json_excerpt(*v)));
  if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    throw RequestError(field_path(parent, key), "integer out of range");
  return v->get<int64_t>();
}

std::optional<double> read_number(const json& obj, const std::string& key, const std::string& parent) {
  const json* v = find(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_number()) throw RequestError(field_path(parent, key), fmt::format("expected a number, got {}", util::json_excerpt(*v)));
  return v->get<double>();
}

std::optional<bool> read_bool(const json& obj, const std::string& key, const std::string& parent) {
  const json* v = find(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) throw RequestError(field_path(parent, key), fmt::format("expected true or false, got {}", util::json_excerpt(*v)));
  return v->get<bool>();
}

std::optional<std::vector<std::string>> read_strings(const json& obj, const std::string& key, const std::string& parent) {
  const json* v = find(obj, key);
  if (!v) return std::nullopt;
  if (v->is_string()) return std::vector<std::string>{v->get<std::string>()};
  if (!v->is_array()) throw RequestError(field_path(parent, key), "expected a string or a list of strings");
  std::vector<std::string> out;
  for (size_t i = 0; i < v->size(); ++i) {
    if (!(*v)[i].is_string())
      throw RequestError(fmt::format("{}[{}]", field_path(parent, key), i), "expected a string");
    out.push_back((*v)[i].get<std::string>());
  }
  return out;
}

std::optional<std::vector<int32_t>> read_ids(const json& obj, const std::string& key, const std::string& parent) {
  const json* v = find(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_array()) throw RequestError(field_path(parent, key), "expected a list of token ids");
  std::vector<int32_t> out;
  for (size_t i = 0; i < v->size(); ++i) {
    const json& id = (*v)[i];
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > std::numeric_limits<int32_t>::max())
      throw RequestError(fmt::format("{}[{}]", field_path(parent, key), i), "expected a token id (an integer >= 0)");
    out.push_back(static_cast<int32_t>(id.get<int64_t>()));
  }
  return out;
}

void read_sampling_fields(const json& obj, const std::string& parent, bool extended, SamplingFields& out) {
  require_object(obj, parent.empty() ? "body" : parent);
  if (auto v = read_int(obj, "n", parent)) out.n = *v;
  if (auto v = read_number(obj, "repetition_penalty", parent)) out.repetition_penalty = *v;
  if (auto v = read_number(obj, "temperature", parent)) out.temperature = *v;
  if (auto v = read_number(obj, "top_p", parent)) out.top_p = *v;
  if (auto v = read_int(obj, "top_k", parent)) out.top_k = *v;
  if (auto v = read_number(obj, "min_p", parent)) out.min_p = *v;
  if (obj.contains("max_tokens")) out.max_tokens = read_int(obj, "max_tokens", parent);
  if (obj.contains("logprobs")) out.logprobs = read_int(obj, "logprobs", parent).value_or(-1);
  if (!extended) return;
  if (auto v = read_int(obj, "seed", parent)) out.seed = static_cast<uint64_t>(*v);
  if (auto v = read_ids(obj, "stop_token_ids", parent)) out.stop_token_ids = *v;
  if (auto v = read_strings(obj, "stop", parent)) out.stop = *v;
  if (auto v = read_bool(obj, "ignore_eos", parent)) out.ignore_eos = *v;
  static const char* kKnown[] = {"n",    "repetition_penalty", "temperature",    "top_p", "top_k",     "min_p",
                                 "max_tokens", "logprobs",     "seed", "stop_token_ids", "stop",  "ignore_eos"};
  for (const auto& item : obj.items())
    if (std::none_of(std::begin(kKnown), std::end(kKnown), [&](const char* k) { return item.key() == k; }))
      throw RequestError(field_path(parent, item.key()),
                         "unknown sampling parameter; supported: n, repetition_penalty, temperature, top_p, top_k, "
                         "min_p, max_tokens, logprobs, seed, stop_token_ids, stop, ignore_eos");
}

void check_call_size(const SamplingFields& f, size_t prompts, const std::string& list_field,
                     const PromptContext& ctx) {
  if (f.n < 1) throw RequestError("n", fmt::format("must be >= 1, got {}", f.n));
  if (f.n > ctx.max_n)
    throw RequestError("n", fmt::format("{} completions per prompt, over the server's limit of {} (--max_n)", f.n,
                                        ctx.max_n));
  const auto count = static_cast<int64_t>(prompts);
  if (count <= ctx.max_sequences_per_call / f.n) return;  // count × n within the limit, without overflow
  const std::string total = count <= std::numeric_limits<int64_t>::max() / f.n ? fmt::format(" = {} sequences", count * f.n) : "";
  const int64_t fit = ctx.max_sequences_per_call / f.n;
  throw RequestError(list_field, fmt::format("{} prompts × n {}{}, over the server's limit of {} sequences per call "
                                             "(--max_sequences_per_call); send at most {} prompts per call with this n",
                                             count, f.n, total, ctx.max_sequences_per_call, fit));
}

GenerationJob make_job(const SamplingFields& f, std::vector<std::vector<int32_t>> prompts,
                       const std::vector<std::string>& prompt_paths, const PromptContext& ctx, SeedSource& seeds) {
  if (!(f.repetition_penalty > 0)) throw RequestError("repetition_penalty", "must be > 0");
  if (!(f.temperature >= 0)) throw RequestError("temperature", "must be >= 0 (0 = greedy)");
  if (!(f.top_p > 0 && f.top_p <= 1)) throw RequestError("top_p", "must be in (0, 1]");
  if (!(f.min_p >= 0 && f.min_p <= 1)) throw RequestError("min_p", "must be in [0, 1]");
  if (f.top_k < -1) throw RequestError("top_k", "must be -1 (off), 0 (off) or a positive count");
  if (f.max_tokens && *f.max_tokens < 0) throw RequestError("max_tokens", "must be >= 0");
  if (f.logprobs < -1) throw RequestError("logprobs", "must be null or >= 0");
  for (int32_t id : f.stop_token_ids)
    if (id >= ctx.vocab_size) throw RequestError("stop_token_ids", fmt::format("{} is not a token id of this model", id));

  GenerationJob job;
  size_t longest = 0;
  const uint64_t shared_seed = f.seed ? *f.seed : 0;
  for (size_t p = 0; p < prompts.size(); ++p) {
    auto& ids = prompts[p];
    if (ids.empty()) throw RequestError(prompt_paths[p], "the prompt is empty");
    if (static_cast<int64_t>(ids.size()) > ctx.max_prompt_tokens)
      throw RequestError(prompt_paths[p], fmt::format("{} tokens, over the server's limit of {} (--max_prompt_tokens)",
                                                      ids.size(), ctx.max_prompt_tokens));
    for (size_t t = 0; t < ids.size(); ++t)
      if (ids[t] >= ctx.vocab_size)
        throw RequestError(fmt::format("{}[{}]", prompt_paths[p], t),
                           fmt::format("{} is not a token id of this model (vocabulary of {})", ids[t], ctx.vocab_size));
    longest = std::max(longest, ids.size());
    model::GenerateRequest r;
    r.prompt_ids = std::move(ids);
    r.n = f.n;
    // One seed for every prompt of a seeded call, as vLLM shares one SamplingParams.
    r.seed = f.seed ? shared_seed : seeds.next();
    if (!f.ignore_eos) r.stop_ids = ctx.eos_ids;
    r.stop_ids.insert(r.stop_ids.end(), f.stop_token_ids.begin(), f.stop_token_ids.end());
    job.requests.push_back(std::move(r));
  }
  model::SamplingParams& sp = job.params;
  // vLLM's temperature 0 means greedy; the engine's greedy is top_k = 1.
  sp.temperature = f.temperature > 0 ? f.temperature : 1.0;
  sp.top_k = f.temperature > 0 ? std::max<int64_t>(f.top_k, 0) : 1;
  sp.top_p = f.top_p;
  sp.min_p = f.min_p;
  sp.repetition_penalty = f.repetition_penalty;
  // As vLLM's engine: no sequence grows past the context (max_model_len), whatever max_tokens asks.
  const int64_t room = std::max<int64_t>(ctx.max_model_len - static_cast<int64_t>(longest), 0);
  sp.max_new_tokens = f.max_tokens ? std::min(*f.max_tokens, room) : room;
  sp.stop_strings = f.stop;
  sp.top_logprobs = std::max<int64_t>(f.logprobs, 0);
  job.logprobs = f.logprobs;
  return job;
}

uint64_t SeedSource::next() {
  std::lock_guard<std::mutex> lock(mutex_);
  return rng_();
}

}  // namespace grpo::rollout
