// util/json_input.h on any bytes: a value, or JsonInputError.
#include "fuzz_support.h"
#include "util/json_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = grpo::fuzz::text_of(data, size);
  grpo::fuzz::expect_clean([&] {
    const nlohmann::json value = grpo::util::parse_json(text, "input", /*is_file=*/true);
    (void)grpo::util::json_excerpt(value);
    (void)value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  });
  (void)grpo::util::try_parse_json<nlohmann::ordered_json>(text);
  return 0;
}
