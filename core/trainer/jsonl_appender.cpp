#include "trainer/jsonl_appender.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

namespace grpo::trainer {

std::string free_space(const std::string& dir) {
  std::error_code ec;
  const auto space = std::filesystem::space(dir, ec);
  return ec ? "unknown" : fmt::format("{:.1f} MiB", static_cast<double>(space.available) / (1 << 20));
}

JsonlAppender::JsonlAppender(std::string path) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw LogWriteError(fmt::format("cannot open {} for writing: {}", path_, std::strerror(errno)));
}

JsonlAppender::~JsonlAppender() {
  if (fd_ >= 0) ::close(fd_);
}

void JsonlAppender::append(const std::string& lines) {
  const off_t whole = ::lseek(fd_, 0, SEEK_END);
  size_t done = 0;
  while (done < lines.size()) {
    const ssize_t n = ::write(fd_, lines.data() + done, lines.size() - done);
    if (n > 0) {
      done += static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      const int err = n < 0 ? errno : ENOSPC;
      if (whole >= 0) {
        const int cut = ::ftruncate(fd_, whole);  // when even this fails, the error below still names the file
        (void)cut;
      }
      throw LogWriteError(fmt::format("cannot write {}: {} ({} free on that disk; is it full?)", path_,
                                      std::strerror(err), free_space(std::filesystem::path(path_).parent_path().string())));
    }
  }
}

}  // namespace grpo::trainer
