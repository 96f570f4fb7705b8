// The weight-transfer group of the rollout protocol: a c10d TCPStore hosted
// by worker rank 0 and a Gloo process group over it, in which the trainer
// (rank world_size - 1) broadcasts tensors to the workers. Both the server
// and the trainer-side WeightSender use it. Every blocking step has a
// timeout and fails with a TransferError naming the step and the parameter:
// a silent hang is the most reported problem of the Python servers.
#pragma once

#include <ATen/ATen.h>

#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

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
int64_t bucket_bytes(const std::vector<TensorSpec>& specs);
at::Tensor pack_bucket(const std::vector<at::Tensor>& tensors);
std::vector<at::Tensor> unpack_bucket(const at::Tensor& flat, const std::vector<TensorSpec>& specs);

// What a receiving rank is taking in right now ("" when nothing): a broadcast
// longer than the receiving buffer with its headroom fails inside Gloo's
// network thread, where no caller can catch it, and the process's last words
// should name it.
std::string transfer_in_flight();

class CommGroup {
 public:
  // Rank 0 hosts the store at host:port; other ranks connect to it (retrying
  // until `timeout`). Then all join the Gloo group. Throws TransferError
  // naming the step ("host the TCPStore", "connect to the TCPStore",
  // "join the Gloo group") and what to check. Rank 0's store listens on
  // `listen_host` only (empty: on every interface, as LibTorch does).
  static std::unique_ptr<CommGroup> create(const std::string& host, int port, int rank, int world_size,
                                           std::chrono::milliseconds timeout, const std::string& listen_host = "");
  ~CommGroup();

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  int source_rank() const { return world_size_ - 1; }  // the trainer

  // The source rank (the trainer) broadcasts `tensor` (CPU, contiguous);
  // `what` names the parameter (or bucket) in errors.
  void send(const at::Tensor& tensor, const std::string& what);
  // A receiving rank takes the broadcast that is announced as `nbytes`
  // bytes, as a byte tensor of that size. One that is shorter (by 8 bytes or
  // more) or longer (up to kReceiveHeadroom times the announced size) is a
  // BroadcastSizeError, never a half-written or overrun tensor; beyond that
  // headroom Gloo fails in its own thread (see transfer_in_flight).
  at::Tensor receive(int64_t nbytes, const std::string& what);
  // Every confusion of dtypes fits: float64 sent where a 1-byte dtype was announced.
  static constexpr int64_t kReceiveHeadroom = 8;
  void barrier(const std::string& what);

 private:
  struct Impl;
  CommGroup(std::unique_ptr<Impl> impl, int rank, int world_size, std::chrono::milliseconds timeout);
  void broadcast(at::Tensor& bytes, const std::string& what);
  std::unique_ptr<Impl> impl_;
  int rank_, world_size_;
  std::chrono::milliseconds timeout_;
};

}  // namespace grpo::rollout
