// A --config YAML file from any bytes: a resolved configuration, or a
// ConfigError naming file:line and the key.
#include "config/config.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = grpo::fuzz::scratch_file("config.yaml", grpo::fuzz::text_of(data, size));
  grpo::fuzz::expect_clean([&] {
    const grpo::config::Config config = grpo::config::load_yaml_file(path, /*check_batch_geometry=*/true);
    (void)config.to_yaml();
  });
  return 0;
}
