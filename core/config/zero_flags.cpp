#include "config/zero_flags.h"

#include <fstream>

#include "util/json_input.h"

namespace grpo::config {

using nlohmann::json;

// ZeRO-3 shards the weights themselves; offloading moves state to CPU memory.
namespace {

const char* const kZero3 = "ZeRO-3 shards the weights themselves, which grpo-host does not: use --deepspeed zero2 "
                           "(optimizer state and gradients sharded), or --train_type lora to train far fewer weights";
const char* const kOffload = "offloading optimizer state to CPU memory is not built: use --deepspeed zero2 without "
                             "offload (the state is sharded across the processes instead)";

}  // namespace

std::string finish_deepspeed(json& v) {
  if (!v.is_string()) return "";  // unset
  const std::string given = v.get<std::string>();
  if (given == "zero0" || given == "zero1" || given == "zero2") return "";
  if (given == "zero3" || given == "zero3_offload") return kZero3;
  if (given == "zero2_offload") return kOffload;
  if (given.size() < 5 || given.compare(given.size() - 5, 5, ".json") != 0)
    return "expected zero0, zero1, zero2 or a DeepSpeed JSON config file, got '" + given + "'";
  std::ifstream in(given);
  if (!in) return "cannot open the DeepSpeed config " + given;
  json config;
  try {
    config = util::parse_json_file(given);
  } catch (const util::JsonInputError& e) {
    return std::string("the DeepSpeed config is not usable: ") + e.what();
  }
  const json zero = config.value("zero_optimization", json::object());
  if (!zero.is_object()) return given + ": zero_optimization is not an object";
  for (const char* key : {"offload_optimizer", "offload_param"}) {
    const json o = zero.value(key, json::object());
    if (o.is_object() && o.value("device", std::string("none")) != "none") return given + ": " + kOffload;
  }
  const json stage = zero.value("stage", json(0));
  if (!stage.is_number_integer() || stage.get<int>() < 0 || stage.get<int>() > 3)
    return given + ": zero_optimization.stage must be 0, 1, 2 or 3";
  if (stage.get<int>() == 3) return given + ": " + kZero3;
  v = "zero" + std::to_string(stage.get<int>());
  return "";
}

std::string finish_zero_stage(json& v) { return v.is_number_integer() && v.get<int64_t>() >= 3 ? std::string(kZero3) : ""; }

}  // namespace grpo::config
