// On a terminal, one live line that rewrites itself every step (step/total,
// reward, loss, tokens/s, ETA); elsewhere (pipes, CI logs) nothing, so the
// plain log lines stay the only output.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace grpo::trainer {

class ProgressLine {
 public:
  // enabled: unset = when stdout is a terminal.
  explicit ProgressLine(int64_t total_steps, int enabled = -1);
  ~ProgressLine() { clear(); }
  void update(int64_t step, const std::map<std::string, double>& metrics);
  void clear();  // before a plain log line, so it starts on a clean line

  // The line's text (exposed for tests).
  static std::string format(int64_t step, int64_t total, double reward, double loss, double tokens_per_s,
                            double eta_s);

 private:
  int64_t total_;
  bool enabled_, shown_ = false;
  double tokens_ = 0, seconds_ = 0;  // summed over the run, for tokens/s and the ETA
};

}  // namespace grpo::trainer
