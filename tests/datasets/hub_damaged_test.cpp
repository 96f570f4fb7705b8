// Hugging Face cache entries left damaged by an interrupted download: links
// into blobs/ that never arrived, refs that are empty or name a snapshot that
// is not there. Each is an error naming the path and saying to download again,
// both where the repository is resolved and where its files are read.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>

#include <gtest/gtest.h>

#include "datasets/fake_hub.h"
#include "hub/hub_cache.h"
#include "model/checkpoint_files.h"
#include "model/model_config.h"
#include "tokenizer/tokenizer.h"

namespace {

namespace fs = std::filesystem;
using namespace grpo;
using grpo::testing::add_hf_repo;
using grpo::testing::tiny_model_files;

const std::string kCommit = "0123456789abcdef0123456789abcdef01234567";

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

class HubDamaged : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("grpo_hub_damaged_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(root_);
    fs::create_directories(root_ / "ms");
    for (const char* name : {"HF_HUB_CACHE", "MODELSCOPE_CACHE"}) {
      const char* v = std::getenv(name);
      saved_.emplace_back(name, v ? std::optional<std::string>(v) : std::nullopt);
    }
    setenv("HF_HUB_CACHE", (root_ / "hf").c_str(), 1);
    setenv("MODELSCOPE_CACHE", (root_ / "ms").c_str(), 1);
    repo_ = root_ / "hf" / "models--Org--Tiny";
    snapshot_ = repo_ / "snapshots" / kCommit;
  }
  void TearDown() override {
    for (const auto& [name, value] : saved_) {
      if (value) setenv(name.c_str(), value->c_str(), 1);
      else unsetenv(name.c_str());
    }
    fs::remove_all(root_);
  }
  // A file of its own content (blobs are named by content).
  std::string source(const std::string& name, const std::string& text) {
    const fs::path p = root_ / "src" / name;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
    return p.string();
  }
  // Deletes the blob a snapshot file links to, as an interrupted download leaves it; returns the blob.
  fs::path lose_blob(const std::string& name) {
    const fs::path link = snapshot_ / name;
    const fs::path blob = (link.parent_path() / fs::read_symlink(link)).lexically_normal();
    fs::remove(blob);
    return blob;
  }
  std::string resolve_error() {
    return error_of([] { hub::resolve_model("Org/Tiny", {true, ""}, "--model"); });
  }
  fs::path root_, repo_, snapshot_;
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

void expect_download_again(const std::string& error) {
  EXPECT_NE(error.find("huggingface-cli download Org/Tiny"), std::string::npos) << error;
  EXPECT_NE(error.find("hf download Org/Tiny"), std::string::npos) << error;
}

}  // namespace

TEST_F(HubDamaged, ADanglingSafetensorsLinkNamesTheMissingBlobAndSaysToDownloadAgain) {
  add_hf_repo((root_ / "hf").string(), "models", "Org/Tiny", kCommit, tiny_model_files());
  const fs::path blob = lose_blob("model.safetensors");
  const std::string error = resolve_error();
  EXPECT_NE(error.find((snapshot_ / "model.safetensors").string()), std::string::npos) << error;
  EXPECT_NE(error.find(blob.string()), std::string::npos) << error;
  EXPECT_NE(error.find("damaged"), std::string::npos) << error;
  expect_download_again(error);
  // The snapshot given as a directory: the checkpoint reader names the link too.
  const std::string read = error_of([&] { model::CheckpointFiles::open(snapshot_.string()); });
  EXPECT_EQ(read.find("only safetensors"), std::string::npos) << read;
  EXPECT_NE(read.find((snapshot_ / "model.safetensors").string() + " is a symbolic link to " + blob.string()),
            std::string::npos)
      << read;
  expect_download_again(read);
}

TEST_F(HubDamaged, DanglingConfigAndTokenizerLinksAreNamed) {
  std::map<std::string, std::string> files = tiny_model_files();
  files["tokenizer.json"] = source("tokenizer.json", "{\"model\": {}}");
  add_hf_repo((root_ / "hf").string(), "models", "Org/Tiny", kCommit, files);
  lose_blob("tokenizer.json");
  std::string error = resolve_error();
  EXPECT_NE(error.find((snapshot_ / "tokenizer.json").string() + " links to"), std::string::npos) << error;
  expect_download_again(error);
  const std::string tokenizer = error_of([&] { tok::Tokenizer::from_dir(snapshot_.string()); });
  EXPECT_NE(tokenizer.find((snapshot_ / "tokenizer.json").string() + " is a symbolic link"), std::string::npos)
      << tokenizer;
  EXPECT_EQ(tokenizer.find("no tokenizer.json"), std::string::npos) << tokenizer;
  expect_download_again(tokenizer);

  lose_blob("config.json");
  error = resolve_error();
  EXPECT_NE(error.find("and 1 more file"), std::string::npos) << "the first in directory order is named: " << error;
  const std::string config = error_of([&] { model::ModelConfig::load((snapshot_ / "config.json").string()); });
  EXPECT_NE(config.find((snapshot_ / "config.json").string() + " is a symbolic link"), std::string::npos) << config;
  expect_download_again(config);
}

TEST_F(HubDamaged, AShardWhoseLinkDanglesIsNamedWithTheTensorItHolds) {
  const std::string shard = "model-00001-of-00001.safetensors";
  std::map<std::string, std::string> files = tiny_model_files();
  files[shard] = files.at("model.safetensors");
  files.erase("model.safetensors");
  files["model.safetensors.index.json"] =
      source("index.json", "{\"metadata\": {}, \"weight_map\": {\"model.norm.weight\": \"" + shard + "\"}}");
  add_hf_repo((root_ / "hf").string(), "models", "Org/Tiny", kCommit, files);
  lose_blob(shard);
  const std::string error = resolve_error();
  EXPECT_NE(error.find((snapshot_ / shard).string()), std::string::npos) << error;
  expect_download_again(error);
  const std::string read = error_of([&] { model::CheckpointFiles::open(snapshot_.string()); });
  EXPECT_NE(read.find("model.norm.weight"), std::string::npos) << read;
  EXPECT_NE(read.find((snapshot_ / shard).string() + " is a symbolic link"), std::string::npos) << read;
  expect_download_again(read);
}

TEST_F(HubDamaged, AnEmptyRefSaysItIsEmptyNotThatTheRevisionWasNotDownloaded) {
  add_hf_repo((root_ / "hf").string(), "models", "Org/Tiny", kCommit, tiny_model_files());
  std::ofstream(repo_ / "refs" / "main", std::ios::trunc).close();
  const std::string error = resolve_error();
  EXPECT_NE(error.find((repo_ / "refs" / "main").string() + " is empty"), std::string::npos) << error;
  EXPECT_EQ(error.find("was not downloaded"), std::string::npos) << error;
  EXPECT_NE(error.find("damaged"), std::string::npos) << error;
  expect_download_again(error);
}

TEST_F(HubDamaged, ARefNamingAMissingSnapshotNamesBoth) {
  add_hf_repo((root_ / "hf").string(), "models", "Org/Tiny", kCommit, tiny_model_files());
  const std::string other = "fedcba9876543210fedcba9876543210fedcba98";
  std::ofstream(repo_ / "refs" / "main", std::ios::trunc) << other;
  const std::string error = resolve_error();
  EXPECT_NE(error.find((repo_ / "refs" / "main").string() + " names snapshot " +
                       (repo_ / "snapshots" / other).string() + ", which does not exist"),
            std::string::npos)
      << error;
  expect_download_again(error);
}
