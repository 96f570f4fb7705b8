#include "trainer/tensorboard_writer.h"

#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <system_error>

#include "trainer/jsonl_appender.h"

namespace grpo::trainer {

namespace {

constexpr std::array<uint32_t, 256> make_crc32c_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1u) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    table[i] = c;
  }
  return table;
}

constexpr std::array<uint32_t, 256> kCrc32cTable = make_crc32c_table();

// Protobuf wire encoding, only what tensorflow.Event needs. Bytes are placed
// one by one so the output is little-endian whatever the host order.
void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void put_fixed32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

void put_fixed64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

void put_bytes_field(std::string& out, uint8_t tag, std::string_view bytes) {
  out.push_back(static_cast<char>(tag));
  put_varint(out, bytes.size());
  out.append(bytes.data(), bytes.size());
}

// Field tags: (field_number << 3) | wire_type.
constexpr uint8_t kEventWallTime = 0x09;     // Event.wall_time, 1, fixed64 (double)
constexpr uint8_t kEventStep = 0x10;         // Event.step, 2, varint (int64)
constexpr uint8_t kEventFileVersion = 0x1a;  // Event.file_version, 3, length-delimited
constexpr uint8_t kEventSummary = 0x2a;      // Event.summary, 5, length-delimited
constexpr uint8_t kSummaryValue = 0x0a;      // Summary.value, 1, length-delimited (repeated)
constexpr uint8_t kValueTag = 0x0a;          // Summary.Value.tag, 1, length-delimited
constexpr uint8_t kValueSimpleValue = 0x15;  // Summary.Value.simple_value, 2, fixed32 (float)

void put_wall_time(std::string& out, double seconds) {
  uint64_t bits = 0;
  std::memcpy(&bits, &seconds, sizeof bits);
  out.push_back(static_cast<char>(kEventWallTime));
  put_fixed64(out, bits);
}

double now_seconds() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "localhost";
  return buf;
}

[[noreturn]] void throw_io_error(const std::string& what, const std::string& path, int err) {
  throw LogWriteError(what + " '" + path + "': " + std::strerror(err));
}

}  // namespace

uint32_t crc32c(std::string_view data) {
  uint32_t c = 0xFFFFFFFFu;
  for (unsigned char b : data) c = kCrc32cTable[(c ^ b) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

uint32_t masked_crc32c(std::string_view data) {
  const uint32_t c = crc32c(data);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

TensorBoardWriter::TensorBoardWriter(const std::string& dir) {
  namespace fs = std::filesystem;
  if (dir.empty()) throw std::runtime_error("TensorBoard log directory is empty");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw std::runtime_error("cannot create TensorBoard log directory '" + dir + "': " + ec.message());

  const double wall_time = now_seconds();
  const std::string base = (fs::path(dir) / ("events.out.tfevents." +
                                             std::to_string(static_cast<int64_t>(wall_time)) + "." +
                                             host_name())).string();
  // Two writers started in the same second on one host would share a name;
  // exclusive creation ("x") plus a counter keeps the earlier file intact.
  // TensorBoard accepts any name containing "tfevents".
  for (int n = 0;; ++n) {
    std::string candidate = n == 0 ? base : base + "." + std::to_string(n);
    errno = 0;
    file_.reset(std::fopen(candidate.c_str(), "wbx"));
    if (file_) {
      path_ = std::move(candidate);
      break;
    }
    if (errno != EEXIST || n >= 1000) throw_io_error("cannot create TensorBoard event file", candidate, errno);
  }

  // The header event TensorBoard reads first to learn the record format.
  std::string header;
  put_wall_time(header, wall_time);
  put_bytes_field(header, kEventFileVersion, "brain.Event:2");
  try {
    write_record(header);
    flush();
  } catch (...) {
    file_.reset();
    fs::remove(path_, ec);  // a file without its header would only confuse TensorBoard
    throw;
  }
}

void TensorBoardWriter::add_scalars(int64_t step, const std::map<std::string, double>& scalars) {
  std::string summary;
  for (const auto& [tag, value] : scalars) {
    if (std::isnan(value)) continue;
    std::string v;
    put_bytes_field(v, kValueTag, tag);
    const float f = static_cast<float>(value);
    uint32_t bits = 0;
    std::memcpy(&bits, &f, sizeof bits);
    v.push_back(static_cast<char>(kValueSimpleValue));
    put_fixed32(v, bits);
    put_bytes_field(summary, kSummaryValue, v);
  }
  if (summary.empty()) return;

  std::string event;
  put_wall_time(event, now_seconds());
  event.push_back(static_cast<char>(kEventStep));
  put_varint(event, static_cast<uint64_t>(step));  // protobuf int64: two's complement, 10 bytes if negative
  put_bytes_field(event, kEventSummary, summary);
  write_record(event);
  flush();
}

void TensorBoardWriter::flush() {
  if (file_ && std::fflush(file_.get()) != 0) throw_io_error("cannot write TensorBoard event file", path_, errno);
}

// TFRecord framing: length, masked CRC of the length bytes, data, masked CRC
// of the data; TensorBoard drops a record whose CRCs do not match.
void TensorBoardWriter::write_record(const std::string& data) {
  if (!file_) throw std::runtime_error("TensorBoard writer used after being moved from");
  std::string frame;
  frame.reserve(data.size() + 16);
  put_fixed64(frame, data.size());
  put_fixed32(frame, masked_crc32c(std::string_view(frame.data(), 8)));
  frame += data;
  put_fixed32(frame, masked_crc32c(data));
  if (std::fwrite(frame.data(), 1, frame.size(), file_.get()) != frame.size())
    throw_io_error("cannot write TensorBoard event file", path_, errno);
}

}  // namespace grpo::trainer
