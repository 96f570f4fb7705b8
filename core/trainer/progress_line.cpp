#include "trainer/progress_line.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>

#include <fmt/format.h>

namespace grpo::trainer {

namespace {

std::string duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  const auto t = static_cast<int64_t>(s + 0.5);
  if (t >= 3600) return fmt::format("{}h{:02}m", t / 3600, t % 3600 / 60);
  return fmt::format("{}m{:02}s", t / 60, t % 60);
}

double value(const std::map<std::string, double>& m, const char* key) {
  auto it = m.find(key);
  return it == m.end() ? NAN : it->second;
}

}  // namespace

ProgressLine::ProgressLine(int64_t total_steps, int enabled)
    : total_(total_steps), enabled_(enabled < 0 ? isatty(STDOUT_FILENO) == 1 : enabled == 1) {}

std::string ProgressLine::format(int64_t step, int64_t total, double reward, double loss, double tokens_per_s,
                                 double eta_s) {
  std::string line = fmt::format("step {}/{}", step, total);
  if (std::isfinite(reward)) line += fmt::format("  reward {:.3f}", reward);
  if (std::isfinite(loss)) line += fmt::format("  loss {:.4g}", loss);
  line += fmt::format("  {:.0f} tok/s  ETA {}", tokens_per_s, duration(eta_s));
  return line;
}

void ProgressLine::update(int64_t step, const std::map<std::string, double>& metrics) {
  const double step_time = value(metrics, "step_time"), tokens = value(metrics, "num_tokens");
  if (std::isfinite(step_time)) seconds_ += step_time;
  if (std::isfinite(tokens)) tokens_ += tokens;
  if (!enabled_) return;
  const double per_step = step > 0 ? seconds_ / static_cast<double>(step) : NAN;
  const std::string line = format(step, total_, value(metrics, "reward"), value(metrics, "loss"),
                                  seconds_ > 0 ? tokens_ / seconds_ : 0.0,
                                  per_step * static_cast<double>(total_ - step));
  std::fputs(("\r\033[K" + line).c_str(), stdout);  // carriage return + erase line: rewrite in place
  std::fflush(stdout);
  shown_ = true;
}

void ProgressLine::clear() {
  if (!shown_) return;
  std::fputs("\r\033[K", stdout);
  std::fflush(stdout);
  shown_ = false;
}

}  // namespace grpo::trainer
