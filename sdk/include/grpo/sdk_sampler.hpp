// The C++ layer for sampler plugins (grpo.sampler/1): a class, one macro.
// Included by grpo/sdk.hpp; see sdk/examples/repeat_sampler.
#ifndef GRPO_SDK_SAMPLER_HPP
#define GRPO_SDK_SAMPLER_HPP

#include <memory>
#include <string_view>
#include <vector>

#include "grpo/sdk.hpp"

namespace grpo {

// One prompt to sample (a view; valid during generate()).
class GenerateRequest {
 public:
  explicit GenerateRequest(const grpo_generate_request* r) : r_(r) {}
  uint64_t id() const { return r_->request_id; }  // echoed in each of its completions
  std::vector<int32_t> prompt_ids() const { return {r_->prompt_ids, r_->prompt_ids + r_->n_prompt_ids}; }
  std::string_view prompt_text() const { return view(r_->prompt_text); }
  std::string_view messages_json() const { return view(r_->messages_json); }
  uint32_t n() const { return r_->n; }
  uint64_t seed() const { return r_->seed; }  // copy i samples with a seed derived from (seed, i)
  std::vector<int32_t> stop_ids() const { return {r_->stop_ids, r_->stop_ids + r_->n_stop_ids}; }
  const grpo_generate_request* raw() const { return r_; }

 private:
  const grpo_generate_request* r_;
};

// How to sample (a view; valid during generate()).
class SamplingParams {
 public:
  explicit SamplingParams(const grpo_sampling_params* p) : p_(p) {}
  double temperature() const { return p_->temperature; }
  double top_p() const { return p_->top_p; }
  int32_t top_k() const { return p_->top_k; }
  double min_p() const { return p_->min_p; }
  double repetition_penalty() const { return p_->repetition_penalty; }
  int32_t max_new_tokens() const { return p_->max_new_tokens; }
  std::vector<std::string_view> stop_strings() const {
    std::vector<std::string_view> out;
    for (size_t i = 0; i < p_->n_stop_strings; ++i) out.push_back(view(p_->stop_strings[i]));
    return out;
  }
  bool return_logprobs() const { return p_->return_logprobs != 0; }
  // Multi-turn: GRPO_PREFIX_CONTINUES / GRPO_PREFIX_KEEP (0 from a host before 1.3).
  uint64_t prefix_flags() const { return GRPO_HAS_FIELD(p_, grpo_sampling_params, prefix_flags) ? p_->prefix_flags : 0; }
  const grpo_sampling_params* raw() const { return p_; }

 private:
  const grpo_sampling_params* p_;
};

// Where a sampler hands each completion to the host, exactly once per copy
// of each request. [any-thread]: workers may emit concurrently.
class CompletionSink {
 public:
  CompletionSink(grpo_completion_sink sink, void* ctx) : sink_(sink), ctx_(ctx) {}
  // `logprobs`: one per id, or empty when not asked for; `text` may be empty
  // (the host decodes the ids itself).
  void emit(const GenerateRequest& request, uint32_t index, const std::vector<int32_t>& ids,
            const std::vector<float>& logprobs, grpo_finish_reason finish, std::string_view text = {}) const {
    grpo_completion c{};
    c.struct_size = GRPO_COMPLETION_STRUCT_SIZE;
    c.request_id = request.id();
    c.index = index;
    c.ids = ids.data();
    c.n_ids = ids.size();
    c.logprobs = logprobs.empty() ? nullptr : logprobs.data();
    c.text = str(text);
    c.finish_reason = finish;
    sink_(ctx_, &c);
  }

 private:
  grpo_completion_sink sink_;
  void* ctx_;
};

// Defaults a sampler class may shadow. A sampler class also defines name,
// version, description, a constructor (const Options&, const Host&), and
//   void generate(const std::vector<GenerateRequest>&, const SamplingParams&, const CompletionSink&);
//   void load_weights(const grpo_named_tensor* tensors, size_t n, uint32_t flags);
struct SamplerBase {
  static constexpr bool in_process = false;  // true: takes GRPO_WEIGHTS_VIEW tensors zero-copy
  static std::vector<OptionSpec> options() { return {}; }
};

namespace detail {

template <class T>
struct SamplerThunks {
  static grpo_status create(const grpo_host_api* host, grpo_str config, grpo_sampler_instance** out, grpo_error* err) {
    return create_instance<T>(host, config, out, err);
  }
  static grpo_status generate(grpo_sampler_instance* self, const grpo_generate_request* requests, size_t n,
                              size_t stride, const grpo_sampling_params* params, grpo_completion_sink sink,
                              void* sink_ctx, grpo_error* err) {
    return guarded(err, [&] {
      std::vector<GenerateRequest> reqs;
      for (size_t i = 0; i < n; ++i)
        reqs.emplace_back(reinterpret_cast<const grpo_generate_request*>(reinterpret_cast<const char*>(requests) +
                                                                          i * stride));
      CompletionSink out(sink, sink_ctx);
      reinterpret_cast<Instance<T>*>(self)->impl->generate(reqs, SamplingParams(params), out);
    });
  }
  static grpo_status load_weights(grpo_sampler_instance* self, const grpo_named_tensor* tensors, size_t n,
                                  uint32_t flags, grpo_error* err) {
    return guarded(err, [&] { reinterpret_cast<Instance<T>*>(self)->impl->load_weights(tensors, n, flags); });
  }
  static void destroy(grpo_sampler_instance* self) { delete reinterpret_cast<Instance<T>*>(self); }
  static const grpo_sampler_api* api() {
    static const grpo_sampler_api table = {GRPO_SAMPLER_API_STRUCT_SIZE,
                                           T::in_process ? GRPO_SAMPLER_IN_PROCESS : 0u,
                                           &create, &generate, &load_weights, nullptr, nullptr, &destroy};
    return &table;
  }
};

}  // namespace detail

// Describes sampler class T for GRPO_EXPORT_PLUGINS.
template <class T>
detail::PluginRecord sampler() {
  return detail::PluginRecord{T::name, GRPO_SAMPLER_INTERFACE, T::version, T::description,
                              detail::options_json(T::options()), detail::SamplerThunks<T>::api(), {}};
}

}  // namespace grpo

// A library holding one sampler class.
#define GRPO_EXPORT_SAMPLER(SamplerClass) GRPO_EXPORT_PLUGINS(::grpo::sampler<SamplerClass>())

#endif  // GRPO_SDK_SAMPLER_HPP
