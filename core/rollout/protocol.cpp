#include "rollout/protocol.h"

#include <fmt/format.h>

#include <algorithm>

#include "rollout/request_fields.h"
#include "tokenizer/chat_prompt.h"
#include "tokenizer/tokenizer.h"

namespace grpo::rollout {

using nlohmann::json;

namespace {

// Fields the protocol defines for features this server does not have: a
// request that uses them is refused rather than answered as if they were absent.
void refuse_unsupported(const json& body, const std::string& key, const std::string& why) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return;
  if (it->is_array() && std::all_of(it->begin(), it->end(), [](const json& v) { return v.is_null() || v.empty(); }))
    return;
  throw RequestError(key, why);
}

std::vector<int32_t> encode_conversation(const json& messages, const std::string& path, const PromptContext& ctx,
                                         const tok::ChatOptions& options) {
  if (!ctx.chat_family)
    throw RequestError(path, "the model's tokenizer has no chat template this server can render; send token ids "
                             "to /generate/ instead");
  if (!messages.is_array() || messages.empty())
    throw RequestError(path, "expected a non-empty list of {role, content} messages");
  try {
    return tok::encode_chat_prompt(*ctx.tokenizer, *ctx.chat_family, tok::messages_from_json(messages), options);
  } catch (const tok::ChatTemplateError& e) {
    throw RequestError(path, e.what());
  }
}

const json& require_list(const json& body, const std::string& key, const char* what) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) throw RequestError(key, fmt::format("required: {}", what));
  if (!it->is_array()) throw RequestError(key, fmt::format("expected {}, got {}", what, it->type_name()));
  return *it;
}

void merge_generation_kwargs(const json& body, SamplingFields& fields) {
  auto it = body.find("generation_kwargs");
  if (it == body.end() || it->is_null()) return;
  read_sampling_fields(require_object(*it, "generation_kwargs"), "generation_kwargs", /*extended=*/true, fields);
}

}  // namespace

GenerationJob parse_generate(const json& body, const PromptContext& ctx, SeedSource& seeds) {
  require_object(body, "body");
  const json& prompts = require_list(body, "prompts", "a list of strings or a list of token-id lists");
  refuse_unsupported(body, "images", "images are not supported: this server runs text-only models");
  refuse_unsupported(body, "structured_outputs_regex", "structured outputs are not supported");
  refuse_unsupported(body, "guided_decoding_regex", "guided decoding is not supported");
  SamplingFields fields;
  read_sampling_fields(body, "", /*extended=*/false, fields);
  merge_generation_kwargs(body, fields);
  check_call_size(fields, prompts.size(), "prompts", ctx);  // before encoding thousands of prompts
  std::vector<std::vector<int32_t>> ids;
  std::vector<std::string> paths;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const std::string path = fmt::format("prompts[{}]", i);
    const json& p = prompts[i];
    if (p.is_string()) {
      // As vLLM tokenizes a text prompt: with the tokenizer's special tokens (bos where the model has one).
      ids.push_back(ctx.tokenizer->encode(p.get<std::string>(), /*add_special_tokens=*/true));
    } else if (p.is_array()) {
      ids.push_back(*read_ids(json{{path, p}}, path, ""));  // errors name prompts[i][j]
    } else {
      throw RequestError(path, fmt::format("expected a string or a list of token ids, got {}", p.type_name()));
    }
    paths.push_back(path);
  }
  return make_job(fields, std::move(ids), paths, ctx, seeds);
}

GenerationJob parse_chat(const json& body, const PromptContext& ctx, SeedSource& seeds) {
  require_object(body, "body");
  const json& conversations = require_list(body, "messages", "a list of conversations (lists of messages)");
  refuse_unsupported(body, "tools", "tool schemas are not supported by this server's chat templates");
  tok::ChatOptions options;
  if (auto it = body.find("chat_template_kwargs"); it != body.end() && !it->is_null()) {
    require_object(*it, "chat_template_kwargs");
    if (auto v = read_bool(*it, "enable_thinking", "chat_template_kwargs")) options.enable_thinking = *v;
    if (auto v = read_bool(*it, "add_generation_prompt", "chat_template_kwargs")) options.add_generation_prompt = *v;
  }
  SamplingFields fields;
  read_sampling_fields(body, "", /*extended=*/false, fields);
  merge_generation_kwargs(body, fields);
  check_call_size(fields, conversations.size(), "messages", ctx);
  std::vector<std::vector<int32_t>> ids;
  std::vector<std::string> paths;
  for (size_t i = 0; i < conversations.size(); ++i) {
    paths.push_back(fmt::format("messages[{}]", i));
    ids.push_back(encode_conversation(conversations[i], paths.back(), ctx, options));
  }
  return make_job(fields, std::move(ids), paths, ctx, seeds);
}

namespace {

// ms-swift's RequestConfig: its own names and defaults (no max_tokens means
// until the context is full; logprobs is a flag, top_logprobs the count).
SamplingFields read_request_config(const json& body) {
  SamplingFields f;
  f.max_tokens.reset();
  f.logprobs = -1;
  auto it = body.find("request_config");
  if (it == body.end() || it->is_null()) return f;
  const json& rc = require_object(*it, "request_config");
  const std::string parent = "request_config";
  static const char* kKnown[] = {"max_tokens", "temperature", "top_k", "top_p", "repetition_penalty", "stop", "seed",
                                 "n", "logprobs", "top_logprobs", "num_beams", "stream", "best_of",
                                 "presence_penalty", "frequency_penalty", "length_penalty", "return_details"};
  for (const auto& item : rc.items())
    if (std::none_of(std::begin(kKnown), std::end(kKnown), [&](const char* k) { return item.key() == k; }))
      throw RequestError(field_path(parent, item.key()), "unknown request_config field");
  if (rc.contains("max_tokens")) f.max_tokens = read_int(rc, "max_tokens", parent);
  if (auto v = read_number(rc, "temperature", parent)) f.temperature = *v;
  if (auto v = read_int(rc, "top_k", parent)) f.top_k = *v;
  if (auto v = read_number(rc, "top_p", parent)) f.top_p = *v;
  if (auto v = read_number(rc, "repetition_penalty", parent)) f.repetition_penalty = *v;
  if (auto v = read_strings(rc, "stop", parent)) f.stop = *v;
  if (auto v = read_int(rc, "seed", parent)) f.seed = static_cast<uint64_t>(*v);
  if (auto v = read_int(rc, "n", parent)) f.n = *v;
  if (read_bool(rc, "logprobs", parent).value_or(false)) f.logprobs = read_int(rc, "top_logprobs", parent).value_or(0);
  if (read_int(rc, "num_beams", parent).value_or(1) != 1)
    throw RequestError("request_config.num_beams", "beam search is not supported; use 1");
  if (read_bool(rc, "stream", parent).value_or(false))
    throw RequestError("request_config.stream", "streaming is not supported; use false");
  for (const char* k : {"presence_penalty", "frequency_penalty"})
    if (read_number(rc, k, parent).value_or(0.0) != 0.0)
      throw RequestError(field_path(parent, k), "not supported; use repetition_penalty");
  return f;
}

}  // namespace

GenerationJob parse_infer(const json& body, const PromptContext& ctx, SeedSource& seeds) {
  require_object(body, "body");
  const json& requests = require_list(body, "infer_requests", "a list of {messages} objects");
  const SamplingFields fields = read_request_config(body);
  check_call_size(fields, requests.size(), "infer_requests", ctx);
  std::vector<std::vector<int32_t>> ids;
  std::vector<std::string> paths;
  for (size_t i = 0; i < requests.size(); ++i) {
    const std::string path = fmt::format("infer_requests[{}]", i);
    const json& r = require_object(requests[i], path);
    for (const char* media : {"images", "audios", "videos"})
      if (auto it = r.find(media); it != r.end() && !it->is_null() && !it->empty())
        throw RequestError(path + "." + media, "not supported: this server runs text-only models");
    if (auto it = r.find("tools"); it != r.end() && !it->is_null() && !it->empty())
      throw RequestError(path + ".tools", "tool schemas are not supported by this server's chat templates");
    auto messages = r.find("messages");
    if (messages == r.end()) throw RequestError(path + ".messages", "required: a list of {role, content} messages");
    paths.push_back(path + ".messages");
    ids.push_back(encode_conversation(*messages, paths.back(), ctx, tok::ChatOptions{}));
  }
  return make_job(fields, std::move(ids), paths, ctx, seeds);
}

}  // namespace grpo::rollout
