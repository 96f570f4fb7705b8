// The one base of every error about what the user gave — flags, files,
// plugins, models — as opposed to an internal failure. grpo-host exits with 2
// for these (as for a usage error) and with 1 for anything else.
#pragma once

#include <stdexcept>

namespace grpo {

class UserError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace grpo
