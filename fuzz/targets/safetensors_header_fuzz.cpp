// A .safetensors file (8-byte length, JSON header, data) from any bytes:
// the tensors it holds, or SafetensorsError naming the file.
#include "fuzz_support.h"
#include "model/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = grpo::fuzz::scratch_file("model.safetensors", grpo::fuzz::text_of(data, size));
  grpo::fuzz::expect_clean([&] {
    auto file = grpo::model::SafetensorsFile::open(path);
    size_t bytes = 0;
    for (const auto& t : file->tensors()) {
      // Every view must lie inside the mapping: touch its first and last byte.
      const auto* p = static_cast<const unsigned char*>(t.data);
      if (t.nbytes > 0) bytes += p[0] + p[t.nbytes - 1];
      (void)file->find(t.name);
    }
    (void)bytes;
  });
  return 0;
}
