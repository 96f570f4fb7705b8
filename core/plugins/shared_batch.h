// A batch of completions handed to an isolated reward (grpo-plugin-worker)
// through shared memory: the host writes each text once into a memfd both
// processes map, and the worker scores views into it. Through a pipe the same
// batch was copied five times (into wire structs, a send buffer, the kernel
// twice, and out again), a fixed ~1 ms per batch of 64.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "plugins/reward_input.h"

namespace grpo::plugins {

// A memfd mapped read-write. The host grows it; the worker maps what the host
// says it wrote (remapping when the host grew it since). Sealed against
// shrinking: the worker holds the file too, and a shorter file would fault
// the host's mapping.
class SharedMemory {
 public:
  SharedMemory() = default;
  ~SharedMemory();
  SharedMemory(const SharedMemory&) = delete;
  SharedMemory& operator=(const SharedMemory&) = delete;

  static SharedMemory create(size_t bytes);  // throws std::runtime_error
  static SharedMemory attach(int fd);        // takes ownership of fd
  SharedMemory(SharedMemory&& o) noexcept;
  SharedMemory& operator=(SharedMemory&& o) noexcept;

  int fd() const { return fd_; }
  char* data() const { return data_; }
  size_t size() const { return size_; }
  void grow(size_t at_least);   // host: enlarges the file and the mapping
  void map_at_least(size_t n);  // worker: remaps when the file grew past the mapping

 private:
  void unmap();
  int fd_ = -1;
  char* data_ = nullptr;
  size_t size_ = 0;
};

// Writes `rows` (and the trainer state) into `mem`; returns the bytes used.
// Column sets shared by several rows (the G completions of one prompt) are
// written once.
size_t write_batch(SharedMemory& mem, const std::vector<RewardView>& rows, const TrainerState& state);

// What read_batch found: views into the mapping, valid until the next batch.
struct BatchViews {
  std::vector<ColumnsView> column_sets;
  std::vector<RewardView> rows;
  TrainerState state;
};
// Throws std::runtime_error when the bytes are not a batch (cut short).
void read_batch(const char* data, size_t used, BatchViews* out);

}  // namespace grpo::plugins
