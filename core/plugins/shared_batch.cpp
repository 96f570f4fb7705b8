#include "plugins/shared_batch.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>

namespace grpo::plugins {

namespace {

constexpr size_t kAlign = 8;  // every field starts 8-aligned: ids are read in place as int32
constexpr int64_t kNoColumns = -1;

size_t padded(size_t n) { return (n + kAlign - 1) & ~(kAlign - 1); }

char* map_fd(int fd, size_t bytes) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) throw std::runtime_error(fmt::format("cannot map {} bytes of shared memory: {}", bytes, std::strerror(errno)));
  return static_cast<char*>(p);
}

class Writer {
 public:
  explicit Writer(SharedMemory& mem) : mem_(mem) {}
  size_t used() const { return pos_; }
  void u64(uint64_t v) { bytes(&v, sizeof v); }
  void i64(int64_t v) { bytes(&v, sizeof v); }
  void f64(double v) { bytes(&v, sizeof v); }
  void str(std::string_view s) {
    u64(s.size());
    bytes(s.data(), s.size());
  }
  void ids(const int32_t* p, size_t n) {
    u64(n);
    bytes(p, n * sizeof(int32_t));
  }

 private:
  void bytes(const void* p, size_t n) {
    const size_t end = pos_ + padded(n);
    if (end > mem_.size()) mem_.grow(std::max(end, mem_.size() * 2));
    if (n) std::memcpy(mem_.data() + pos_, p, n);
    pos_ = end;
  }
  SharedMemory& mem_;
  size_t pos_ = 0;
};

class Reader {
 public:
  Reader(const char* data, size_t used) : data_(data), used_(used) {}
  uint64_t u64() { return scalar<uint64_t>(); }
  int64_t i64() { return scalar<int64_t>(); }
  double f64() { return scalar<double>(); }
  std::string_view str() {
    const uint64_t n = u64();
    return {take(n), n};
  }
  const int32_t* ids(size_t* n) {
    *n = u64();
    if (*n > used_ / sizeof(int32_t)) cut();
    return reinterpret_cast<const int32_t*>(take(*n * sizeof(int32_t)));
  }

 private:
  template <class T>
  T scalar() {
    T v;
    std::memcpy(&v, take(sizeof v), sizeof v);
    return v;
  }
  const char* take(uint64_t n) {
    if (n > used_ || padded(n) > used_ - pos_) cut();
    const char* p = data_ + pos_;
    pos_ += padded(n);
    return p;
  }
  [[noreturn]] void cut() const { throw std::runtime_error("the batch in shared memory is cut short"); }
  const char* data_;
  size_t used_, pos_ = 0;
};

}  // namespace

SharedMemory::~SharedMemory() {
  unmap();
  if (fd_ >= 0) ::close(fd_);
}

SharedMemory::SharedMemory(SharedMemory&& o) noexcept : fd_(o.fd_), data_(o.data_), size_(o.size_) {
  o.fd_ = -1, o.data_ = nullptr, o.size_ = 0;
}

SharedMemory& SharedMemory::operator=(SharedMemory&& o) noexcept {
  std::swap(fd_, o.fd_);  // o releases what this held
  std::swap(data_, o.data_);
  std::swap(size_, o.size_);
  return *this;
}

void SharedMemory::unmap() {
  if (data_) ::munmap(data_, size_);
  data_ = nullptr;
}

SharedMemory SharedMemory::create(size_t bytes) {
  SharedMemory m;
  // Close-on-exec: the worker gets it by an explicit dup2, nothing else does.
  m.fd_ = ::memfd_create("grpo-reward-batch", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (m.fd_ < 0) throw std::runtime_error(fmt::format("cannot create shared memory: {}", std::strerror(errno)));
  // The worker holds the same file: had it shrunk it, the host's next write
  // past the new end would die of SIGBUS. Sealed, nobody can shrink it, nor
  // add or remove seals; growing stays allowed, for the host.
  if (::fcntl(m.fd_, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_SEAL) != 0)
    throw std::runtime_error(fmt::format("cannot seal shared memory: {}", std::strerror(errno)));
  m.grow(bytes);
  return m;
}

SharedMemory SharedMemory::attach(int fd) {
  SharedMemory m;
  m.fd_ = fd;
  m.map_at_least(1);
  return m;
}

void SharedMemory::grow(size_t at_least) {
  const size_t bytes = padded(std::max<size_t>(at_least, 4096));
  // Grown already (by the worker, which may grow it too): truncating to
  // `bytes` would be shrinking it, which the seal refuses.
  struct stat st {};
  if (::fstat(fd_, &st) != 0)
    throw std::runtime_error(fmt::format("cannot size shared memory: {}", std::strerror(errno)));
  if (static_cast<size_t>(st.st_size) < bytes && ::ftruncate(fd_, static_cast<off_t>(bytes)) != 0)
    throw std::runtime_error(fmt::format("cannot grow shared memory to {} bytes: {}", bytes, std::strerror(errno)));
  char* p = map_fd(fd_, bytes);
  unmap();
  data_ = p, size_ = bytes;
}

void SharedMemory::map_at_least(size_t n) {
  if (data_ && n <= size_) return;
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || static_cast<size_t>(st.st_size) < n)
    throw std::runtime_error("the batch is larger than the shared memory it was written to");
  char* p = map_fd(fd_, static_cast<size_t>(st.st_size));
  unmap();
  data_ = p, size_ = static_cast<size_t>(st.st_size);
}

size_t write_batch(SharedMemory& mem, const std::vector<RewardView>& rows, const TrainerState& state) {
  std::unordered_map<const ColumnsView*, int64_t> set_of;
  std::vector<const ColumnsView*> sets;
  for (const RewardView& r : rows)
    if (r.columns && set_of.emplace(r.columns, static_cast<int64_t>(sets.size())).second) sets.push_back(r.columns);
  Writer w(mem);
  w.i64(state.global_step);
  w.i64(state.max_steps);
  w.f64(state.epoch);
  w.u64(sets.size());
  for (const ColumnsView* set : sets) {
    w.str(set->json);
    w.u64(set->columns.size());
    for (const grpo_column& c : set->columns) {
      w.str({c.name.data, c.name.size});
      w.str({c.json.data, c.json.size});
      w.str({c.text.data, c.text.size});
    }
  }
  w.u64(rows.size());
  for (const RewardView& r : rows) {
    w.str(r.messages_json);
    w.str(r.completion);
    w.str(r.conversation);
    w.u64(r.ids != nullptr);
    w.ids(r.ids, r.ids ? r.n_ids : 0);
    w.i64(r.tokens);
    w.u64(r.truncated);
    w.i64(r.prompt_index);
    w.i64(r.columns ? set_of.at(r.columns) : kNoColumns);
  }
  return w.used();
}

void read_batch(const char* data, size_t used, BatchViews* out) {
  Reader in(data, used);
  out->state.global_step = in.i64();
  out->state.max_steps = in.i64();
  out->state.epoch = in.f64();
  const uint64_t n_sets = in.u64();
  if (n_sets > used) throw std::runtime_error("the batch in shared memory is cut short");
  out->column_sets.assign(n_sets, {});
  for (ColumnsView& set : out->column_sets) {
    set.json = in.str();
    const uint64_t n = in.u64();
    if (n > used) throw std::runtime_error("the batch in shared memory is cut short");
    set.columns.resize(n);
    for (grpo_column& c : set.columns) {
      const std::string_view name = in.str(), json = in.str(), text = in.str();
      c = {{name.data(), name.size()}, {json.data(), json.size()}, {text.data(), text.size()}};
    }
  }
  const uint64_t n_rows = in.u64();
  if (n_rows > used) throw std::runtime_error("the batch in shared memory is cut short");
  out->rows.assign(n_rows, {});
  for (RewardView& r : out->rows) {
    r.messages_json = in.str();
    r.completion = in.str();
    r.conversation = in.str();
    const bool has_ids = in.u64() != 0;
    size_t n_ids = 0;
    const int32_t* ids = in.ids(&n_ids);
    r.ids = has_ids ? ids : nullptr;
    r.n_ids = has_ids ? n_ids : 0;
    r.tokens = in.i64();
    r.truncated = in.u64() != 0;
    r.prompt_index = in.i64();
    const int64_t set = in.i64();
    if (set != kNoColumns && (set < 0 || static_cast<uint64_t>(set) >= n_sets))
      throw std::runtime_error("a row of the batch names a column set that is not there");
    r.columns = set == kNoColumns ? nullptr : &out->column_sets[static_cast<size_t>(set)];
  }
}

}  // namespace grpo::plugins
