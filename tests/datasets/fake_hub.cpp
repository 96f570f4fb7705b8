#include "datasets/fake_hub.h"

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include <fmt/format.h>

namespace grpo::testing {
namespace {

namespace fs = std::filesystem;

std::string content_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("fake hub: cannot read " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

void add_hf_repo(const std::string& cache, const std::string& kind, const std::string& id, const std::string& commit,
                 const std::map<std::string, std::string>& files, const std::string& revision) {
  std::string folder = id;
  for (size_t at = folder.find('/'); at != std::string::npos; at = folder.find('/', at)) folder.replace(at, 1, "--");
  const fs::path repo = fs::path(cache) / (kind + "--" + folder);
  fs::create_directories(repo / "blobs");
  for (const auto& [name, source] : files) {
    const std::string bytes = content_of(source);
    const std::string blob = fmt::format("{:016x}{:016x}", std::hash<std::string>{}(bytes), bytes.size());
    std::ofstream(repo / "blobs" / blob, std::ios::binary) << bytes;
    const fs::path link = repo / "snapshots" / commit / name;
    fs::create_directories(link.parent_path());
    fs::remove(link);
    fs::create_symlink(fs::relative(repo / "blobs" / blob, link.parent_path()), link);
  }
  fs::create_directories((repo / "refs" / revision).parent_path());
  std::ofstream(repo / "refs" / revision) << commit;  // no newline, as huggingface_hub writes it
}

void add_modelscope_repo(const std::string& cache, const std::string& kind, const std::string& id,
                         const std::map<std::string, std::string>& files) {
  const size_t slash = id.find('/');
  std::string name = id.substr(slash + 1);
  for (size_t at = name.find('.'); at != std::string::npos; at = name.find('.', at)) name.replace(at, 1, "___");
  const fs::path repo = fs::path(cache) / kind / id.substr(0, slash) / name;
  for (const auto& [path, source] : files) {
    fs::create_directories((repo / path).parent_path());
    fs::copy_file(source, repo / path, fs::copy_options::overwrite_existing);
  }
}

std::map<std::string, std::string> tiny_model_files() {
  std::map<std::string, std::string> files;
  for (const auto& e : fs::directory_iterator(GRPO_TEST_DATA_DIR "/tiny-qwen2"))
    if (e.is_regular_file() && e.path().filename().string().rfind("expected", 0) != 0)
      files[e.path().filename().string()] = e.path().string();
  return files;
}

}  // namespace grpo::testing
