// tokenizer.json from any bytes: a tokenizer that encodes and decodes, or
// TokenizerError naming the file.
#include "fuzz_support.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = grpo::fuzz::scratch_file("tokenizer.json", grpo::fuzz::text_of(data, size));
  grpo::fuzz::expect_clean([&] {
    const grpo::tok::Tokenizer tokenizer = grpo::tok::Tokenizer::from_file(path);
    const std::vector<int32_t> ids = tokenizer.encode("Hello <|im_start|>wörld 12345 \n\t  !!", true);
    (void)tokenizer.decode(ids);
  });
  return 0;
}
