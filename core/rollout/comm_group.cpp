#include "rollout/comm_group.h"

#include <fmt/format.h>
#include <sys/mman.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
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
#include <thread>

#include "dist/nccl_group.h"
#include "rollout/store_listen.h"
#include "util/clock.h"

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

at::Tensor pack_bucket(const std::vector<at::Tensor>& tensors, const at::Device& device) {
  const auto byte_options = at::TensorOptions(at::kByte).device(device);
  std::vector<at::Tensor> bytes;
  for (const auto& t : tensors) {
    bytes.push_back(as_bytes(t.to(device).contiguous()));
    const int64_t pad = aligned(bytes.back().numel()) - bytes.back().numel();
    if (pad > 0) bytes.push_back(at::zeros({pad}, byte_options));
  }
  return bytes.empty() ? at::empty({0}, byte_options) : at::cat(bytes);
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

const char* backend_name(Backend backend) { return backend == Backend::Nccl ? "nccl" : "gloo"; }

std::optional<Backend> backend_from_name(std::string_view name) {
  if (name == "gloo") return Backend::Gloo;
  if (name == "nccl") return Backend::Nccl;
  return std::nullopt;
}

#if defined(GRPO_WITH_CUDA) && defined(USE_C10D_NCCL)
bool nccl_built() { return true; }
#else
bool nccl_built() { return false; }
#endif

struct CommGroup::Impl {
  c10::intrusive_ptr<c10d::TCPStore> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group;
  c10::intrusive_ptr<c10d::Backend> nccl;  // Backend::Nccl: the tensors' group
  bool nccl_aborted = false;

  // Frees this rank from the communicator without its peers (a clean
  // shutdown waits for them): after a failure, or with a peer gone.
  void abort_nccl() {
    if (!nccl || nccl_aborted) return;
    nccl_aborted = true;
    dist::abort_quietly(*nccl);
  }

  ~Impl() {
    if (!nccl || nccl_aborted) return;
    try {
      nccl->shutdown();
    } catch (const std::exception&) {  // leaving anyway
    }
  }
};

CommGroup::CommGroup(std::unique_ptr<Impl> impl, int rank, int world_size, std::chrono::milliseconds timeout,
                     Backend backend, const at::Device& device)
    : impl_(std::move(impl)), rank_(rank), world_size_(world_size), timeout_(timeout), backend_(backend),
      device_(backend == Backend::Nccl ? device : at::Device(at::kCPU)) {}

CommGroup::~CommGroup() = default;

std::unique_ptr<CommGroup> CommGroup::create(const std::string& host, int port, int rank, int world_size,
                                             std::chrono::milliseconds timeout, const std::string& listen_host,
                                             Backend backend, const at::Device& device) {
  if (backend == Backend::Nccl && (!nccl_built() || !device.is_cuda()))
    throw TransferError(fmt::format("an NCCL group needs every rank on a GPU of a CUDA build; rank {} has {}{}", rank,
                                    device.str(), nccl_built() ? "" : " and this build has no NCCL"));
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
  if (backend == Backend::Nccl) {
    try {
      // NCCL's watchdog a minute behind the polled waits (broadcast_nccl), which report a stall themselves.
      impl->nccl = dist::make_nccl_group(c10::make_intrusive<c10d::PrefixStore>("nccl/", impl->store), rank,
                                         world_size, device, timeout + std::chrono::minutes(1));
    } catch (const std::exception& e) {
      throw TransferError(fmt::format(
          "join the NCCL group (rank {} of {}, on {}) at {}:{} failed within {:.1f} s: {}; every rank needs a GPU of "
          "its own (NCCL refuses two ranks on one GPU) and a network interface the others reach (NCCL_SOCKET_IFNAME), "
          "or push over Gloo (the trainer's sampler_args {{\"weight_backend\": \"gloo\"}})",
          rank, world_size, device.str(), host, port, timeout_s, cause(e)));
    }
  }
  return std::unique_ptr<CommGroup>(new CommGroup(std::move(impl), rank, world_size, timeout, backend, device));
}

std::string transfer_in_flight() {
  std::unique_lock<std::mutex> lock(in_flight_mutex, std::try_to_lock);  // called while the process dies
  return lock ? in_flight : std::string("a weight broadcast");
}

void CommGroup::send(const at::Tensor& tensor, const std::string& what) {
  if (rank_ != source_rank())
    throw TransferError(fmt::format("send {}: rank {} is a receiving rank", what, rank_));
  if (tensor.device() != device_)
    throw TransferError(fmt::format("send {}: the tensor is on {}, the group sends from {}", what,
                                    tensor.device().str(), device_.str()));
  at::Tensor bytes = as_bytes(tensor);
  if (backend_ == Backend::Nccl) {  // its size first, and every receiver's consent: see receive_nccl()
    at::Tensor size = at::full({1}, bytes.numel(), at::kLong);
    broadcast(size, what + "'s size");
    if (!all_agree(true, what))
      throw BroadcastSizeError(fmt::format(
          "broadcast of {} ({} bytes): a receiving rank refused it (its log says why: a size other than it was told, "
          "or no room on its GPU); nothing was sent, the receivers' weights are unchanged and the group stays usable",
          what, bytes.numel()));
    broadcast_nccl(bytes, what);
    return;
  }
  broadcast(bytes, what);
}

at::Tensor CommGroup::receive(int64_t nbytes, const std::string& what) {
  if (rank_ == source_rank())
    throw TransferError(fmt::format("receive {}: rank {} is the sending rank", what, rank_));
  if (backend_ == Backend::Nccl) return receive_nccl(nbytes, what);
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

// NCCL broadcasts exactly the count each rank gives, checks nothing, and a
// broadcast one rank skips leaves the others waiting in it. So the sender's
// count comes first and every rank then says, over Gloo, whether it can take
// it (the size it was told, room on its GPU): the broadcast runs only when all
// can, and a refusal leaves every rank in step, the weights unchanged.
at::Tensor CommGroup::receive_nccl(int64_t nbytes, const std::string& what) {
  at::Tensor size = at::empty({1}, at::kLong);
  broadcast(size, what + "'s size");
  const int64_t sent = size.item<int64_t>();
  std::string refusal;
  at::Tensor bytes;
  if (sent != nbytes) {
    refusal = fmt::format("rank {} is sending {} bytes where {} were announced; the tensor it sends must have the "
                          "dtype and shape its request names",
                          source_rank(), sent, nbytes);
  } else {
    try {
      bytes = at::empty({sent}, at::TensorOptions(at::kByte).device(device_));
    } catch (const c10::Error& e) {  // out of memory, mostly
      refusal = fmt::format("{} bytes do not fit on {} ({}); lower the server's --gpu_memory_utilization or the trainer's bucket_mb",
                            sent, device_.str(), cause(e));
    }
  }
  const bool all = all_agree(refusal.empty(), what);
  if (!refusal.empty())
    throw BroadcastSizeError(fmt::format("broadcast of {}: {} (not received; the weights are unchanged)", what, refusal));
  if (!all)
    throw BroadcastSizeError(fmt::format("broadcast of {}: another receiving rank refused it (its log says why); not "
                                         "received, the weights are unchanged",
                                         what));
  InFlight note(fmt::format("{} ({} bytes announced)", what, nbytes));
  broadcast_nccl(bytes, what);
  return bytes;
}

bool CommGroup::all_agree(bool mine, const std::string& what) {
  std::vector<at::Tensor> vote{at::full({1}, mine ? 1 : 0, at::kLong)};
  c10d::AllreduceOptions opts;
  opts.reduceOp = c10d::ReduceOp::MIN;
  opts.timeout = timeout_;
  try {
    impl_->group->allreduce(vote, opts)->wait(timeout_);
  } catch (const std::exception& e) {
    throw TransferError(fmt::format("agreeing on the broadcast of {} failed or timed out after {:.1f} s: {}", what,
                                    static_cast<double>(timeout_.count()) / 1000.0, cause(e)));
  }
  return vote[0].item<int64_t>() == 1;
}

// Polled, as the World polls its NCCL collectives: a wait() with a limit
// would give up on the communicator itself. Past the timeout the
// communicator is aborted, which frees this rank from the collective.
void CommGroup::broadcast_nccl(at::Tensor& bytes, const std::string& what) {
  if (bytes.numel() == 0) return;
  if (!impl_->nccl || impl_->nccl_aborted)
    throw TransferError(fmt::format("broadcast of {}: the NCCL group was aborted by an earlier failure", what));
  std::vector<at::Tensor> tensors{bytes};
  c10d::BroadcastOptions opts;
  opts.rootRank = source_rank();
  opts.timeout = timeout_;
  const double timeout_s = static_cast<double>(timeout_.count()) / 1000.0;
  const double start = util::now_s();
  try {
    auto work = impl_->nccl->broadcast(tensors, opts);
    while (!work->isCompleted()) {
      if (util::now_s() - start > timeout_s) {
        impl_->abort_nccl();
        throw TransferError(fmt::format("broadcast of {} ({} bytes) over NCCL from rank {} did not finish in {:.1f} s: "
                                        "a rank stopped or is gone; the group is aborted",
                                        what, bytes.numel(), source_rank(), timeout_s));
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    work->wait();  // its error, if it failed; else orders this thread's stream after it
  } catch (const TransferError&) {
    throw;
  } catch (const std::exception& e) {
    impl_->abort_nccl();  // a failed communicator is aborted, never shut down as if healthy
    throw TransferError(fmt::format("broadcast of {} ({} bytes) over NCCL from rank {} failed: {}", what,
                                    bytes.numel(), source_rank(), cause(e)));
  }
}

void CommGroup::abandon() { impl_->abort_nccl(); }

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
