#include "rollout/comm_group.h"

#include <fmt/format.h>
#include <sys/mman.h>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <mutex>
#include <numeric>
#include <optional>
#include <random>

#include "rollout/store_listen.h"

namespace grpo::rollout {

int64_t TensorSpec::nbytes() const {
  int64_t numel = std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
  return numel * static_cast<int64_t>(c10::elementSize(dtype));
}

namespace {

// A tensor's memory as bytes: Gloo moves bytes whatever the dtype, so one
// code path serves every dtype and a bucket of mixed dtypes alike.
at::Tensor as_bytes(const at::Tensor& t) { return t.reshape({-1}).view(at::kByte); }

// Each tensor of a bucket starts at a multiple of 8 bytes: a byte view can
// only be reinterpreted as a wider dtype at an offset aligned to it.
constexpr int64_t kBucketAlign = 8;
int64_t aligned(int64_t n) { return (n + kBucketAlign - 1) / kBucketAlign * kBucketAlign; }

// c10d's message without the C++ backtrace that follows its first line.
std::string cause(const std::exception& e) {
  std::string text = e.what();
  return text.substr(0, std::min(text.find('\n'), size_t{300}));
}

bool is_loopback(const std::string& host) { return host == "localhost" || host.rfind("127.", 0) == 0; }

std::mutex in_flight_mutex;
std::string in_flight;

// Names the broadcast being received for transfer_in_flight() while it lasts.
class InFlight {
 public:
  explicit InFlight(std::string what) {
    std::lock_guard<std::mutex> lock(in_flight_mutex);
    in_flight = std::move(what);
  }
  ~InFlight() {
    std::lock_guard<std::mutex> lock(in_flight_mutex);
    in_flight.clear();
  }
};

// Gloo completes a receive when the sender's bytes end, even if they end
// before the buffer does, and says nothing of how many came; bytes beyond the
// buffer it refuses in its own network thread, where no caller can catch it
// and the process must die. So a receiving rank posts a buffer with headroom
// (kReceiveHeadroom times the announced bytes, plus a page) and two random
// marks: in the last 8 announced bytes, and in the first 8 after them. The
// first still there, the broadcast was short; the second changed, it was
// long. A sender's bytes equal a mark by chance once in 2^64 (once in 256^k
// for a broadcast only k < 8 bytes long).
class ReceiveBuffer {
 public:
  ReceiveBuffer(int64_t announced, const std::string& what) : announced_(announced) {
    bytes_ = reserve(announced * CommGroup::kReceiveHeadroom + 4096, what);
    static thread_local std::mt19937_64 marks{std::random_device{}()};
    short_mark_ = marks();
    long_mark_ = marks();
    if (announced_ >= 8) std::memcpy(at(announced_ - 8), &short_mark_, 8);
    std::memcpy(at(announced_), &long_mark_, 8);
  }
  at::Tensor& bytes() { return bytes_; }
  bool is_short() const { return announced_ >= 8 && std::memcmp(at(announced_ - 8), &short_mark_, 8) == 0; }
  bool is_long() const { return std::memcmp(at(announced_), &long_mark_, 8) != 0; }

 private:
  // Address space only: a page is committed when first written, so the
  // headroom costs memory only when a longer broadcast fills it.
  static at::Tensor reserve(int64_t n, const std::string& what) {
    void* p = ::mmap(nullptr, static_cast<size_t>(n), PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
      throw TransferError(fmt::format("receive {}: cannot reserve {} bytes of address space: {}", what, n,
                                      std::strerror(errno)));
    return at::from_blob(p, {n}, [n](void* q) { ::munmap(q, static_cast<size_t>(n)); }, at::kByte);
  }
  uint8_t* at(int64_t offset) const { return bytes_.data_ptr<uint8_t>() + offset; }
  int64_t announced_;
  at::Tensor bytes_;
  uint64_t short_mark_ = 0, long_mark_ = 0;
};

}  // namespace

int64_t bucket_bytes(const std::vector<TensorSpec>& specs) {
  int64_t total = 0;
  for (const auto& s : specs) total += aligned(s.nbytes());
  return total;
}

at::Tensor pack_bucket(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> bytes;
  for (const auto& t : tensors) {
    bytes.push_back(as_bytes(t.to(at::kCPU).contiguous()));
    const int64_t pad = aligned(bytes.back().numel()) - bytes.back().numel();
    if (pad > 0) bytes.push_back(at::zeros({pad}, at::kByte));
  }
  return bytes.empty() ? at::empty({0}, at::kByte) : at::cat(bytes);
}

std::vector<at::Tensor> unpack_bucket(const at::Tensor& flat, const std::vector<TensorSpec>& specs) {
  std::vector<at::Tensor> out;
  int64_t offset = 0;
  for (const auto& s : specs) {
    const int64_t n = s.nbytes();
    if (offset + n > flat.numel())
      throw TransferError(fmt::format("bucket of {} bytes is too short for '{}'", flat.numel(), s.name));
    out.push_back(flat.narrow(0, offset, n).view(s.dtype).view(s.shape));
    offset += aligned(n);
  }
  return out;
}

struct CommGroup::Impl {
  c10::intrusive_ptr<c10d::TCPStore> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group;
};

CommGroup::CommGroup(std::unique_ptr<Impl> impl, int rank, int world_size, std::chrono::milliseconds timeout)
    : impl_(std::move(impl)), rank_(rank), world_size_(world_size), timeout_(timeout) {}

CommGroup::~CommGroup() = default;

std::unique_ptr<CommGroup> CommGroup::create(const std::string& host, int port, int rank, int world_size,
                                             std::chrono::milliseconds timeout, const std::string& listen_host) {
  if (world_size < 2) throw TransferError(fmt::format("world_size must be >= 2 (workers + trainer), got {}", world_size));
  if (rank < 0 || rank >= world_size) throw TransferError(fmt::format("rank {} outside 0..{}", rank, world_size - 1));
  if (port <= 0 || port > 65535) throw TransferError(fmt::format("port {} outside 1..65535", port));
  const double timeout_s = static_cast<double>(timeout.count()) / 1000.0;
  auto impl = std::make_unique<Impl>();
  const bool server = rank == 0;
  try {
    c10d::TCPStoreOptions opts;
    opts.port = static_cast<uint16_t>(port);
    opts.isServer = server;
    opts.numWorkers = static_cast<size_t>(world_size);
    opts.waitWorkers = false;  // the group's rendezvous below waits, with the same timeout
    opts.timeout = timeout;
    std::optional<StoreListenScope> narrowed;
    if (server) narrowed.emplace(listen_host, port);
    impl->store = c10::make_intrusive<c10d::TCPStore>(host, opts);
  } catch (const std::exception& e) {
    throw TransferError(fmt::format(
        "{} at {}:{} failed within {:.1f} s: {}", server ? "host the TCPStore" : "connect to the TCPStore", host, port,
        timeout_s,
        server ? std::string("is the port free?") : std::string("did the server get POST /init_communicator/?")) +
        fmt::format(" ({})", cause(e)));
  }
  try {
    auto options = c10d::ProcessGroupGloo::Options::create(timeout);
    // Loopback groups stay on loopback; otherwise the host's own address, which other machines can reach.
    options->devices.push_back(is_loopback(host) ? c10d::ProcessGroupGloo::createDeviceForHostname(host)
                                                 : c10d::ProcessGroupGloo::createDefaultDevice());
    options->threads = 1;
    impl->group = c10::make_intrusive<c10d::ProcessGroupGloo>(impl->store, rank, world_size, options);
  } catch (const std::exception& e) {
    throw TransferError(fmt::format(
        "join the Gloo group (rank {} of {}) at {}:{} failed within {:.1f} s: {} rank(s) did not join; {}", rank,
        world_size, host, port, timeout_s, server ? "the trainer's" : "the server's",
        server ? "the trainer must connect after POST /init_communicator/" : "check the server's log") +
        fmt::format(" ({})", cause(e)));
  }
  return std::unique_ptr<CommGroup>(new CommGroup(std::move(impl), rank, world_size, timeout));
}

std::string transfer_in_flight() {
  std::unique_lock<std::mutex> lock(in_flight_mutex, std::try_to_lock);  // called while the process dies
  return lock ? in_flight : std::string("a weight broadcast");
}

void CommGroup::send(const at::Tensor& tensor, const std::string& what) {
  if (rank_ != source_rank())
    throw TransferError(fmt::format("send {}: rank {} is a receiving rank", what, rank_));
  at::Tensor bytes = as_bytes(tensor);
  broadcast(bytes, what);
}

at::Tensor CommGroup::receive(int64_t nbytes, const std::string& what) {
  if (rank_ == source_rank())
    throw TransferError(fmt::format("receive {}: rank {} is the sending rank", what, rank_));
  ReceiveBuffer buffer(nbytes, what);
  {
    InFlight note(fmt::format("{} ({} bytes announced)", what, nbytes));
    broadcast(buffer.bytes(), what);
  }
  const char* wrong = buffer.is_long() ? "more" : buffer.is_short() ? "fewer" : nullptr;
  if (wrong)
    throw BroadcastSizeError(fmt::format(
        "broadcast of {}: rank {} sent {} bytes than the {} announced; the tensor it sends must have the dtype "
        "and shape its request names (the weights are unchanged)",
        what, source_rank(), wrong, nbytes));
  return buffer.bytes().narrow(0, 0, nbytes);
}

void CommGroup::broadcast(at::Tensor& bytes, const std::string& what) {
  std::vector<at::Tensor> tensors{bytes};
  c10d::BroadcastOptions opts;
  opts.rootRank = source_rank();
  opts.timeout = timeout_;
  try {
    impl_->group->broadcast(tensors, opts)->wait(timeout_);
  } catch (const std::exception& e) {
    throw TransferError(fmt::format("broadcast of {} ({} bytes) from rank {} failed or timed out after {:.1f} s: {}",
                                    what, bytes.numel(), source_rank(),
                                    static_cast<double>(timeout_.count()) / 1000.0, cause(e)));
  }
}

void CommGroup::barrier(const std::string& what) {
  c10d::BarrierOptions opts;
  opts.timeout = timeout_;
  try {
    impl_->group->barrier(opts)->wait(timeout_);
  } catch (const std::exception& e) {
    throw TransferError(fmt::format("barrier after {} failed or timed out after {:.1f} s: {}", what,
                                    static_cast<double>(timeout_.count()) / 1000.0,
                                    cause(e)));
  }
}

}  // namespace grpo::rollout
