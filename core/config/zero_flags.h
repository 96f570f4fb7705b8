// --deepspeed and --zero_stage: DeepSpeed's ZeRO stages as ms-swift users
// name them, checked where the flag table checks values.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace grpo::config {

// zero0..zero2 as given, or read from a DeepSpeed JSON config (the value
// becomes "zeroN"); ZeRO-3 and offload are refused with what to use instead.
// Returns a problem, or "".
std::string finish_deepspeed(nlohmann::json& v);
std::string finish_zero_stage(nlohmann::json& v);

}  // namespace grpo::config
