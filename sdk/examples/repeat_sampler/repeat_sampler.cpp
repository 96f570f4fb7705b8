// A complete sampler plugin built with the SDK's C++ layer: every completion
// repeats the last `repeat` ids of its prompt (default 4) and stops. It does
// not run a model — it shows the shape of a sampler: options, the requests
// and their copies, the completion sink, weight updates.
#include <algorithm>

#include <grpo/sdk.hpp>

struct RepeatSampler : grpo::SamplerBase {
  static constexpr const char* name = "repeat_sampler";
  static constexpr const char* version = "1.0.0";
  static constexpr const char* description = "repeats the end of each prompt (an example, not a model)";

  static std::vector<grpo::OptionSpec> options() {
    return {{"repeat", "int", "4", "how many of the prompt's last ids each completion repeats"}};
  }

  RepeatSampler(const grpo::Options& options, const grpo::Host& host)
      : repeat(options.get_int("repeat", 4)), host(host) {
    if (repeat < 1) throw grpo::Error("repeat must be >= 1");
  }

  void generate(const std::vector<grpo::GenerateRequest>& requests, const grpo::SamplingParams& params,
                const grpo::CompletionSink& sink) {
    for (const grpo::GenerateRequest& r : requests) {
      const std::vector<int32_t> prompt = r.prompt_ids();
      const size_t n = std::min<size_t>({prompt.size(), static_cast<size_t>(repeat),
                                         static_cast<size_t>(std::max(params.max_new_tokens(), 0))});
      const std::vector<int32_t> ids(prompt.end() - static_cast<std::ptrdiff_t>(n), prompt.end());
      const std::vector<float> logprobs(params.return_logprobs() ? ids.size() : 0, 0.0f);  // certain: log 1
      for (uint32_t copy = 0; copy < r.n(); ++copy) sink.emit(r, copy, ids, logprobs, GRPO_FINISH_STOP);
    }
  }

  void load_weights(const grpo_named_tensor*, size_t n, uint32_t flags) {
    host.debug("repeat_sampler: " + std::to_string(n) + " tensors (flags " + std::to_string(flags) + "), unused");
  }

  long long repeat;
  grpo::Host host;  // a copy: a Host is one pointer
};

GRPO_EXPORT_SAMPLER(RepeatSampler)
