#include "plugins/wire.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>

#include <fmt/format.h>

namespace grpo::plugins {

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void Wire::put(const std::string& s) {
  put_u64(s.size());
  out_ += s;
}

void Wire::put_u64(uint64_t v) { out_.append(reinterpret_cast<const char*>(&v), sizeof v); }

void Wire::put_f64(double v) { out_.append(reinterpret_cast<const char*>(&v), sizeof v); }

void Wire::flush() {
  size_t done = 0;
  while (done < out_.size()) {
    const ssize_t n = ::write(fd_, out_.data() + done, out_.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw std::runtime_error("the other end of the pipe is gone");
    done += static_cast<size_t>(n);
  }
  out_.clear();
}

std::string Wire::take() {
  std::string s = std::move(out_);
  out_.clear();
  return s;
}

// Fields are served from a buffer filled by large reads: one syscall per
// field (a batch of 64 has about a thousand) cost more than the scoring of
// cheap rewards.
void Wire::read_exact(void* out, size_t n, int64_t deadline_ms) {
  char* p = static_cast<char*>(out);
  while (n > 0) {
    if (in_pos_ < in_.size()) {
      const size_t take = std::min(n, in_.size() - in_pos_);
      std::memcpy(p, in_.data() + in_pos_, take);
      in_pos_ += take;
      p += take;
      n -= take;
      continue;
    }
    if (deadline_ms >= 0 || interrupt_) {
      if (interrupt_ && interrupt_()) throw std::runtime_error("interrupted");
      pollfd pfd{fd_, POLLIN, 0};
      int64_t left = deadline_ms < 0 ? INT_MAX : deadline_ms - now_ms();
      if (interrupt_) left = std::min<int64_t>(left, 50);
      const int ready = left <= 0 ? 0 : ::poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left, INT_MAX)));
      if (ready < 0 && errno == EINTR) continue;
      if (ready == 0 && deadline_ms >= 0 && now_ms() >= deadline_ms) throw std::runtime_error("timeout");
      if (ready == 0) continue;
    }
    in_.resize(std::max<size_t>(n, 1 << 16));
    in_pos_ = 0;
    const ssize_t got = ::read(fd_, in_.data(), in_.size());
    if (got < 0 && errno == EINTR) {
      in_.clear();
      continue;
    }
    if (got <= 0) {
      in_.clear();
      throw std::runtime_error("end of stream");
    }
    in_.resize(static_cast<size_t>(got));
  }
}

uint64_t Wire::get_u64(int64_t deadline_ms) {
  uint64_t v = 0;
  read_exact(&v, sizeof v, deadline_ms);
  return v;
}

double Wire::get_f64(int64_t deadline_ms) {
  double v = 0;
  read_exact(&v, sizeof v, deadline_ms);
  return v;
}

std::string Wire::get_string(int64_t deadline_ms, uint64_t max_bytes) {
  const uint64_t n = get_u64(deadline_ms);
  if (n > max_bytes)
    throw std::runtime_error(fmt::format("it claims {} bytes, more than the {} its reply can hold", n, max_bytes));
  std::string s(n, '\0');
  read_exact(s.data(), s.size(), deadline_ms);
  return s;
}

}  // namespace grpo::plugins
