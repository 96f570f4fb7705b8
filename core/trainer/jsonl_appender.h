// A JSON-lines file that a run appends to (logging.jsonl, completions.jsonl).
// Every append reaches the file before it returns; one that fails (a full
// disk, a file size limit) cuts the file back to its last whole line and
// throws LogWriteError naming the file, so a log never ends in half a record
// and the run never goes on without its log.
#pragma once

#include <stdexcept>
#include <string>

namespace grpo::trainer {

class LogWriteError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The space left on the disk holding `dir` ("12.3 MiB", or "unknown"), for
// messages about failed writes.
std::string free_space(const std::string& dir);

class JsonlAppender {
 public:
  explicit JsonlAppender(std::string path);  // creates the file; throws LogWriteError when it cannot
  ~JsonlAppender();
  JsonlAppender(const JsonlAppender&) = delete;
  JsonlAppender& operator=(const JsonlAppender&) = delete;

  // Appends `lines`: whole lines, each ending in '\n'.
  void append(const std::string& lines);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace grpo::trainer
