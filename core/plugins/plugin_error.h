// Errors about plugins: each names the file and says what to do.
#pragma once

#include <stdexcept>
#include <string>
#include "util/user_error.h"

namespace grpo::plugins {

class PluginError : public ::grpo::UserError {
 public:
  using UserError::UserError;
};

// A file that is no grpo plugin at all: not a shared object, or one without
// the entry symbol. Discovery skips such a file in a searched directory.
class NotAPluginError : public PluginError {
 public:
  using PluginError::PluginError;
};

}  // namespace grpo::plugins
