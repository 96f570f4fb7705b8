// What every fuzz target shares: the input as text, a scratch file for the
// readers that take a path, and the rule that a clean error is any
// grpo::UserError (named input, exit status 2). Anything else that escapes —
// another exception, a signal, a sanitizer report, a hang — is a finding.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>
#include <string_view>

#include "util/user_error.h"

namespace grpo::fuzz {

inline std::string_view text_of(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// A file named `name` in a directory of this process, holding `bytes`.
inline std::string scratch_file(const std::string& name, std::string_view bytes) {
  static const std::string dir = [] {
    std::string d = "/tmp/grpo_fuzz_" + std::to_string(::getpid());
    ::mkdir(d.c_str(), 0700);
    return d;
  }();
  const std::string path = dir + "/" + name;
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return path;
}

// Runs fn; a UserError is the program's answer to bad input, not a finding.
template <class Fn>
void expect_clean(Fn&& fn) {
  try {
    fn();
  } catch (const grpo::UserError&) {
  }
}

}  // namespace grpo::fuzz
