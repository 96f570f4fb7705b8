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

}  // namespace grpo::plugins
