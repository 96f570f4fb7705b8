#pragma once
// The weights of a Hugging Face model directory: one model.safetensors, or shards listed by
// model.safetensors.index.json. Only safetensors is read: pytorch_model.bin is a pickle, which needs
// Python to load safely.

#include <cstddef>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "model/safetensors.h"
#include "util/user_error.h"

namespace grpo::model {

// Messages name the directory and, where one is at fault, the tensor and the file.
class CheckpointError : public ::grpo::UserError {
 public:
  using UserError::UserError;
};

inline constexpr const char* kSingleFileName = "model.safetensors";
inline constexpr const char* kIndexFileName = "model.safetensors.index.json";

class CheckpointFiles {
 public:
  // model.safetensors if present (as transformers prefers it), else the index and its shards. Every
  // shard is mapped and validated; a tensor in two shards, or listed in the index but absent from its
  // shard, is an error.
  static CheckpointFiles open(const std::string& dir);

  const std::string& dir() const { return dir_; }
  const TensorView* find(std::string_view name) const;     // nullptr if absent
  const TensorView& require(std::string_view name) const;  // throws CheckpointError if absent
  std::vector<std::string> names() const;                  // sorted
  size_t size() const { return entries_.size(); }
  // The path of the file holding `name`; throws CheckpointError if absent.
  const std::string& file_of(std::string_view name) const;
  // The mapped files, to keep alive as long as tensors built on their views.
  const std::vector<std::shared_ptr<const SafetensorsFile>>& files() const { return files_; }
  // "__metadata__" of model.safetensors, or "metadata" of the index (values as JSON text unless
  // strings, e.g. total_size).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  struct Entry {
    const TensorView* view;
    size_t file;  // position in files_
  };
  std::string dir_;
  std::vector<std::shared_ptr<const SafetensorsFile>> files_;
  std::map<std::string, Entry, std::less<>> entries_;
  std::map<std::string, std::string> metadata_;
};

// Writes `tensors` into `dir` (created if needed) as transformers does: model.safetensors when the
// whole lies within max_shard_bytes, else shards model-00001-of-0000N.safetensors of at most
// max_shard_bytes each (a tensor larger than that gets a shard of its own) plus the index with
// metadata.total_size and the weight_map. Files of a previous checkpoint that would shadow or confuse
// the new one (the other layout, shards of another count) are removed after the new files are in
// place.
void write_sharded(const std::string& dir, const std::vector<TensorView>& tensors, size_t max_shard_bytes,
                   const std::map<std::string, std::string>& metadata = {{"format", "pt"}});

// Writes `text` to a temporary beside `path`, then renames it over `path`.
// Throws CheckpointError naming `path` when the write fails (a full disk).
void write_text_atomically(const std::string& path, const std::string& text);

}  // namespace grpo::model
