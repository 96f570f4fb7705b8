#pragma once
// The safetensors format of Hugging Face checkpoints: an 8-byte little-endian header length N, N
// bytes of JSON describing each tensor (dtype, shape, byte range in the buffer) plus optional string
// metadata, then the raw little-endian buffer. Reading maps the file, so a multi-GB checkpoint costs
// no copy and no LibTorch: callers wrap TensorView::data as they need.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>
#include "util/user_error.h"

namespace grpo::model {

// Every message names the file and, where one is at fault, the tensor.
class SafetensorsError : public ::grpo::UserError {
 public:
  using UserError::UserError;
};

enum class DType { F32, F16, BF16, F64, I64, I32, I16, I8, U8, Bool };

size_t dtype_size(DType dtype);            // bytes per element
std::string_view dtype_name(DType dtype);  // as in the header: "F32", "BF16", "BOOL", ...
std::optional<DType> parse_dtype(std::string_view name);
bool is_floating(DType dtype);

// Product of the dimensions; 1 for a scalar (empty shape).
int64_t shape_numel(const std::vector<int64_t>& shape);
std::string shape_to_string(const std::vector<int64_t>& shape);  // "[300, 64]"

// One tensor: its bytes belong to whoever made the view (for a SafetensorsFile, the mapping).
struct TensorView {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  size_t nbytes = 0;
  // Instead of `data`: writes the nbytes into the buffer it is given. A
  // writer calls it when it reaches the tensor, so tensors on a GPU pass
  // through host memory one at a time, never the whole model at once.
  std::function<void(void* dst)> read;

  int64_t numel() const { return shape_numel(shape); }
};

// A read-only, private mapping of one .safetensors file, validated on open. The views point into
// the mapping, which lives as long as the object (share it to keep tensors built on it valid).
class SafetensorsFile {
 public:
  static std::shared_ptr<const SafetensorsFile> open(const std::string& path);

  SafetensorsFile(SafetensorsFile&& other) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&& other) noexcept;
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;
  ~SafetensorsFile();

  const std::string& path() const { return path_; }
  const std::vector<TensorView>& tensors() const { return tensors_; }  // by position in the buffer
  const TensorView* find(std::string_view name) const;                 // nullptr if absent
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  size_t file_bytes() const { return mapped_bytes_; }

 private:
  SafetensorsFile() = default;
  void unmap() noexcept;

  std::string path_;
  void* mapping_ = nullptr;
  size_t mapped_bytes_ = 0;
  std::vector<TensorView> tensors_;
  std::map<std::string, size_t, std::less<>> index_;  // name -> position in tensors_
  std::map<std::string, std::string> metadata_;
};

// Writes `tensors` (names unique, nbytes matching dtype and shape) to a temporary file next to
// `path`, then renames it over `path`, so a crash never leaves a half-written checkpoint. Like the
// reference Rust writer, tensors are laid out by decreasing element size and then by name, and the
// header is padded with spaces to a multiple of 8 bytes: every tensor is aligned to its element size
// in the mapping, so it can be used in place.
void write_safetensors(const std::string& path, const std::vector<TensorView>& tensors,
                       const std::map<std::string, std::string>& metadata = {{"format", "pt"}});

}  // namespace grpo::model
