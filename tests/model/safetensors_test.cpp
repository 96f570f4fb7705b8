// Safetensors and checkpoint directories: the tiny Qwen2 fixture, write/read round trips, sharding,
// and every malformed file, whose message must name the file and the tensor at fault.
#include "model/safetensors.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/checkpoint_files.h"

namespace fs = std::filesystem;
using namespace grpo::model;
using nlohmann::json;

namespace {

const std::string kTinyQwen2 = std::string(GRPO_TEST_DATA_DIR) + "/tiny-qwen2";

fs::path temp_root() {
  static const fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / ("grpo_safetensors_test_" + std::to_string(::getpid()));
    fs::create_directories(d);
    std::atexit([] {
      std::error_code ec;
      fs::remove_all(fs::temp_directory_path() / ("grpo_safetensors_test_" + std::to_string(::getpid())), ec);
    });
    return d;
  }();
  return dir;
}

// An empty directory of its own for one test.
fs::path fresh_dir(const std::string& name) {
  const fs::path dir = temp_root() / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

// A file as a writer would lay it out: header length (8 bytes, little-endian), header, buffer.
std::string raw_file(const std::string& header, const std::string& buffer, uint64_t header_bytes) {
  std::string out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((header_bytes >> (8 * i)) & 0xff));
  return out + header + buffer;
}
std::string raw_file(const std::string& header, const std::string& buffer) {
  return raw_file(header, buffer, header.size());
}

std::vector<std::string> files_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// Opening `path` fails with a SafetensorsError naming the file and containing every needle.
void expect_open_error(const fs::path& path, const std::vector<std::string>& needles) {
  try {
    SafetensorsFile::open(path.string());
    ADD_FAILURE() << "opened " << path << " without error";
  } catch (const SafetensorsError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find(path.string()), std::string::npos) << message;
    for (const std::string& needle : needles) EXPECT_NE(message.find(needle), std::string::npos) << message;
  }
}

// Writes a malformed file from a header and buffer, and expects the error.
void expect_bad_file(const std::string& name, const std::string& bytes, const std::vector<std::string>& needles) {
  const fs::path path = fresh_dir("malformed") / (name + ".safetensors");
  write_bytes(path, bytes);
  expect_open_error(path, needles);
}

TensorView f32_view(const std::string& name, const std::vector<float>& values) {
  return TensorView{name, DType::F32, {static_cast<int64_t>(values.size())}, values.data(), values.size() * 4};
}

TEST(DType, NamesAndSizes) {
  const std::vector<std::pair<DType, size_t>> sizes{{DType::F32, 4}, {DType::F16, 2}, {DType::BF16, 2}, {DType::F64, 8},
                                                    {DType::I64, 8}, {DType::I32, 4}, {DType::I16, 2},  {DType::I8, 1},
                                                    {DType::U8, 1},  {DType::Bool, 1}};
  for (const auto& [dtype, size] : sizes) {
    EXPECT_EQ(dtype_size(dtype), size) << dtype_name(dtype);
    EXPECT_EQ(parse_dtype(dtype_name(dtype)), dtype);
  }
  EXPECT_EQ(dtype_name(DType::Bool), "BOOL");
  EXPECT_EQ(dtype_name(DType::BF16), "BF16");
  EXPECT_FALSE(parse_dtype("F8_E4M3").has_value());
  EXPECT_TRUE(is_floating(DType::BF16));
  EXPECT_FALSE(is_floating(DType::I64));
  EXPECT_EQ(shape_numel({}), 1);
  EXPECT_EQ(shape_numel({3, 0}), 0);
  EXPECT_EQ(shape_to_string({300, 64}), "[300, 64]");
}

TEST(TinyQwen2, ReadsNamesShapesAndData) {
  const std::string path = kTinyQwen2 + "/model.safetensors";
  const auto file = SafetensorsFile::open(path);
  EXPECT_EQ(file->path(), path);
  ASSERT_EQ(file->tensors().size(), 26u);
  EXPECT_EQ(file->metadata().at("format"), "pt");

  const TensorView* embed = file->find("model.embed_tokens.weight");
  ASSERT_NE(embed, nullptr);
  EXPECT_EQ(embed->dtype, DType::F32);
  EXPECT_EQ(embed->shape, (std::vector<int64_t>{300, 64}));
  EXPECT_EQ(embed->nbytes, 300u * 64 * 4);
  EXPECT_EQ(file->find("model.layers.1.self_attn.k_proj.bias")->shape, (std::vector<int64_t>{32}));
  EXPECT_EQ(file->find("model.layers.0.mlp.down_proj.weight")->shape, (std::vector<int64_t>{64, 128}));
  EXPECT_EQ(file->find("lm_head.weight"), nullptr);  // tied to the embeddings
  EXPECT_EQ(file->find("model.embed_tokens"), nullptr);

  // File order: each tensor starts where the previous one ended.
  const auto* previous_end = static_cast<const char*>(file->tensors()[0].data);
  for (const TensorView& t : file->tensors()) {
    EXPECT_EQ(static_cast<const char*>(t.data), previous_end) << t.name;
    previous_end = static_cast<const char*>(t.data) + t.nbytes;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % 4, 0u) << t.name;
  }

  // The views are the file's bytes: the last tensor ends the file.
  const std::string bytes = read_bytes(path);
  const TensorView* norm = file->find("model.norm.weight");
  EXPECT_EQ(std::string(static_cast<const char*>(norm->data), norm->nbytes), bytes.substr(bytes.size() - norm->nbytes));
}

TEST(TinyQwen2, CheckpointFilesIndexesEveryTensor) {
  const CheckpointFiles files = CheckpointFiles::open(kTinyQwen2);
  EXPECT_EQ(files.size(), 26u);
  const std::vector<std::string> names = files.names();
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  EXPECT_EQ(names.front(), "model.embed_tokens.weight");
  EXPECT_EQ(files.file_of("model.norm.weight"), (fs::path(kTinyQwen2) / "model.safetensors").string());
  EXPECT_EQ(files.require("model.norm.weight").shape, (std::vector<int64_t>{64}));
  EXPECT_EQ(files.metadata().at("format"), "pt");
  try {
    files.require("lm_head.weight");
    ADD_FAILURE() << "no error";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("'lm_head.weight'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(kTinyQwen2), std::string::npos) << e.what();
  }
  EXPECT_THROW(files.file_of("nope"), CheckpointError);
}

TEST(RoundTrip, AllDTypesScalarsAndEmptyTensors) {
  const std::vector<DType> dtypes{DType::F32, DType::F16, DType::BF16, DType::F64, DType::I64,
                                  DType::I32, DType::I16, DType::I8,   DType::U8,  DType::Bool};
  std::vector<std::string> buffers;
  std::vector<TensorView> views;
  for (size_t d = 0; d < dtypes.size(); ++d) {
    // Odd sizes for the 1-byte types, so that later tensors would be misaligned without sorting.
    const std::vector<int64_t> shape{3, static_cast<int64_t>(d + 1)};
    std::string bytes(shape_numel(shape) * dtype_size(dtypes[d]), '\0');
    for (size_t i = 0; i < bytes.size(); ++i)
      bytes[i] = static_cast<char>(dtypes[d] == DType::Bool ? i % 2 : i * 7 + d);
    buffers.push_back(std::move(bytes));
    views.push_back({"t." + std::string(dtype_name(dtypes[d])), dtypes[d], shape, nullptr, 0});
  }
  buffers.push_back(std::string(4, '\x42'));
  views.push_back({"scalar", DType::F32, {}, nullptr, 0});
  buffers.push_back("");
  views.push_back({"empty", DType::BF16, {0, 4}, nullptr, 0});
  for (size_t i = 0; i < views.size(); ++i) {
    views[i].data = buffers[i].data();
    views[i].nbytes = buffers[i].size();
  }
  std::reverse(views.begin(), views.end());  // any order in, aligned layout out

  const fs::path dir = fresh_dir("roundtrip");
  const std::string path = (dir / "all.safetensors").string();
  write_safetensors(path, views, {{"format", "pt"}, {"step", "12"}});
  EXPECT_EQ(files_in(dir), std::vector<std::string>{"all.safetensors"});  // no temporary left behind

  const std::string bytes = read_bytes(path);
  uint64_t header_bytes = 0;
  for (int i = 7; i >= 0; --i) header_bytes = (header_bytes << 8) | static_cast<unsigned char>(bytes[i]);
  EXPECT_EQ(header_bytes % 8, 0u);  // the buffer starts 8-aligned
  EXPECT_EQ(json::parse(bytes.substr(8, header_bytes)).at("__metadata__").at("step"), "12");

  const auto file = SafetensorsFile::open(path);
  EXPECT_EQ(file->metadata(), (std::map<std::string, std::string>{{"format", "pt"}, {"step", "12"}}));
  ASSERT_EQ(file->tensors().size(), views.size());
  for (const TensorView& expected : views) {
    const TensorView* t = file->find(expected.name);
    ASSERT_NE(t, nullptr) << expected.name;
    EXPECT_EQ(t->dtype, expected.dtype) << expected.name;
    EXPECT_EQ(t->shape, expected.shape) << expected.name;
    ASSERT_EQ(t->nbytes, expected.nbytes) << expected.name;
    EXPECT_EQ(std::string(static_cast<const char*>(t->data), t->nbytes),
              std::string(static_cast<const char*>(expected.data), expected.nbytes))
        << expected.name;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t->data) % dtype_size(t->dtype), 0u) << expected.name;
  }
}

TEST(RoundTrip, OverwritesAndMoves) {
  const fs::path dir = fresh_dir("overwrite");
  const std::string path = (dir / "w.safetensors").string();
  const std::vector<float> first{1, 2, 3}, second{4, 5};
  write_safetensors(path, {f32_view("w", first)});
  write_safetensors(path, {f32_view("w", second)}, {});
  EXPECT_EQ(files_in(dir), std::vector<std::string>{"w.safetensors"});
  const auto opened = SafetensorsFile::open(path);
  EXPECT_TRUE(opened->metadata().empty());
  // Moving keeps the views valid: the mapping changes owner, not address.
  SafetensorsFile moved = std::move(const_cast<SafetensorsFile&>(*opened));
  const TensorView* w = moved.find("w");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->shape, (std::vector<int64_t>{2}));
  EXPECT_EQ(static_cast<const float*>(w->data)[1], 5.0f);
}

TEST(RoundTrip, WriteRejectsBadViews) {
  const std::string path = (fresh_dir("bad_write") / "x.safetensors").string();
  const std::vector<float> values{1, 2, 3};
  auto expect_write_error = [&](const std::vector<TensorView>& views, const std::string& needle) {
    try {
      write_safetensors(path, views);
      ADD_FAILURE() << "no error for " << needle;
    } catch (const SafetensorsError& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_write_error({f32_view("a", values), f32_view("a", values)}, "'a'");
  TensorView wrong = f32_view("short", values);
  wrong.shape = {4};
  expect_write_error({wrong}, "'short'");
  expect_write_error({f32_view("__metadata__", values)}, "__metadata__");
  EXPECT_FALSE(fs::exists(path));
}

TEST(Sharded, WritesIndexAndReadsBack) {
  std::vector<std::vector<float>> data;
  for (int i = 0; i < 6; ++i) data.emplace_back(100, static_cast<float>(i));  // 400 bytes each
  std::vector<TensorView> views;
  for (int i = 0; i < 6; ++i) views.push_back(f32_view("t" + std::to_string(i), data[i]));

  const fs::path dir = temp_root() / "sharded" / "out";  // created by the writer
  fs::remove_all(dir.parent_path());
  write_sharded(dir.string(), views, 1000);
  EXPECT_EQ(files_in(dir),
            (std::vector<std::string>{"model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors",
                                      "model-00003-of-00003.safetensors", kIndexFileName}));
  const json index = json::parse(read_bytes(dir / kIndexFileName));
  EXPECT_EQ(index.at("metadata").at("total_size"), 2400);
  EXPECT_EQ(index.at("weight_map").at("t0"), "model-00001-of-00003.safetensors");
  EXPECT_EQ(index.at("weight_map").at("t5"), "model-00003-of-00003.safetensors");

  const CheckpointFiles files = CheckpointFiles::open(dir.string());
  EXPECT_EQ(files.size(), 6u);
  EXPECT_EQ(files.files().size(), 3u);
  EXPECT_EQ(files.metadata().at("total_size"), "2400");
  EXPECT_EQ(files.file_of("t3"), (dir / "model-00002-of-00003.safetensors").string());
  for (int i = 0; i < 6; ++i) {
    const TensorView& t = files.require("t" + std::to_string(i));
    EXPECT_EQ(static_cast<const float*>(t.data)[99], static_cast<float>(i));
  }
  EXPECT_EQ(files.find("t6"), nullptr);

  // Rewritten as one file: the shards and the index must go, or they would confuse readers.
  write_sharded(dir.string(), views, 1 << 20);
  EXPECT_EQ(files_in(dir), std::vector<std::string>{kSingleFileName});
  EXPECT_EQ(CheckpointFiles::open(dir.string()).size(), 6u);
  // And back: a stale model.safetensors would win over the new index.
  write_sharded(dir.string(), views, 500);
  EXPECT_FALSE(fs::exists(dir / kSingleFileName));
  EXPECT_TRUE(fs::exists(dir / "model-00006-of-00006.safetensors"));
  EXPECT_EQ(CheckpointFiles::open(dir.string()).file_of("t5"), (dir / "model-00006-of-00006.safetensors").string());

  // A tensor larger than the limit gets a shard of its own.
  write_sharded(dir.string(), views, 100);
  EXPECT_EQ(CheckpointFiles::open(dir.string()).files().size(), 6u);
}

void expect_checkpoint_error(const fs::path& dir, const std::vector<std::string>& needles) {
  try {
    CheckpointFiles::open(dir.string());
    ADD_FAILURE() << "opened " << dir << " without error";
  } catch (const std::runtime_error& e) {
    const std::string message = e.what();
    for (const std::string& needle : needles) EXPECT_NE(message.find(needle), std::string::npos) << message;
  }
}

TEST(Sharded, DirectoryErrors) {
  const fs::path empty = fresh_dir("no_checkpoint");
  expect_checkpoint_error(empty, {empty.string(), "only safetensors checkpoints are supported"});
  write_bytes(empty / "pytorch_model.bin", "pickle");
  expect_checkpoint_error(empty, {empty.string(), "pytorch_model.bin", "convert"});
  expect_checkpoint_error(empty / "absent", {(empty / "absent").string(), "no such"});

  const fs::path dir = fresh_dir("bad_index");
  const std::vector<float> values{1, 2};
  write_safetensors((dir / "a.safetensors").string(), {f32_view("a", values)});
  write_bytes(dir / kIndexFileName, R"({"weight_map": {"a": "a.safetensors", "b": "gone.safetensors"}})");
  expect_checkpoint_error(dir, {kIndexFileName, "gone.safetensors", "'b'", "does not exist"});
  write_bytes(dir / kIndexFileName, R"({"weight_map": {"a": "a.safetensors", "b": "a.safetensors"}})");
  expect_checkpoint_error(dir, {kIndexFileName, "'b'", "a.safetensors", "does not hold it"});
  write_bytes(dir / kIndexFileName, R"({"weight_map": )");
  expect_checkpoint_error(dir, {kIndexFileName, "not valid JSON"});

  write_safetensors((dir / "b.safetensors").string(), {f32_view("a", values)});
  write_bytes(dir / kIndexFileName, R"({"weight_map": {"a": "a.safetensors", "x": "b.safetensors"}})");
  expect_checkpoint_error(dir, {"'a'", "a.safetensors", "b.safetensors", "both"});
}

TEST(Malformed, FileLevelErrors) {
  expect_open_error(temp_root() / "absent.safetensors", {"no such"});
  expect_bad_file("short", "abcde", {"5 bytes", "shorter than the 8-byte"});
  expect_bad_file("past_end", raw_file("{}", "", 1000), {"1000", "past the end"});
  expect_bad_file("absurd", raw_file("{}", "", uint64_t{1} << 40), {"absurdly large"});
  expect_bad_file("bad_json", raw_file("{\"w\": [", ""), {"not valid JSON"});
  expect_bad_file("not_object", raw_file("[1, 2]", ""), {"not a JSON object"});
  expect_bad_file("bad_metadata", raw_file(R"({"__metadata__": {"k": 1}})", ""), {"__metadata__", "'k'"});
}

TEST(Malformed, TensorLevelErrors) {
  const std::string buffer(16, '\0');
  auto header = [](const std::string& entry) { return "{\"w\": " + entry + "}"; };
  expect_bad_file("bad_dtype",
                  raw_file(header(R"({"dtype": "F8_E4M3", "shape": [2], "data_offsets": [0, 2]})"), buffer),
                  {"'w'", "unknown dtype 'F8_E4M3'", "BF16"});
  expect_bad_file("no_dtype", raw_file(header(R"({"shape": [2], "data_offsets": [0, 8]})"), buffer), {"'w'", "dtype"});
  expect_bad_file("negative_shape",
                  raw_file(header(R"({"dtype": "F32", "shape": [-1, 2], "data_offsets": [0, 8]})"), buffer),
                  {"'w'", "negative"});
  expect_bad_file("float_shape",
                  raw_file(header(R"({"dtype": "F32", "shape": [2.5], "data_offsets": [0, 8]})"), buffer),
                  {"'w'", "non-integer"});
  for (const char* offsets : {"[8,0]", "[0]", "[\"0\",\"8\"]", "[-4,4]", "[0,8,16]"}) {  // as the message dumps them
    expect_bad_file(
        "bad_offsets",
        raw_file(header(std::string(R"({"dtype": "F32", "shape": [2], "data_offsets": )") + offsets + "}"), buffer),
        {"'w'", "data_offsets", offsets});
  }
  expect_bad_file("wrong_size", raw_file(header(R"({"dtype": "F32", "shape": [3], "data_offsets": [0, 8]})"), buffer),
                  {"'w'", "need 12 bytes", "cover 8 bytes"});
  expect_bad_file("past_buffer", raw_file(header(R"({"dtype": "F64", "shape": [3], "data_offsets": [0, 24]})"), buffer),
                  {"'w'", "truncated"});
  expect_bad_file("overlap",
                  raw_file(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                               "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
                           buffer),
                  {"'a'", "'b'", "overlap"});
}

TEST(Malformed, TruncatedCheckpointNamesTheTensor) {
  const fs::path path = fresh_dir("truncated") / "model.safetensors";
  const std::vector<float> a(8, 1.0f), b(8, 2.0f);
  write_safetensors(path.string(), {f32_view("a", a), f32_view("b", b)});
  fs::resize_file(path, fs::file_size(path) - 4);  // an interrupted download
  expect_open_error(path, {"'b'", "truncated"});
}

TEST(Malformed, EmptyTensorsOverlapNothing) {
  const fs::path path = fresh_dir("empty_inside") / "e.safetensors";
  write_bytes(path, raw_file(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                                 "e": {"dtype": "F32", "shape": [0, 3], "data_offsets": [4, 4]}})",
                             std::string(8, '\0')));
  const auto file = SafetensorsFile::open(path.string());
  EXPECT_EQ(file->tensors().size(), 2u);
  EXPECT_EQ(file->find("e")->nbytes, 0u);
}

}  // namespace
