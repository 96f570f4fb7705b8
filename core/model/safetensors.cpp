#include "model/safetensors.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "util/json_input.h"

namespace grpo::model {
namespace {

using nlohmann::json;

// Real headers are a few hundred bytes per tensor; a length beyond this is a corrupt or foreign file,
// and trusting it would make us parse gigabytes of tensor data as JSON.
constexpr uint64_t kMaxHeaderBytes = 100ull * 1000 * 1000;

struct DTypeInfo {
  DType dtype;
  std::string_view name;
  size_t size_bytes;
  bool floating;
};

constexpr std::array<DTypeInfo, 10> kDTypes{{
    {DType::F32, "F32", 4, true},
    {DType::F16, "F16", 2, true},
    {DType::BF16, "BF16", 2, true},
    {DType::F64, "F64", 8, true},
    {DType::I64, "I64", 8, false},
    {DType::I32, "I32", 4, false},
    {DType::I16, "I16", 2, false},
    {DType::I8, "I8", 1, false},
    {DType::U8, "U8", 1, false},
    {DType::Bool, "BOOL", 1, false},
}};

const DTypeInfo& info(DType dtype) {
  for (const DTypeInfo& d : kDTypes) {
    if (d.dtype == dtype) return d;
  }
  throw std::invalid_argument("invalid DType value");
}

std::string supported_dtypes() {
  std::string out;
  for (const DTypeInfo& d : kDTypes) {
    if (!out.empty()) out += ", ";
    out += d.name;
  }
  return out;
}

// numel * element size without silent wrap-around; nullopt when a dimension is negative or the
// product does not fit.
std::optional<uint64_t> byte_size(const std::vector<int64_t>& shape, size_t elem_bytes) {
  uint64_t total = elem_bytes;
  for (int64_t dim : shape) {
    if (dim < 0) return std::nullopt;
    if (__builtin_mul_overflow(total, static_cast<uint64_t>(dim), &total)) return std::nullopt;
  }
  return total;
}

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw SafetensorsError(fmt::format("{}: {}", path, what));
}

[[noreturn]] void fail_tensor(const std::string& path, const std::string& name, const std::string& what) {
  throw SafetensorsError(fmt::format("{}: tensor '{}': {}", path, name, what));
}

std::vector<int64_t> parse_shape(const std::string& path, const std::string& name, const json& entry) {
  const auto it = entry.find("shape");
  if (it == entry.end() || !it->is_array()) fail_tensor(path, name, "\"shape\" is missing or not a list");
  std::vector<int64_t> shape;
  for (const json& dim : *it) {
    if (!dim.is_number_integer()) fail_tensor(path, name, fmt::format("shape {} holds a non-integer", util::json_excerpt(*it)));
    if (dim.is_number_unsigned() && dim.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
      fail_tensor(path, name, fmt::format("shape {} has a dimension too large", util::json_excerpt(*it)));
    }
    shape.push_back(dim.get<int64_t>());
    if (shape.back() < 0) fail_tensor(path, name, fmt::format("shape {} has a negative dimension", util::json_excerpt(*it)));
  }
  return shape;
}

std::pair<uint64_t, uint64_t> parse_offsets(const std::string& path, const std::string& name, const json& entry) {
  const auto it = entry.find("data_offsets");
  const bool ok = it != entry.end() && it->is_array() && it->size() == 2 && (*it)[0].is_number_unsigned() &&
                  (*it)[1].is_number_unsigned() && (*it)[0].get<uint64_t>() <= (*it)[1].get<uint64_t>();
  if (!ok) {
    fail_tensor(
        path, name,
        fmt::format("\"data_offsets\" must be [begin, end], two non-negative integers with begin <= end; got {}",
                    it == entry.end() ? std::string("nothing") : util::json_excerpt(*it)));
  }
  return {(*it)[0].get<uint64_t>(), (*it)[1].get<uint64_t>()};
}

}  // namespace

size_t dtype_size(DType dtype) { return info(dtype).size_bytes; }
std::string_view dtype_name(DType dtype) { return info(dtype).name; }
bool is_floating(DType dtype) { return info(dtype).floating; }

std::optional<DType> parse_dtype(std::string_view name) {
  for (const DTypeInfo& d : kDTypes) {
    if (d.name == name) return d.dtype;
  }
  return std::nullopt;
}

int64_t shape_numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t dim : shape) n *= dim;
  return n;
}

std::string shape_to_string(const std::vector<int64_t>& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

SafetensorsFile::SafetensorsFile(SafetensorsFile&& other) noexcept { *this = std::move(other); }

SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&& other) noexcept {
  if (this != &other) {
    unmap();
    path_ = std::move(other.path_);
    // The views keep pointing at the same pages: the mapping changes owner, not address.
    mapping_ = std::exchange(other.mapping_, nullptr);
    mapped_bytes_ = std::exchange(other.mapped_bytes_, 0);
    tensors_ = std::move(other.tensors_);
    index_ = std::move(other.index_);
    metadata_ = std::move(other.metadata_);
  }
  return *this;
}

SafetensorsFile::~SafetensorsFile() { unmap(); }

void SafetensorsFile::unmap() noexcept {
  if (mapping_ != nullptr) ::munmap(mapping_, mapped_bytes_);
  mapping_ = nullptr;
  mapped_bytes_ = 0;
}

const TensorView* SafetensorsFile::find(std::string_view name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

std::shared_ptr<const SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  // Owned from the start so that any error below unmaps what was mapped.
  std::shared_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->path_ = path;

  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) fail(path, "no such safetensors file");
    fail(path, fmt::format("cannot open: {}", std::strerror(err)));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(path, "not a regular file");
  }
  const auto size_bytes = static_cast<uint64_t>(st.st_size);
  if (size_bytes < 8) {
    ::close(fd);
    fail(path,
         fmt::format("file is {} bytes, shorter than the 8-byte header length: not a safetensors file", size_bytes));
  }
  void* mapping = ::mmap(nullptr, size_bytes, PROT_READ, MAP_PRIVATE, fd, 0);
  const int map_errno = errno;
  ::close(fd);  // the mapping holds its own reference to the file
  if (mapping == MAP_FAILED) fail(path, fmt::format("cannot map: {}", std::strerror(map_errno)));
  file->mapping_ = mapping;
  file->mapped_bytes_ = size_bytes;
  const auto* bytes = static_cast<const unsigned char*>(mapping);

  uint64_t header_bytes = 0;
  for (int i = 7; i >= 0; --i) header_bytes = (header_bytes << 8) | bytes[i];  // little-endian
  if (header_bytes > kMaxHeaderBytes) {
    fail(path, fmt::format("header length {} bytes is absurdly large (limit {}): not a safetensors file", header_bytes,
                           kMaxHeaderBytes));
  }
  if (header_bytes > size_bytes - 8) {
    fail(path, fmt::format("header length {} bytes runs past the end of the {}-byte file: truncated or not "
                           "a safetensors file",
                           header_bytes, size_bytes));
  }
  const char* header_begin = reinterpret_cast<const char*>(bytes + 8);
  json header;
  try {
    header = util::parse_json(std::string_view(header_begin, header_bytes), "header");
  } catch (const util::JsonInputError& e) {
    fail(path, e.what());
  }
  if (!header.is_object()) fail(path, "header is not a JSON object");

  const uint64_t buffer_bytes = size_bytes - 8 - header_bytes;
  const unsigned char* buffer = bytes + 8 + header_bytes;
  struct Range {
    uint64_t begin, end;
  };
  std::vector<Range> ranges;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) fail(path, "\"__metadata__\" is not an object of strings");
      for (const auto& [key, value] : entry.items()) {
        if (!value.is_string()) fail(path, fmt::format("\"__metadata__\" key '{}' is not a string", key));
        file->metadata_[key] = value.get<std::string>();
      }
      continue;
    }
    if (!entry.is_object()) fail_tensor(path, name, "entry is not a JSON object");
    const auto dtype_it = entry.find("dtype");
    if (dtype_it == entry.end() || !dtype_it->is_string()) {
      fail_tensor(path, name, "\"dtype\" is missing or not a string");
    }
    const std::optional<DType> dtype = parse_dtype(dtype_it->get<std::string>());
    if (!dtype) {
      fail_tensor(path, name,
                  fmt::format("unknown dtype '{}' (supported: {})", dtype_it->get<std::string>(), supported_dtypes()));
    }
    std::vector<int64_t> shape = parse_shape(path, name, entry);
    const auto [begin, end] = parse_offsets(path, name, entry);
    const std::optional<uint64_t> expected_bytes = byte_size(shape, dtype_size(*dtype));
    if (!expected_bytes || *expected_bytes != end - begin) {
      fail_tensor(path, name,
                  fmt::format("dtype {} and shape {} need {} bytes but data_offsets [{}, {}] cover {} bytes",
                              dtype_name(*dtype), shape_to_string(shape),
                              expected_bytes ? std::to_string(*expected_bytes) : "too many", begin, end, end - begin));
    }
    if (end > buffer_bytes) {
      fail_tensor(
          path, name,
          fmt::format("data_offsets [{}, {}] run past the end of the {}-byte data buffer: the file is truncated", begin,
                      end, buffer_bytes));
    }
    file->tensors_.push_back(TensorView{name, *dtype, std::move(shape), buffer + begin, end - begin});
    ranges.push_back({begin, end});
  }

  // File order, so that reading tensors one after another walks the file forward.
  std::vector<size_t> order(file->tensors_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (ranges[a].begin != ranges[b].begin) return ranges[a].begin < ranges[b].begin;
    if (ranges[a].end != ranges[b].end) return ranges[a].end < ranges[b].end;
    return file->tensors_[a].name < file->tensors_[b].name;
  });
  std::vector<TensorView> sorted;
  sorted.reserve(order.size());
  const TensorView* last = nullptr;  // the non-empty tensor reaching furthest so far
  uint64_t last_end = 0;
  for (size_t i : order) {
    // Empty tensors own no bytes, so they cannot overlap anything.
    if (ranges[i].end > ranges[i].begin) {
      if (last != nullptr && ranges[i].begin < last_end) {
        fail(path, fmt::format("tensors '{}' and '{}' overlap in the data buffer (the first ends at byte {}, the "
                               "second begins at byte {})",
                               last->name, file->tensors_[i].name, last_end, ranges[i].begin));
      }
      last = &file->tensors_[i];
      last_end = ranges[i].end;
    }
  }
  for (size_t i : order) sorted.push_back(std::move(file->tensors_[i]));
  file->tensors_ = std::move(sorted);
  for (size_t i = 0; i < file->tensors_.size(); ++i) file->index_.emplace(file->tensors_[i].name, i);
  return file;
}

void write_safetensors(const std::string& path, const std::vector<TensorView>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::set<std::string_view> names;
  for (const TensorView& t : tensors) {
    if (t.name.empty() || t.name == "__metadata__") fail(path, fmt::format("invalid tensor name '{}'", t.name));
    if (!names.insert(t.name).second) fail_tensor(path, t.name, "given twice");
    const std::optional<uint64_t> expected = byte_size(t.shape, dtype_size(t.dtype));
    if (!expected) fail_tensor(path, t.name, fmt::format("invalid shape {}", shape_to_string(t.shape)));
    if (*expected != t.nbytes) {
      fail_tensor(path, t.name,
                  fmt::format("dtype {} and shape {} need {} bytes, the view has {}", dtype_name(t.dtype),
                              shape_to_string(t.shape), *expected, t.nbytes));
    }
    if (t.nbytes > 0 && t.data == nullptr && !t.read) fail_tensor(path, t.name, "no data");
  }

  // Largest elements first: with the buffer starting 8-aligned, every tensor starts at a multiple of its
  // element size.
  std::vector<const TensorView*> order;
  for (const TensorView& t : tensors) order.push_back(&t);
  std::sort(order.begin(), order.end(), [](const TensorView* a, const TensorView* b) {
    const size_t sa = dtype_size(a->dtype), sb = dtype_size(b->dtype);
    return sa != sb ? sa > sb : a->name < b->name;
  });

  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const TensorView* t : order) {
    header[t->name] = {{"dtype", std::string(dtype_name(t->dtype))},
                       {"shape", t->shape},
                       {"data_offsets", {offset, offset + t->nbytes}}};
    offset += t->nbytes;
  }
  std::string header_text;
  try {
    header_text = header.dump();
  } catch (const nlohmann::json::exception& e) {
    fail(path, fmt::format("cannot encode the header: {}", e.what()));
  }
  header_text.append((8 - header_text.size() % 8) % 8, ' ');

  // Unique per process and call, so concurrent writers of the same path never share a temporary.
  static std::atomic<uint64_t> counter{0};
  const std::string tmp_path = fmt::format("{}.tmp.{}.{}", path, ::getpid(), counter++);
  std::FILE* out = std::fopen(tmp_path.c_str(), "wb");
  if (out == nullptr) fail(path, fmt::format("cannot create {}: {}", tmp_path, std::strerror(errno)));
  std::array<unsigned char, 8> length_le{};
  for (size_t i = 0; i < 8; ++i) length_le[i] = static_cast<unsigned char>(uint64_t{header_text.size()} >> (8 * i));
  bool ok = std::fwrite(length_le.data(), 1, 8, out) == 8 &&
            std::fwrite(header_text.data(), 1, header_text.size(), out) == header_text.size();
  std::vector<char> staged;  // the tensor `read` fills, reused: the largest one at a time
  for (const TensorView* t : order) {
    if (!ok) break;
    const void* data = t->data;
    if (t->read && t->nbytes > 0) {
      staged.resize(t->nbytes);
      try {
        t->read(staged.data());
      } catch (const std::exception& e) {
        std::fclose(out);
        std::remove(tmp_path.c_str());
        fail_tensor(path, t->name, fmt::format("cannot read it: {}", e.what()));
      }
      data = staged.data();
    }
    ok = t->nbytes == 0 || std::fwrite(data, 1, t->nbytes, out) == t->nbytes;
  }
  ok = ok && std::fflush(out) == 0 && ::fsync(::fileno(out)) == 0;
  const int write_errno = errno;
  ok = (std::fclose(out) == 0) && ok;
  if (!ok || std::rename(tmp_path.c_str(), path.c_str()) != 0) {
    const int err = ok ? errno : write_errno;
    std::remove(tmp_path.c_str());
    fail(path, fmt::format("cannot write: {}", std::strerror(err)));
  }
}

}  // namespace grpo::model
