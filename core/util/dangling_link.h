// A file that is a symbolic link to nothing: how an interrupted Hugging Face
// download leaves a snapshot (snapshots/<commit>/<file> links to a blob that
// never arrived). Without this check such a file reads as absent, and the
// user is told the wrong thing ("only safetensors checkpoints are supported",
// "no tokenizer.json") instead of being told to download again.
#pragma once

#include <filesystem>
#include <string>
#include <system_error>

namespace grpo::util {

// The repository a path in a Hugging Face cache belongs to, as the command
// that downloads it again takes it ("Org/Name", or "--repo-type dataset
// Org/Name"); "" when the path is not in such a cache
// (<cache>/{models,datasets}--ORG--NAME/snapshots/...).
inline std::string hf_repo_of(const std::filesystem::path& path) {
  std::filesystem::path::iterator it = path.begin();
  for (; it != path.end(); ++it) {
    const std::string part = it->string();
    const bool model = part.rfind("models--", 0) == 0, dataset = part.rfind("datasets--", 0) == 0;
    if (!model && !dataset) continue;
    auto next = std::next(it);
    if (next == path.end() || next->string() != "snapshots") continue;
    std::string id = part.substr(model ? 8 : 10);
    if (const size_t sep = id.find("--"); sep != std::string::npos) id.replace(sep, 2, "/");
    return (dataset ? "--repo-type dataset " : "") + id;
  }
  return "";
}

// What to do about a damaged download of the repository `path` is in.
inline std::string download_again_advice(const std::filesystem::path& path) {
  const std::string repo = hf_repo_of(path);
  if (repo.empty()) return "download or copy the file again";
  return "download it again: `huggingface-cli download " + repo + "` (or `hf download " + repo + "`)";
}

// "" when `path` is not a symbolic link whose target is missing; else one
// sentence naming the link, where it points and what to do.
inline std::string dangling_link_problem(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_symlink(path, ec) || std::filesystem::exists(path, ec)) return "";
  const std::filesystem::path target = std::filesystem::read_symlink(path, ec);
  const std::filesystem::path resolved = target.is_absolute() ? target : path.parent_path() / target;
  return path.string() + " is a symbolic link to " + resolved.lexically_normal().string() +
         ", which does not exist (an interrupted download leaves this); " + download_again_advice(path);
}

}  // namespace grpo::util
