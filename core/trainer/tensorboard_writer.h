// TensorBoard scalar logging without protobuf or TensorFlow: the writer
// hand-encodes tensorflow.Event messages and frames them as TFRecords, which
// is all TensorBoard needs to read an events file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <string_view>

namespace grpo::trainer {

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum TFRecord
// framing uses. Exposed so tests can check it against the standard vectors.
uint32_t crc32c(std::string_view data);

// The "masked" form TFRecord stores, so that a CRC over data that itself
// contains CRCs does not degenerate.
uint32_t masked_crc32c(std::string_view data);

// Writes events.out.tfevents.<unix_seconds>.<hostname> in `dir`. The file
// starts with the header event (file_version "brain.Event:2") that TensorBoard
// expects first; each add_scalars call then appends one event.
class TensorBoardWriter {
 public:
  // Creates `dir` if missing. Throws std::runtime_error naming the path when
  // the directory or the file cannot be created or written.
  explicit TensorBoardWriter(const std::string& dir);

  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;
  TensorBoardWriter(TensorBoardWriter&&) noexcept = default;
  TensorBoardWriter& operator=(TensorBoardWriter&&) noexcept = default;
  ~TensorBoardWriter() = default;

  // Appends one event at `step` holding every scalar in one Summary, then
  // flushes. NaN values are skipped (no value this step); a call left with no
  // value writes nothing. Values are stored as float, TensorBoard's
  // simple_value. Throws std::runtime_error naming the path on a write error.
  void add_scalars(int64_t step, const std::map<std::string, double>& scalars);

  // Pushes buffered bytes to the file, so a running TensorBoard sees them.
  void flush();

  const std::string& path() const { return path_; }

 private:
  struct FileCloser {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };

  void write_record(const std::string& data);

  std::string path_;
  std::unique_ptr<std::FILE, FileCloser> file_;
};

}  // namespace grpo::trainer
