// Qwen2.5's and Qwen3's tools section, character for character as their
// Jinja templates print it: one `tool | tojson` per line inside <tools>.
#include "tokenizer/chat_tools.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "util/json_input.h"

namespace grpo::tok {

std::string python_json_string(std::string_view s) {
  static const char* const kHex = "0123456789abcdef";
  std::string out = "\"";
  for (const char ch : s) {
    const auto b = static_cast<unsigned char>(ch);
    switch (ch) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (b < 0x20) {
          out += "\\u00";
          out += kHex[b >> 4];
          out += kHex[b & 0xF];
        } else {
          out += ch;
        }
    }
  }
  return out + "\"";
}

namespace {

// Python's repr of a float: the shortest digits that read back the same,
// fixed notation for exponents in [-4, 16), else d.ddde[+-]XX; always a '.'
// or an exponent ("1.0", "1000000.0", "1e-05", "1e+16").
std::string python_float(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  char buf[40];
  int precision = 1;
  for (; precision < 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*e", precision - 1, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  std::snprintf(buf, sizeof buf, "%.*e", precision - 1, v);
  const std::string sci = buf;
  const size_t e = sci.find('e');
  const int exponent = std::atoi(sci.c_str() + e + 1);
  std::string digits;
  for (size_t i = 0; i < e; ++i)
    if (std::isdigit(static_cast<unsigned char>(sci[i]))) digits += sci[i];
  const std::string sign = v < 0 ? "-" : "";
  if (exponent < -4 || exponent >= 16) {
    std::string mantissa = digits.substr(0, 1) + (digits.size() > 1 ? "." + digits.substr(1) : "");
    char ex[8];
    std::snprintf(ex, sizeof ex, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    return sign + mantissa + ex;
  }
  if (exponent < 0) return sign + "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
  const auto int_digits = static_cast<size_t>(exponent + 1);
  if (digits.size() <= int_digits) return sign + digits + std::string(int_digits - digits.size(), '0') + ".0";
  return sign + digits.substr(0, int_digits) + "." + digits.substr(int_digits);
}

}  // namespace

std::string python_json_dumps(const nlohmann::ordered_json& v) {
  switch (v.type()) {
    case nlohmann::ordered_json::value_t::object: {
      std::string out = "{";
      bool first = true;
      for (const auto& [key, value] : v.items()) {
        if (!first) out += ", ";
        first = false;
        out += python_json_string(key) + ": " + python_json_dumps(value);
      }
      return out + "}";
    }
    case nlohmann::ordered_json::value_t::array: {
      std::string out = "[";
      for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + python_json_dumps(v[i]);
      return out + "]";
    }
    case nlohmann::ordered_json::value_t::string: return python_json_string(v.get_ref<const std::string&>());
    case nlohmann::ordered_json::value_t::boolean: return v.get<bool>() ? "true" : "false";
    case nlohmann::ordered_json::value_t::number_float: return python_float(v.get<double>());
    case nlohmann::ordered_json::value_t::null: return "null";
    default: return v.dump();  // integers
  }
}

std::string tools_system_turn(ChatFamily family, const std::string* system, const std::string& tools_json) {
  if (family != ChatFamily::Qwen2_5 && family != ChatFamily::Qwen3)
    throw ChatTemplateError(std::string("the ") + chat_family_name(family) + " chat template does not describe tools; " +
                            kToolTemplates);
  nlohmann::ordered_json tools;
  try {
    tools = util::parse_json<nlohmann::ordered_json>(tools_json, "the tool schemas");
  } catch (const util::JsonInputError& e) {
    throw ChatTemplateError(e.what());
  }
  if (!tools.is_array()) throw ChatTemplateError("the tool schemas must be a JSON array of objects");
  std::string out = "<|im_start|>system\n";
  if (family == ChatFamily::Qwen2_5) {
    out += system ? *system : "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";
    out += "\n\n";
  } else if (system) {
    out += *system + "\n\n";
  }
  out +=
      "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with "
      "function signatures within <tools></tools> XML tags:\n<tools>";
  for (const auto& tool : tools) {
    if (!tool.is_object()) throw ChatTemplateError("every tool schema must be a JSON object");
    out += "\n" + python_json_dumps(tool);
  }
  out +=
      "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
      "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
      "<args-json-object>}\n</tool_call><|im_end|>\n";
  return out;
}

}  // namespace grpo::tok
