// Event files read back by a reader written here from the TFRecord and
// protobuf wire formats, independent of the writer's own encoding code.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "trainer/tensorboard_writer.h"

namespace fs = std::filesystem;
using grpo::trainer::crc32c;
using grpo::trainer::masked_crc32c;
using grpo::trainer::TensorBoardWriter;

namespace {

// Bit-at-a-time CRC-32C, deliberately not table-driven, as a second opinion.
uint32_t reference_crc32c(const std::string& s) {
  uint32_t c = 0xFFFFFFFFu;
  for (unsigned char b : s) {
    c ^= b;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
  }
  return ~c;
}

uint32_t reference_masked(const std::string& s) {
  const uint32_t c = reference_crc32c(s);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

uint64_t read_le(const std::string& s, size_t pos, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(s.at(pos + i))) << (8 * i);
  return v;
}

// Minimal protobuf reader over one message's bytes.
class WireReader {
 public:
  explicit WireReader(std::string bytes) : s_(std::move(bytes)) {}
  bool done() const { return pos_ >= s_.size(); }

  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      const auto b = static_cast<unsigned char>(s_.at(pos_++));
      v |= static_cast<uint64_t>(b & 0x7F) << shift;
      if (!(b & 0x80)) return v;
    }
    throw std::runtime_error("varint longer than 10 bytes");
  }
  uint64_t fixed(int bytes) {
    const uint64_t v = read_le(s_, pos_, bytes);
    pos_ += bytes;
    return v;
  }
  std::string length_delimited() {
    const uint64_t n = varint();
    if (pos_ + n > s_.size()) throw std::runtime_error("length past end of message");
    std::string out = s_.substr(pos_, n);
    pos_ += n;
    return out;
  }

 private:
  std::string s_;
  size_t pos_ = 0;
};

struct DecodedEvent {
  std::optional<double> wall_time;
  std::optional<int64_t> step;
  std::optional<std::string> file_version;
  bool has_summary = false;
  std::vector<std::pair<std::string, float>> values;
};

std::pair<std::string, float> decode_value(std::string bytes) {
  WireReader r(std::move(bytes));
  std::pair<std::string, float> out{"", std::nanf("")};
  while (!r.done()) {
    const uint64_t key = r.varint();
    if (key == 0x0a) {
      out.first = r.length_delimited();
    } else if (key == 0x15) {
      const auto bits = static_cast<uint32_t>(r.fixed(4));
      std::memcpy(&out.second, &bits, 4);
    } else {
      ADD_FAILURE() << "unexpected Summary.Value field key " << key;
      return out;
    }
  }
  return out;
}

DecodedEvent decode_event(std::string bytes) {
  WireReader r(std::move(bytes));
  DecodedEvent e;
  while (!r.done()) {
    const uint64_t key = r.varint();
    switch (key) {
      case 0x09: {
        const uint64_t bits = r.fixed(8);
        double d;
        std::memcpy(&d, &bits, 8);
        e.wall_time = d;
        break;
      }
      case 0x10: e.step = static_cast<int64_t>(r.varint()); break;
      case 0x1a: e.file_version = r.length_delimited(); break;
      case 0x2a: {
        e.has_summary = true;
        WireReader summary(r.length_delimited());
        while (!summary.done()) {
          const uint64_t k = summary.varint();
          if (k != 0x0a) {
            ADD_FAILURE() << "unexpected Summary field key " << k;
            return e;
          }
          e.values.push_back(decode_value(summary.length_delimited()));
        }
        break;
      }
      default: ADD_FAILURE() << "unexpected Event field key " << key; return e;
    }
  }
  return e;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Splits a TFRecord file, checking both masked CRCs of every record.
std::vector<DecodedEvent> read_events(const std::string& path) {
  const std::string s = read_file(path);
  std::vector<DecodedEvent> events;
  size_t pos = 0;
  while (pos < s.size()) {
    if (s.size() - pos < 12) {
      ADD_FAILURE() << "truncated record header at byte " << pos;
      break;
    }
    const uint64_t len = read_le(s, pos, 8);
    EXPECT_EQ(read_le(s, pos + 8, 4), reference_masked(s.substr(pos, 8))) << "length CRC at byte " << pos;
    if (s.size() - pos - 12 < len + 4) {
      ADD_FAILURE() << "truncated record data at byte " << pos;
      break;
    }
    const std::string data = s.substr(pos + 12, len);
    EXPECT_EQ(read_le(s, pos + 12 + len, 4), reference_masked(data)) << "data CRC at byte " << pos;
    events.push_back(decode_event(data));
    pos += 12 + len + 4;
  }
  return events;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

class TensorBoardWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("grpo_tensorboard_test_" + std::to_string(::getpid())) / info->name();
    fs::remove_all(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_.parent_path(), ec);
  }
  fs::path dir_;
};

}  // namespace

TEST(Crc32c, StandardVectors) {
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(crc32c(""), 0u);
  // RFC 3720 (iSCSI) appendix B.4 vectors.
  EXPECT_EQ(crc32c(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(crc32c(std::string(32, '\xff')), 0x62A8AB43u);
  std::string ascending;
  for (int i = 0; i < 32; ++i) ascending.push_back(static_cast<char>(i));
  EXPECT_EQ(crc32c(ascending), 0x46DD794Eu);
}

TEST(Crc32c, MatchesBitwiseReferenceAndMask) {
  std::mt19937 rng(7);
  for (int len : {1, 3, 8, 63, 64, 65, 1000}) {
    std::string s;
    for (int i = 0; i < len; ++i) s.push_back(static_cast<char>(rng() & 0xFF));
    EXPECT_EQ(crc32c(s), reference_crc32c(s)) << "length " << len;
    EXPECT_EQ(masked_crc32c(s), reference_masked(s)) << "length " << len;
  }
  // Mask of crc 0 is the constant alone; of 0xE3069283 worked by hand.
  EXPECT_EQ(masked_crc32c(""), 0xa282ead8u);
  EXPECT_EQ(masked_crc32c("123456789"), ((0xE3069283u >> 15) | (0xE3069283u << 17)) + 0xa282ead8u);
}

TEST_F(TensorBoardWriterTest, FileNameAndHeader) {
  const double before = now_seconds();
  TensorBoardWriter w(dir_.string());
  const double after = now_seconds();

  const fs::path p(w.path());
  EXPECT_EQ(p.parent_path(), dir_);
  ASSERT_TRUE(fs::is_regular_file(p));
  char host[256] = {};
  ASSERT_EQ(::gethostname(host, sizeof host - 1), 0);
  const std::string name = p.filename().string();
  const std::string prefix = "events.out.tfevents.";
  ASSERT_EQ(name.rfind(prefix, 0), 0u) << name;
  const size_t dot = name.find('.', prefix.size());
  ASSERT_NE(dot, std::string::npos) << name;
  const long long stamp = std::stoll(name.substr(prefix.size(), dot - prefix.size()));
  EXPECT_GE(stamp, static_cast<long long>(before));
  EXPECT_LE(stamp, static_cast<long long>(after));
  EXPECT_EQ(name.substr(dot + 1), host);

  // The header is on disk before any scalar is added. Its 24-byte length and
  // that length's masked CRC open every TensorFlow-written events file.
  const std::string bytes = read_file(w.path());
  EXPECT_EQ(bytes.substr(0, 12), std::string("\x18\0\0\0\0\0\0\0\xa3\x7f\x4b\x22", 12));
  const auto events = read_events(w.path());
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].file_version, "brain.Event:2");
  ASSERT_TRUE(events[0].wall_time.has_value());
  EXPECT_GE(*events[0].wall_time, before - 1e-3);
  EXPECT_LE(*events[0].wall_time, after + 1e-3);
  EXPECT_FALSE(events[0].has_summary);
}

TEST_F(TensorBoardWriterTest, ScalarsReadBack) {
  const double before = now_seconds();
  TensorBoardWriter w(dir_.string());
  w.add_scalars(1, {{"train/loss", 0.5}, {"train/reward", -1.25}, {"train/kl", std::nan("")}});
  w.add_scalars(2, {{"train/loss", 0.25}, {"train/learning_rate", 3e-6}});
  w.add_scalars(1000, {{"train/loss", std::numeric_limits<double>::infinity()}});
  // Read while the writer is still open: each call is flushed.
  const auto events = read_events(w.path());
  const double after = now_seconds();

  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0].file_version, "brain.Event:2");
  for (size_t i = 1; i < events.size(); ++i) {
    EXPECT_FALSE(events[i].file_version.has_value()) << "record " << i;
    EXPECT_TRUE(events[i].has_summary);
    ASSERT_TRUE(events[i].wall_time.has_value());
    EXPECT_GE(*events[i].wall_time, before - 1e-3);
    EXPECT_LE(*events[i].wall_time, after + 1e-3);
    EXPECT_GE(*events[i].wall_time, *events[i - 1].wall_time);
  }
  EXPECT_EQ(events[1].step, 1);
  EXPECT_EQ(events[2].step, 2);
  EXPECT_EQ(events[3].step, 1000);  // two-byte varint

  // The NaN kl is left out; the others keep the map's (sorted) order.
  using Values = std::vector<std::pair<std::string, float>>;
  EXPECT_EQ(events[1].values, (Values{{"train/loss", 0.5f}, {"train/reward", -1.25f}}));
  EXPECT_EQ(events[2].values, (Values{{"train/learning_rate", 3e-6f}, {"train/loss", 0.25f}}));
  ASSERT_EQ(events[3].values.size(), 1u);
  EXPECT_TRUE(std::isinf(events[3].values[0].second));
}

TEST_F(TensorBoardWriterTest, LargeAndNegativeSteps) {
  TensorBoardWriter w(dir_.string());
  w.add_scalars(0, {{"a", 1.0}});
  w.add_scalars(-3, {{"a", 2.0}});  // int64 two's complement, 10-byte varint
  w.add_scalars(int64_t{1} << 40, {{"a", 3.0}});
  const auto events = read_events(w.path());
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[1].step, 0);
  EXPECT_EQ(events[2].step, -3);
  EXPECT_EQ(events[3].step, int64_t{1} << 40);
}

TEST_F(TensorBoardWriterTest, LongTagsAndManyValues) {
  // Lengths past 127 bytes need multi-byte varints at every nesting level.
  std::map<std::string, double> scalars;
  const std::string long_tag(300, 'x');
  scalars[long_tag] = 7.0;
  for (int i = 0; i < 50; ++i) scalars["metric_" + std::to_string(100 + i)] = i * 0.5;
  TensorBoardWriter w(dir_.string());
  w.add_scalars(5, scalars);
  const auto events = read_events(w.path());
  ASSERT_EQ(events.size(), 2u);
  ASSERT_EQ(events[1].values.size(), 51u);
  for (int i = 0; i < 50; ++i) {
    EXPECT_EQ(events[1].values[i].first, "metric_" + std::to_string(100 + i));
    EXPECT_EQ(events[1].values[i].second, static_cast<float>(i * 0.5));
  }
  EXPECT_EQ(events[1].values[50].first, long_tag);
  EXPECT_EQ(events[1].values[50].second, 7.0f);
}

TEST_F(TensorBoardWriterTest, NothingToRecordWritesNothing) {
  TensorBoardWriter w(dir_.string());
  const auto size = fs::file_size(w.path());
  w.add_scalars(3, {});
  w.add_scalars(4, {{"a", std::nan("")}});
  EXPECT_EQ(fs::file_size(w.path()), size);
  EXPECT_EQ(read_events(w.path()).size(), 1u);
}

TEST_F(TensorBoardWriterTest, SameSecondWritersKeepSeparateFiles) {
  TensorBoardWriter a(dir_.string());
  TensorBoardWriter b(dir_.string());
  EXPECT_NE(a.path(), b.path());
  a.add_scalars(1, {{"a", 1.0}});
  b.add_scalars(1, {{"b", 2.0}});
  const auto ea = read_events(a.path());
  const auto eb = read_events(b.path());
  ASSERT_EQ(ea.size(), 2u);
  ASSERT_EQ(eb.size(), 2u);
  EXPECT_EQ(ea[1].values[0].first, "a");
  EXPECT_EQ(eb[1].values[0].first, "b");
  EXPECT_EQ(eb[0].file_version, "brain.Event:2");
}

TEST_F(TensorBoardWriterTest, UncreatableDirectoryNamesPath) {
  fs::create_directories(dir_);
  const fs::path blocker = dir_ / "not_a_dir";
  std::ofstream(blocker) << "x";
  const std::string bad = (blocker / "runs").string();
  try {
    TensorBoardWriter w(bad);
    FAIL() << "expected std::runtime_error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
  }
}
