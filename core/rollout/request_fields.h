// Typed reads of JSON request fields. Every failure is a RequestError that
// names the field's full path, so a client sees exactly what to fix.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "rollout/protocol.h"

namespace grpo::rollout {

// "generation_kwargs" + "seed" -> "generation_kwargs.seed"; "" + "n" -> "n".
std::string field_path(const std::string& parent, const std::string& key);

// The body must be a JSON object (field "body" otherwise).
const nlohmann::json& require_object(const nlohmann::json& value, const std::string& path);

// Absent or null -> nullopt; a value of another type -> RequestError.
std::optional<int64_t> read_int(const nlohmann::json& obj, const std::string& key, const std::string& parent);
std::optional<double> read_number(const nlohmann::json& obj, const std::string& key, const std::string& parent);
std::optional<bool> read_bool(const nlohmann::json& obj, const std::string& key, const std::string& parent);
// A string or a list of strings.
std::optional<std::vector<std::string>> read_strings(const nlohmann::json& obj, const std::string& key,
                                                     const std::string& parent);
std::optional<std::vector<int32_t>> read_ids(const nlohmann::json& obj, const std::string& key,
                                             const std::string& parent);

// The sampling settings of one call, before they become engine parameters.
// Each source (top-level fields, generation_kwargs, request_config) writes
// the fields it names; later sources win.
struct SamplingFields {
  int64_t n = 1;
  double repetition_penalty = 1.0, temperature = 1.0, top_p = 1.0, min_p = 0.0;
  int64_t top_k = -1;
  std::optional<int64_t> max_tokens = 16;  // nullopt: until the model's context is full
  int64_t logprobs = 0;                    // -1 = null
  std::optional<uint64_t> seed;
  std::vector<int32_t> stop_token_ids;
  std::vector<std::string> stop;
  bool ignore_eos = false;
};

// Reads TRL's sampling fields (n, repetition_penalty, temperature, top_p,
// top_k, min_p, max_tokens, logprobs) from `obj`; with `extended`, also the
// keys only generation_kwargs carries (seed, stop_token_ids, stop,
// ignore_eos), and any other key is an error.
void read_sampling_fields(const nlohmann::json& obj, const std::string& parent, bool extended, SamplingFields& out);

// n against --max_n, then prompts × n against --max_sequences_per_call,
// before any prompt is encoded: `list_field` names the list of prompts.
void check_call_size(const SamplingFields& fields, size_t prompts, const std::string& list_field,
                     const PromptContext& ctx);

// Checks ranges and builds the job from encoded prompts (one per entry);
// check_call_size has checked n and the prompts' count.
// `prompt_paths` name each prompt's field for errors.
GenerationJob make_job(const SamplingFields& fields, std::vector<std::vector<int32_t>> prompts,
                       const std::vector<std::string>& prompt_paths, const PromptContext& ctx, SeedSource& seeds);

}  // namespace grpo::rollout
