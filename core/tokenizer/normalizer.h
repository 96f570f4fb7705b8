// Unicode normalization of the text between added tokens (the "normalizer"
// entry of tokenizer.json): NFC for Qwen, none for Llama 3.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace grpo::tok {

class Normalizer {
 public:
  enum class Form { kNfc, kNfd, kNfkc, kNfkd };

  // Parses the normalizer value (null, a form, or a Sequence of forms);
  // `source` names the file in error messages.
  static Normalizer from_json(const nlohmann::json& value, const std::string& source);

  bool is_identity() const { return forms_.empty(); }

  // Writes the normalized text into *out and returns true, or returns false
  // when the text is already normalized (e.g. pure ASCII) so the caller can
  // keep using its own view without a copy. Bytes that are not valid UTF-8
  // are passed through untouched.
  bool apply(std::string_view text, std::string* out) const;

 private:
  std::vector<Form> forms_;
};

}  // namespace grpo::tok
