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

// A broadcast that ended before the receiving tensor did; the group itself is intact.
class ShortBroadcastError : public TransferError {
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

// What a receiving rank is taking in right now ("" when nothing): a longer
// broadcast than announced fails inside Gloo's network thread, where no
// caller can catch it, and the process's last words should name it.
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

  // Broadcasts `tensor` (CPU, contiguous) in place from source_rank().
  // `what` names the parameter (or bucket) in errors. A receiving rank
  // checks that the bytes filled the tensor: a shorter broadcast (8 bytes
  // or more short) is a TransferError, never a half-written tensor.
  void broadcast(at::Tensor& tensor, const std::string& what);
  void barrier(const std::string& what);

 private:
  struct Impl;
  CommGroup(std::unique_ptr<Impl> impl, int rank, int world_size, std::chrono::milliseconds timeout);
  std::unique_ptr<Impl> impl_;
  int rank_, world_size_;
  std::chrono::milliseconds timeout_;
};

}  // namespace grpo::rollout
