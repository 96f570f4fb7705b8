// The weight-transfer group of the rollout protocol: a c10d TCPStore hosted
// by worker rank 0 and a Gloo process group over it, in which the trainer
// (rank world_size - 1) broadcasts tensors to the workers. Both the server
// and the trainer-side WeightSender use it. Every blocking step has a
// timeout and fails with a TransferError naming the step and the parameter:
// a silent hang is the most reported problem of the Python servers.
//
// When every rank is on a GPU of its own, the tensors go over NCCL instead
// (ProcessGroupNCCL over the same store), from device memory to device
// memory; the Gloo group stays for the announced sizes and the barriers.
#pragma once

#include <ATen/ATen.h>

#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "dist/nccl_group.h"
#include "model/dtype.h"

namespace grpo::rollout {

class TransferError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A broadcast shorter or longer than announced; the group itself is intact.
class BroadcastSizeError : public TransferError {
 public:
  using TransferError::TransferError;
};

// A parameter as the protocol announces it before its bytes follow.
struct TensorSpec {
  std::string name;  // Hugging Face parameter name
  at::ScalarType dtype = at::kFloat;
  std::vector<int64_t> shape;
  int64_t nbytes() const;
};

// "torch.bfloat16" or "bfloat16" -> kBFloat16 (the part after the last dot,
// as TRL's server reads it), and back to the spelling TRL's client sends.
using model::dtype_from_name;
using model::dtype_to_name;

// Many tensors as one flat byte buffer (one broadcast per bucket) and back;
// each starts at a multiple of 8 bytes. bucket_bytes: the buffer's size.
// The buffer is made on `device` (a GPU's for NCCL: no host copy).
int64_t bucket_bytes(const std::vector<TensorSpec>& specs);
at::Tensor pack_bucket(const std::vector<at::Tensor>& tensors, const at::Device& device = at::kCPU);
std::vector<at::Tensor> unpack_bucket(const at::Tensor& flat, const std::vector<TensorSpec>& specs);

// What a receiving rank is taking in right now ("" when nothing): a broadcast
// longer than the receiving buffer with its headroom fails inside Gloo's
// network thread, where no caller can catch it, and the process's last words
// should name it.
std::string transfer_in_flight();

// What carries the tensors: Gloo through host memory, or NCCL between GPUs.
enum class Backend { Gloo, Nccl };
const char* backend_name(Backend backend);  // "gloo", "nccl"
std::optional<Backend> backend_from_name(std::string_view name);
// Whether this build can form NCCL groups (a CUDA build with c10d's NCCL).
bool nccl_built();
using dist::device_uuid;  // "GPU-...", as the protocol's client_device_uuid spells it

class CommGroup {
 public:
  // Rank 0 hosts the store at host:port; other ranks connect to it (retrying
  // until `timeout`). Then all join the Gloo group. Throws TransferError
  // naming the step ("host the TCPStore", "connect to the TCPStore",
  // "join the Gloo group") and what to check. Rank 0's store listens on
  // `listen_host` only (empty: on every interface, as LibTorch does).
  // Under Backend::Nccl every rank gives its own GPU as `device`, and the
  // NCCL communicator forms now ("join the NCCL group"), after Gloo's.
  static std::unique_ptr<CommGroup> create(const std::string& host, int port, int rank, int world_size,
                                           std::chrono::milliseconds timeout, const std::string& listen_host = "",
                                           Backend backend = Backend::Gloo, const at::Device& device = at::kCPU);
  ~CommGroup();

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  int source_rank() const { return world_size_ - 1; }  // the trainer
  Backend backend() const { return backend_; }
  // Where broadcast tensors live: this rank's GPU under NCCL, else the CPU.
  const at::Device& device() const { return device_; }
  // Under NCCL, the communicator aborted now, so that closing the group does
  // not wait for peers that will not close theirs (a server gone).
  void abandon();

  // The source rank (the trainer) broadcasts `tensor` (contiguous, on
  // device()); `what` names the parameter (or bucket) in errors. Under NCCL,
  // a receiver's refusal (see receive) is a BroadcastSizeError here too.
  void send(const at::Tensor& tensor, const std::string& what);
  // A receiving rank takes the broadcast that is announced as `nbytes`
  // bytes, as a byte tensor of that size on device(). One that is shorter (by
  // 8 bytes or more) or longer (up to kReceiveHeadroom times the announced
  // size) is a BroadcastSizeError, never a half-written or overrun tensor;
  // beyond that headroom Gloo fails in its own thread (see
  // transfer_in_flight). Under NCCL the sender's size comes first and every
  // rank agrees to take it (over Gloo) before the broadcast: a size other
  // than announced, or no room on this rank's GPU, is a BroadcastSizeError on
  // every rank (send() throws it too), and the group stays in step.
  at::Tensor receive(int64_t nbytes, const std::string& what);
  // Every confusion of dtypes fits: float64 sent where a 1-byte dtype was announced.
  static constexpr int64_t kReceiveHeadroom = 8;
  void barrier(const std::string& what);

 private:
  struct Impl;
  CommGroup(std::unique_ptr<Impl> impl, int rank, int world_size, std::chrono::milliseconds timeout, Backend backend,
            const at::Device& device);
  void broadcast(at::Tensor& bytes, const std::string& what);         // over Gloo
  void broadcast_nccl(at::Tensor& bytes, const std::string& what);    // polled until done or the timeout
  at::Tensor receive_nccl(int64_t nbytes, const std::string& what);
  bool all_agree(bool mine, const std::string& what);  // over Gloo: whether every rank said yes
  std::unique_ptr<Impl> impl_;
  int rank_, world_size_;
  std::chrono::milliseconds timeout_;
  Backend backend_;
  at::Device device_;
};

}  // namespace grpo::rollout
