// Errors about plugins: each names the file and says what to do.
#pragma once

#include <stdexcept>
#include <string>

namespace grpo::plugins {

class PluginError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace grpo::plugins
