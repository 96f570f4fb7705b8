#include "trainer/completion_log.h"

#include <cmath>
#include <filesystem>

#include <nlohmann/json.hpp>

namespace grpo::trainer {

namespace {

std::string created_path(const std::string& output_dir) {
  std::filesystem::create_directories(output_dir);
  return (std::filesystem::path(output_dir) / "completions.jsonl").string();
}

}  // namespace

CompletionLog::CompletionLog(const std::string& output_dir) : out_(created_path(output_dir)) {}

void CompletionLog::write(int64_t step, const std::vector<Sample>& samples, const rewards::RewardMatrix& rewards,
                          const at::Tensor& advantages) {
  // Read back once: a read per row would wait for the device once per completion.
  const at::Tensor adv = advantages.to(at::kCPU, at::kDouble).contiguous();
  TORCH_CHECK(adv.numel() == static_cast<int64_t>(samples.size()), "completion log: ", adv.numel(),
              " advantages for ", samples.size(), " completions");
  const double* adv_of = adv.data_ptr<double>();
  std::string lines;
  for (size_t i = 0; i < samples.size(); ++i) {
    const Sample& c = samples[i];
    nlohmann::json line;
    line["step"] = step;
    line["prompt"] = c.prompt ? nlohmann::json::parse(c.prompt->messages_json, nullptr, false) : nlohmann::json();
    line["completion"] = c.text;
    line["completion_tokens"] = c.ids.size();
    line["finish_reason"] = finish_reason_name(c.finish);
    if (!c.conversation_json.empty()) {  // multi-turn: every turn, and what of it the policy sampled
      line["messages"] = nlohmann::json::parse(c.conversation_json, nullptr, false);
      line["turns"] = c.turns;
      line["tool_calls"] = c.tool_calls;
      size_t sampled = 0;
      for (size_t t = 0; t < c.ids.size(); ++t) sampled += c.sampled_at(t) ? 1 : 0;
      line["sampled_tokens"] = sampled;
      if (c.handler_failed) line["handler_failed"] = true;
    }
    nlohmann::json by_name = nlohmann::json::object();
    for (size_t f = 0; f < rewards.names.size(); ++f) {
      const double r = rewards.by_fn[f][i];
      by_name[rewards.names[f]] = std::isnan(r) ? nlohmann::json() : nlohmann::json(r);
    }
    line["rewards"] = by_name;
    line["reward"] = std::isnan(rewards.total[i]) ? nlohmann::json() : nlohmann::json(rewards.total[i]);
    line["advantage"] = adv_of[i];
    lines += line.dump() + '\n';
  }
  out_.append(lines);
}

}  // namespace grpo::trainer
