// ORG/NAME models and datasets found offline in caches laid out as
// huggingface_hub and modelscope lay them out (blobs, symlinks, refs).
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "data/dataset.h"
#include "datasets/fake_hub.h"
#include "hub/hub_cache.h"
#include "hub/repo_files.h"

namespace {

namespace fs = std::filesystem;
using namespace grpo;
using grpo::testing::add_hf_repo;
using grpo::testing::add_modelscope_repo;
using grpo::testing::tiny_model_files;

const std::string kCommitA = "0123456789abcdef0123456789abcdef01234567";
const std::string kCommitB = "fedcba9876543210fedcba9876543210fedcba98";
const std::string kHub = GRPO_TEST_DATA_DIR "/parquet/hub/";

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  return "(no error)";
}

// Each test gets caches of its own and the environment of a user who set nothing.
class HubCache : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("grpo_hub_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(root_);
    fs::create_directories(root_);
    for (const char* name : {"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME", "MODELSCOPE_CACHE",
                             "USE_HF", "HOME"}) {
      const char* v = std::getenv(name);
      saved_.emplace_back(name, v ? std::optional<std::string>(v) : std::nullopt);
      unsetenv(name);
    }
    hf_ = (root_ / "hf").string();
    ms_ = (root_ / "ms").string();
    setenv("HF_HUB_CACHE", hf_.c_str(), 1);
    setenv("MODELSCOPE_CACHE", ms_.c_str(), 1);
    setenv("HOME", (root_ / "home").c_str(), 1);
  }
  void TearDown() override {
    for (const auto& [name, value] : saved_) {
      if (value) setenv(name.c_str(), value->c_str(), 1);
      else unsetenv(name.c_str());
    }
  }
  fs::path root_;
  std::string hf_, ms_;
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

hub::Options hf(std::string revision = "") { return {true, std::move(revision)}; }

TEST_F(HubCache, HuggingFaceModelThroughRefsMainToItsSnapshot) {
  add_hf_repo(hf_, "models", "Org/Tiny-0.5B", kCommitA, tiny_model_files());
  const std::string dir = hub::resolve_model("Org/Tiny-0.5B", hf(), "--model");
  EXPECT_EQ(fs::path(dir), fs::path(hf_) / "models--Org--Tiny-0.5B" / "snapshots" / kCommitA);
  EXPECT_TRUE(fs::is_symlink(fs::path(dir) / "config.json"));
  std::ifstream config(fs::path(dir) / "config.json");
  EXPECT_TRUE(config.good());
  // Not preferring it, ModelScope's cache is tried first and then this one.
  EXPECT_EQ(hub::resolve_model("Org/Tiny-0.5B", {false, ""}, "--model"), dir);
}

TEST_F(HubCache, ARevisionIsABranchOrTagThroughRefsOrACommit) {
  add_hf_repo(hf_, "models", "Org/Tiny", kCommitA, tiny_model_files());
  add_hf_repo(hf_, "models", "Org/Tiny", kCommitB, tiny_model_files(), "v2");
  const fs::path snapshots = fs::path(hf_) / "models--Org--Tiny" / "snapshots";
  EXPECT_EQ(fs::path(hub::resolve_model("Org/Tiny", hf("v2"), "--model")), snapshots / kCommitB);
  EXPECT_EQ(fs::path(hub::resolve_model("Org/Tiny", hf(kCommitA), "--model")), snapshots / kCommitA);
  const std::string error = error_of([&] { hub::resolve_model("Org/Tiny", hf("v3"), "--model"); });
  EXPECT_NE(error.find("refs/v3"), std::string::npos) << error;
  EXPECT_NE(error.find("huggingface-cli download Org/Tiny --revision v3"), std::string::npos) << error;
}

TEST_F(HubCache, TheCachesAreWhereTheLibrariesPutThem) {
  unsetenv("HF_HUB_CACHE");
  unsetenv("MODELSCOPE_CACHE");
  EXPECT_EQ(fs::path(hub::huggingface_cache()), root_ / "home" / ".cache" / "huggingface" / "hub");
  EXPECT_EQ(fs::path(hub::modelscope_cache()), root_ / "home" / ".cache" / "modelscope" / "hub");
  setenv("XDG_CACHE_HOME", (root_ / "xdg").c_str(), 1);
  EXPECT_EQ(fs::path(hub::huggingface_cache()), root_ / "xdg" / "huggingface" / "hub");
  setenv("HF_HOME", "~/hf_home", 1);
  EXPECT_EQ(fs::path(hub::huggingface_cache()), root_ / "home" / "hf_home" / "hub");
  setenv("HUGGINGFACE_HUB_CACHE", (root_ / "legacy").c_str(), 1);
  EXPECT_EQ(fs::path(hub::huggingface_cache()), root_ / "legacy");
  setenv("HF_HUB_CACHE", (root_ / "new").c_str(), 1);
  EXPECT_EQ(fs::path(hub::huggingface_cache()), root_ / "new");
  setenv("MODELSCOPE_CACHE", (root_ / "ms2").c_str(), 1);
  EXPECT_EQ(fs::path(hub::modelscope_cache()), root_ / "ms2");
}

TEST_F(HubCache, ModelScopeFirstByDefaultWithItsDotsWrittenAsTripleUnderscores) {
  add_modelscope_repo(ms_, "models", "Qwen/Qwen2.5-0.5B-Instruct", tiny_model_files());
  add_hf_repo(hf_, "models", "Qwen/Qwen2.5-0.5B-Instruct", kCommitA, tiny_model_files());
  const fs::path ms_dir = fs::path(ms_) / "models" / "Qwen" / "Qwen2___5-0___5B-Instruct";
  EXPECT_EQ(fs::path(hub::resolve_model("Qwen/Qwen2.5-0.5B-Instruct", {false, ""}, "--model")), ms_dir);
  EXPECT_EQ(fs::path(hub::resolve_model("Qwen/Qwen2.5-0.5B-Instruct", hf(), "--model")),
            fs::path(hf_) / "models--Qwen--Qwen2.5-0.5B-Instruct" / "snapshots" / kCommitA);
  setenv("USE_HF", "1", 1);  // ms-swift's environment switch
  EXPECT_TRUE(hub::use_hf_from(false));
  // modelscope before 1.20 kept models at <cache>/ORG/NAME.
  add_modelscope_repo(ms_, ".", "Old/Model.v1", tiny_model_files());
  EXPECT_EQ(fs::path(hub::resolve_model("Old/Model.v1", {false, ""}, "--model")), fs::path(ms_) / "Old" / "Model___v1");
}

TEST_F(HubCache, NotFoundListsEveryPlaceLookedAndTheDownloadCommands) {
  const std::string error = error_of([&] { hub::resolve_model("Qwen/Qwen2.5-7B", {false, ""}, "--model"); });
  for (const std::string& want :
       {std::string("--model Qwen/Qwen2.5-7B"), ms_ + "/models/Qwen/Qwen2___5-7B", ms_ + "/Qwen/Qwen2___5-7B",
        hf_ + "/models--Qwen--Qwen2.5-7B", std::string("modelscope download --model Qwen/Qwen2.5-7B"),
        std::string("huggingface-cli download Qwen/Qwen2.5-7B")})
    EXPECT_NE(error.find(want), std::string::npos) << want << " not in:\n" << error;
  const std::string data_error = error_of([&] { data::resolve_dataset("AI-MO/NuminaMath-TIR#5000", hf()); });
  EXPECT_NE(data_error.find("huggingface-cli download --repo-type dataset AI-MO/NuminaMath-TIR"), std::string::npos)
      << data_error;
  EXPECT_NE(data_error.find(hf_ + "/datasets--AI-MO--NuminaMath-TIR"), std::string::npos) << data_error;
  // A local directory is taken as it is, whatever its name looks like.
  fs::create_directories(root_ / "Org" / "Local");
  fs::current_path(root_);
  EXPECT_EQ(hub::resolve_model("Org/Local", hf(), "--model"), "Org/Local");
}

TEST_F(HubCache, ADatasetByNameReadsTheShardsOfItsTrainSplitUpToTheLimit) {
  add_hf_repo(hf_, "datasets", "Org/Arith", kCommitA,
              {{"data/train-00000-of-00002.parquet", kHub + "train-00000-of-00002.parquet"},
               {"data/train-00001-of-00002.parquet", kHub + "train-00001-of-00002.parquet"},
               {"data/test-00000-of-00001.parquet", kHub + "test-00000-of-00001.parquet"}});
  const auto expected = data::load_rows(kHub + "rows.jsonl");
  const auto rows = data::load_rows("Org/Arith#50", nullptr, hf());
  ASSERT_EQ(rows.size(), 50u);  // 40 from the first shard, 10 from the second
  for (size_t i = 0; i < rows.size(); ++i) EXPECT_EQ(rows[i].columns, expected[i].columns) << i;
  EXPECT_EQ(data::load_rows("Org/Arith", nullptr, hf()).size(), 80u);  // the test shard is not train
}

TEST_F(HubCache, SubsetsAndSplitsFollowReadmeConfigs) {
  const std::string readme = (root_ / "README.md").string();
  std::ofstream(readme) << "---\nlicense: mit\nconfigs:\n"
                           "- config_name: main\n  default: true\n  data_files:\n"
                           "  - split: train\n    path: main/train-*\n  - split: test\n    path: main/test-*\n"
                           "- config_name: socratic\n  data_files:\n  - split: train\n    path: socratic/train-*\n"
                           "---\n# A dataset card\n";
  add_hf_repo(hf_, "datasets", "openai/gsm8k", kCommitA,
              {{"README.md", readme},
               {"main/train-00000-of-00001.parquet", kHub + "train-00000-of-00002.parquet"},
               {"main/test-00000-of-00001.parquet", kHub + "test-00000-of-00001.parquet"},
               {"socratic/train-00000-of-00001.parquet", kHub + "train-00001-of-00002.parquet"}});
  EXPECT_EQ(data::load_rows("openai/gsm8k", nullptr, hf())[0].columns["id"], 0);  // the default: main
  EXPECT_EQ(data::load_rows("openai/gsm8k:socratic", nullptr, hf())[0].columns["id"], 40);
  EXPECT_EQ(data::load_rows("openai/gsm8k:main/socratic#45", nullptr, hf()).back().columns["id"], 44);
  EXPECT_EQ(data::load_rows("openai/gsm8k:main/socratic", nullptr, hf()).size(), 80u);
  const std::string error = error_of([&] { data::load_rows("openai/gsm8k:nope", nullptr, hf()); });
  EXPECT_NE(error.find("no subset 'nope'"), std::string::npos) << error;
  EXPECT_NE(error.find("main, socratic"), std::string::npos) << error;
}

TEST_F(HubCache, ModelScopeDatasetsAndLocalDirectoriesUseTheSameSplitRules) {
  add_modelscope_repo(ms_, "datasets", "Org/Arith.v2",
                      {{"train.csv", kHub + "train.csv"}, {"test.jsonl", kHub + "rows.jsonl"}});
  EXPECT_EQ(data::load_rows("Org/Arith.v2#5", nullptr, {false, ""}).size(), 5u);
  EXPECT_EQ(data::load_rows("Org/Arith.v2", nullptr, {false, ""}).size(), 80u);  // train.csv only
  // A directory as `huggingface-cli download --local-dir` leaves one.
  const fs::path local = root_ / "local";
  fs::create_directories(local / "train");
  fs::copy_file(kHub + "rows.jsonl", local / "train" / "part-0.jsonl");
  fs::copy_file(kHub + "train.csv", local / "notes.csv");
  EXPECT_EQ(data::load_rows(local.string(), nullptr, {false, ""}).size(), 100u);
}

TEST(RepoFiles, SplitsByTheDatasetsLibrarysNamingRules) {
  const fs::path root = fs::temp_directory_path() / "grpo_repo_files";
  fs::remove_all(root);
  auto touch = [&](const std::string& p) {
    fs::create_directories((root / p).parent_path());
    std::ofstream(root / p) << "{}\n";
  };
  touch("train.jsonl");
  touch("validation.jsonl");
  touch("dev-extra.jsonl");
  touch(".cache/train.jsonl");
  touch("README.md");
  const auto train = hub::split_files(root.string(), "", "train", "x");
  ASSERT_EQ(train.size(), 1u);
  EXPECT_EQ(fs::path(train[0]).filename(), "train.jsonl");
  EXPECT_EQ(hub::split_files(root.string(), "", "validation", "x").size(), 2u);  // validation, dev
  const std::string error = error_of([&] { hub::split_files(root.string(), "", "test", "x"); });
  EXPECT_NE(error.find("no 'test' split"), std::string::npos) << error;
  // Without any split in the names, every data file is train.
  fs::remove_all(root);
  touch("a.parquet");
  touch("sub/b.jsonl");
  EXPECT_EQ(hub::split_files(root.string(), "", "train", "x").size(), 2u);
}

TEST(RepoFiles, GlobsMatchAsFsspecDoes) {
  EXPECT_TRUE(hub::glob_match("data/train-*", "data/train-00000-of-00001.parquet"));
  EXPECT_FALSE(hub::glob_match("data/train-*", "data/sub/train-0.parquet"));
  EXPECT_TRUE(hub::glob_match("**/train*", "train.csv"));
  EXPECT_TRUE(hub::glob_match("**/train*", "a/b/train.csv"));
  EXPECT_TRUE(hub::glob_match("main/test-[0-9]*.parquet", "main/test-00000-of-00001.parquet"));
  EXPECT_FALSE(hub::glob_match("main/test-[!0-9]*", "main/test-0.parquet"));
  EXPECT_TRUE(hub::glob_match("?ain/*.json", "main/x.json"));
  EXPECT_FALSE(hub::glob_match("*.json", "main/x.json"));
  EXPECT_TRUE(hub::glob_match("*/*.json", "main/x.json"));
  EXPECT_TRUE(hub::glob_match("data/**", "data/a/b.parquet"));
  EXPECT_TRUE(hub::glob_match("a/**/b", "a/b"));
  EXPECT_TRUE(hub::glob_match("a/**/b", "a/x/y/b"));
  EXPECT_FALSE(hub::glob_match("a/**/b", "a/xb"));
  EXPECT_TRUE(hub::glob_match("a**b", "a/x/b"));
  EXPECT_TRUE(hub::glob_match("data/[a-c]?", "data/b1"));
  EXPECT_FALSE(hub::glob_match("data/[a-c]?", "data/d1"));
  EXPECT_FALSE(hub::glob_match("data?x", "data/x"));
  EXPECT_TRUE(hub::glob_match("data[/]x", "data/x"));  // a class may name '/', as fnmatch's does
  EXPECT_TRUE(hub::glob_match("**", ""));
  EXPECT_FALSE(hub::glob_match("?", ""));
}

// Backtracking tried every way to share the name among the stars: 8 "*a"
// against a 52-character name took 2.5 s, each further "*a" about 6 times
// longer, so a README could stall the start of a run. These 40 against 200
// characters would outlast any timeout unless matching is one pass over the
// name.
TEST(RepoFiles, AGlobWithManyStarsIsMatchedInOnePass) {
  std::string stars;
  for (int i = 0; i < 40; ++i) stars += "*a";
  const std::string name(200, 'a');
  EXPECT_FALSE(hub::glob_match("data/" + stars + "b", "data/" + name));
  EXPECT_TRUE(hub::glob_match("data/" + stars, "data/" + name));
  EXPECT_FALSE(hub::glob_match("**/" + stars + "b", "x/y/" + name));
  EXPECT_TRUE(hub::glob_match("**" + stars + "**", "x/" + name + "/y"));
}

}  // namespace
