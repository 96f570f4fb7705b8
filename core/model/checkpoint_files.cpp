#include "model/checkpoint_files.h"

#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "util/dangling_link.h"
#include "util/json_input.h"

namespace grpo::model {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

[[noreturn]] void fail(const std::string& dir, const std::string& what) {
  throw CheckpointError(fmt::format("{}: {}", dir, what));
}

std::string shard_name(size_t index, size_t count) {
  return fmt::format("model-{:05d}-of-{:05d}.safetensors", index + 1, count);
}

bool is_shard_name(const std::string& name) {
  static const std::regex pattern(R"(model-\d{5}-of-\d{5}\.safetensors)");
  return std::regex_match(name, pattern);
}

// The formats transformers may have saved instead, with the advice that gets the user going.
std::string unsupported_format_hint(const fs::path& dir) {
  for (const char* name : {"pytorch_model.bin", "pytorch_model.bin.index.json"}) {
    if (fs::exists(dir / name)) {
      return fmt::format(
          "; found {}, a PyTorch pickle: convert it, e.g. in Python "
          "AutoModelForCausalLM.from_pretrained(dir).save_pretrained(dir, safe_serialization=True)",
          name);
    }
  }
  return "";
}

}  // namespace

void write_text_atomically(const std::string& path, const std::string& text) {
  static std::atomic<uint64_t> counter{0};
  const std::string tmp_path = fmt::format("{}.tmp.{}.{}", path, ::getpid(), counter++);
  {
    std::ofstream out(tmp_path, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    if (!out) {
      const int err = errno;
      std::error_code ec;
      fs::remove(tmp_path, ec);
      throw CheckpointError(fmt::format("{}: cannot write: {}", path, std::strerror(err)));
    }
  }
  std::error_code ec;
  fs::rename(tmp_path, path, ec);
  if (ec) {
    fs::remove(tmp_path, ec);
    throw CheckpointError(fmt::format("{}: cannot write: {}", path, ec.message()));
  }
}

CheckpointFiles CheckpointFiles::open(const std::string& dir) {
  const fs::path root(dir);
  std::error_code ec;
  if (!fs::is_directory(root, ec)) {
    fail(dir, fs::exists(root, ec) ? "not a directory" : "no such checkpoint directory");
  }
  CheckpointFiles out;
  out.dir_ = dir;

  // A link whose blob never arrived reads as absent: name it, rather than
  // saying the checkpoint is in an unsupported format.
  for (const char* name : {kSingleFileName, kIndexFileName})
    if (const std::string dangling = util::dangling_link_problem(root / name); !dangling.empty()) fail(dir, dangling);
  const fs::path single = root / kSingleFileName;
  if (fs::exists(single)) {
    out.files_.push_back(SafetensorsFile::open(single.string()));
    out.metadata_ = out.files_[0]->metadata();
    for (const TensorView& t : out.files_[0]->tensors()) out.entries_.emplace(t.name, Entry{&t, 0});
    return out;
  }

  const fs::path index_path = root / kIndexFileName;
  if (!fs::exists(index_path)) {
    fail(dir, fmt::format("no {} or {}: only safetensors checkpoints are supported{}", kSingleFileName, kIndexFileName,
                          unsupported_format_hint(root)));
  }
  const std::string index_name = index_path.string();
  json index;
  try {
    index = util::parse_json_file(index_name);
  } catch (const util::JsonInputError& e) {
    throw CheckpointError(e.what());
  }
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object()) {
    throw CheckpointError(fmt::format("{}: \"weight_map\" is missing or not an object", index_name));
  }
  if (index.contains("metadata") && index["metadata"].is_object()) {
    for (const auto& [key, value] : index["metadata"].items()) {
      out.metadata_[key] = value.is_string() ? value.get<std::string>() : value.dump();
    }
  }

  const json& weight_map = index["weight_map"];
  std::map<std::string, std::string> first_tensor_of_shard;  // for messages; sorted shard names
  for (const auto& [name, shard] : weight_map.items()) {
    if (!shard.is_string()) {
      throw CheckpointError(fmt::format("{}: weight_map entry for tensor '{}' is not a file name", index_name, name));
    }
    first_tensor_of_shard.emplace(shard.get<std::string>(), name);
  }
  std::map<std::string, size_t> shard_position;
  for (const auto& [shard, tensor] : first_tensor_of_shard) {
    const fs::path shard_path = root / shard;
    if (const std::string dangling = util::dangling_link_problem(shard_path); !dangling.empty())
      throw CheckpointError(fmt::format("{}: shard (holding tensor '{}') {}", index_name, tensor, dangling));
    if (!fs::exists(shard_path)) {
      throw CheckpointError(
          fmt::format("{}: shard {} (holding tensor '{}') does not exist", index_name, shard_path.string(), tensor));
    }
    shard_position[shard] = out.files_.size();
    out.files_.push_back(SafetensorsFile::open(shard_path.string()));
    const size_t position = out.files_.size() - 1;
    for (const TensorView& t : out.files_.back()->tensors()) {
      const auto [it, inserted] = out.entries_.emplace(t.name, Entry{&t, position});
      if (!inserted) {
        fail(dir, fmt::format("tensor '{}' is in both {} and {}", t.name, out.files_[it->second.file]->path(),
                              out.files_.back()->path()));
      }
    }
  }
  for (const auto& [name, shard] : weight_map.items()) {
    const auto it = out.entries_.find(name);
    const size_t expected = shard_position.at(shard.get<std::string>());
    if (it == out.entries_.end() || it->second.file != expected) {
      throw CheckpointError(fmt::format("{}: weight_map puts tensor '{}' in {}, which does not hold it", index_name,
                                        name, out.files_[expected]->path()));
    }
  }
  return out;
}

const TensorView* CheckpointFiles::find(std::string_view name) const {
  const auto it = entries_.find(name);
  return it == entries_.end() ? nullptr : it->second.view;
}

const TensorView& CheckpointFiles::require(std::string_view name) const {
  const TensorView* view = find(name);
  if (view == nullptr) fail(dir_, fmt::format("the checkpoint has no tensor '{}'", name));
  return *view;
}

std::vector<std::string> CheckpointFiles::names() const {
  std::vector<std::string> out;
  out.reserve(entries_.size());
  for (const auto& entry : entries_) out.push_back(entry.first);
  return out;
}

const std::string& CheckpointFiles::file_of(std::string_view name) const {
  const auto it = entries_.find(name);
  if (it == entries_.end()) fail(dir_, fmt::format("the checkpoint has no tensor '{}'", name));
  return files_[it->second.file]->path();
}

void write_sharded(const std::string& dir, const std::vector<TensorView>& tensors, size_t max_shard_bytes,
                   const std::map<std::string, std::string>& metadata) {
  if (max_shard_bytes == 0) fail(dir, "max_shard_bytes must be positive");
  const fs::path root(dir);
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec) fail(dir, fmt::format("cannot create the directory: {}", ec.message()));

  // Greedy, in the given order, as transformers shards: a new shard starts when the next tensor would
  // not fit.
  std::vector<std::vector<TensorView>> shards(1);
  size_t shard_bytes = 0, total_bytes = 0;
  for (const TensorView& t : tensors) {
    if (!shards.back().empty() && shard_bytes + t.nbytes > max_shard_bytes) {
      shards.emplace_back();
      shard_bytes = 0;
    }
    shards.back().push_back(t);
    shard_bytes += t.nbytes;
    total_bytes += t.nbytes;
  }

  std::set<std::string> written;
  if (shards.size() == 1) {
    write_safetensors((root / kSingleFileName).string(), shards[0], metadata);
    written.insert(kSingleFileName);
  } else {
    json weight_map = json::object();
    for (size_t i = 0; i < shards.size(); ++i) {
      const std::string name = shard_name(i, shards.size());
      write_safetensors((root / name).string(), shards[i], metadata);
      written.insert(name);
      for (const TensorView& t : shards[i]) weight_map[t.name] = name;
    }
    const json index = {{"metadata", {{"total_size", total_bytes}}}, {"weight_map", weight_map}};
    write_text_atomically((root / kIndexFileName).string(), index.dump(2) + "\n");
    written.insert(kIndexFileName);
  }

  // A stale model.safetensors would win over a new index on load, and stale shards or index would
  // mislead readers of the directory.
  for (const fs::directory_entry& entry : fs::directory_iterator(root)) {
    const std::string name = entry.path().filename().string();
    const bool ours = name == kSingleFileName || name == kIndexFileName || is_shard_name(name);
    if (ours && written.count(name) == 0) fs::remove(entry.path(), ec);
  }
}

}  // namespace grpo::model
