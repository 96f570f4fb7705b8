// The byte protocol between grpo-host and grpo-plugin-worker: length-prefixed
// strings and little-endian numbers over pipes, read with deadlines, and the
// magic numbers that say which service a worker is started for.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>

namespace grpo::plugins {

// The first number a worker reads: what it is started for. Replies carry the
// token the host sends after it, so a reply a plugin forged is told apart.
constexpr uint64_t kRewardWorkerMagic = 0x67727031726577ull;  // "grp1rew": serve one reward plugin
constexpr uint64_t kCheckWorkerMagic = 0x67727031636b73ull;   // "grp1cks": run one conformance check

int64_t now_ms();  // steady clock, for deadlines

// Byte streams for the protocol: length-prefixed strings, little-endian numbers.
class Wire {
 public:
  explicit Wire(int fd) : fd_(fd) {}
  void put(const std::string& s);
  void put_u64(uint64_t v);
  void put_i64(int64_t v) { put_u64(static_cast<uint64_t>(v)); }
  void put_f64(double v);
  void flush();  // throws std::runtime_error when the other side is gone
  std::string take();  // what was put and not flushed; the buffer is then empty
  bool buffered() const { return in_pos_ < in_.size(); }  // bytes read ahead and not yet consumed
  // Checked while a read waits: true ends it with std::runtime_error("interrupted").
  void interrupt_when(std::function<bool()> fn) { interrupt_ = std::move(fn); }
  // Reads block until `deadline_ms` (< 0: forever); throws std::runtime_error
  // on end of stream, with "timeout" when the deadline passed. A string
  // longer than `max_bytes` is an error before anything is allocated.
  std::string get_string(int64_t deadline_ms = -1, uint64_t max_bytes = UINT64_MAX);
  uint64_t get_u64(int64_t deadline_ms = -1);
  int64_t get_i64(int64_t deadline_ms = -1) { return static_cast<int64_t>(get_u64(deadline_ms)); }
  double get_f64(int64_t deadline_ms = -1);

 private:
  void read_exact(void* out, size_t n, int64_t deadline_ms);
  int fd_;
  std::function<bool()> interrupt_;
  std::string out_;
  std::string in_;  // read ahead; in_[in_pos_..] not yet consumed
  size_t in_pos_ = 0;
};

// The bounded fields of a reply's body, read from a string whose length was
// checked: a field running past its end is an error, never a read past it.
class ReplyReader {
 public:
  explicit ReplyReader(const std::string& body) : body_(body) {}
  uint64_t u64() {
    uint64_t v;
    std::memcpy(&v, take(sizeof v), sizeof v);
    return v;
  }
  double f64() {
    double v;
    std::memcpy(&v, take(sizeof v), sizeof v);
    return v;
  }
  std::string str() {
    const uint64_t n = u64();
    return {take(n), n};
  }
  bool done() const { return pos_ == body_.size(); }

 private:
  const char* take(uint64_t n) {
    if (n > body_.size() - pos_) throw std::runtime_error("its reply is cut short");
    const char* p = body_.data() + pos_;
    pos_ += n;
    return p;
  }
  const std::string& body_;
  size_t pos_ = 0;
};

}  // namespace grpo::plugins
