// A program linked with LibTorch calls libstdc++'s own functions, not the
// copies the wheel's libtorch.so exports (cmake/torch.cmake links libstdc++
// first): LibTorch's std::filesystem::remove_all jumped to address 0.
#include <dlfcn.h>
#include <unistd.h>
#include <gtest/gtest.h>
#include <torch/version.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

namespace fs = std::filesystem;

TEST(LinkOrder, TheStandardLibrarysFunctionsResolveToLibstdcxx) {
  using RemoveAll = std::uintmax_t (*)(const fs::path&, std::error_code&);
  const RemoveAll remove_all = &fs::remove_all;
  Dl_info info{};
  ASSERT_NE(::dladdr(reinterpret_cast<void*>(remove_all), &info), 0);
  EXPECT_NE(std::string(info.dli_fname).find("libstdc++"), std::string::npos)
      << "std::filesystem::remove_all comes from " << info.dli_fname << " (LibTorch " << TORCH_VERSION << ")";

  const fs::path dir = fs::temp_directory_path() / ("grpo_link_order_" + std::to_string(::getpid()));
  fs::create_directories(dir / "a" / "b");
  std::ofstream(dir / "a" / "b" / "f.txt") << "x";
  std::error_code ec;
  EXPECT_EQ(remove_all(dir, ec), 4u);
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_FALSE(fs::exists(dir));
}
