// The host loading real plugin libraries, including every broken variant.
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include <grpo/reward.h>
#include <grpo/sdk.hpp>
#include <gtest/gtest.h>

#include "plugin_paths.h"
#include "plugins/builtin_plugins.h"
#include "plugins/plugin_error.h"
#include "plugins/plugin_options.h"
#include "plugins/plugin_registry.h"
#include "plugins/reward_function.h"
#include "tokenizer/byte_tokenizer.h"

namespace fs = std::filesystem;
using namespace grpo::plugins;

namespace {

// The message of the PluginError that `body` throws ("" if none).
template <class F>
std::string error_of(F body) {
  try {
    body();
  } catch (const PluginError& e) {
    return e.what();
  }
  return "";
}

PluginRegistry only(std::vector<std::string> files) {
  PluginSources s;
  s.files = std::move(files);
  s.use_env = false;
  s.use_builtin = false;
  return PluginRegistry::discover(s);
}

std::vector<RewardInput> inputs(std::initializer_list<const char*> texts) {
  std::vector<RewardInput> out;
  for (const char* t : texts) {
    RewardInput in;
    in.completion = t;
    in.columns = RowColumns::from_json({{"solution", "42"}});
    out.push_back(in);
  }
  return out;
}

std::unique_ptr<RewardFunction> make(const std::string& file, const std::string& name) {
  PluginRegistry reg = only({file});
  return RewardFunction::create(reg.require(name, GRPO_REWARD_INTERFACE), nlohmann::json::object(), nullptr, "{}", 2);
}

}  // namespace

TEST(PluginHost, APluginBuiltAgainstTheSdk10HeadersLoadsAndScores) {
  PluginRegistry reg = only({FIXTURE_V1_0});
  const ResolvedPlugin plugin = reg.require("fixture_v1_0", GRPO_REWARD_INTERFACE);
  EXPECT_EQ(plugin.info.sdk_version, "1.0.0");
  auto fn = make(FIXTURE_V1_0, "fixture_v1_0");
  std::vector<double> r = fn->score(inputs({"a", "bb", "ccc"}), {});
  EXPECT_EQ(r, (std::vector<double>{1, 2, 3}));
  EXPECT_EQ(fn->failures(), 0);
}

TEST(PluginHost, DeinitRunsOnlyAfterASuccessfulInit) {
  const fs::path mark = fs::temp_directory_path() / ("grpo_deinit_mark_" + std::to_string(::getpid()));
  fs::remove(mark);
  ::setenv("GRPO_FIXTURE_DEINIT_MARK", mark.c_str(), 1);
  { PluginRegistry reg = only({FIXTURE_OK}); }
  std::ifstream in(mark);
  std::string name;
  std::getline(in, name);
  EXPECT_EQ(name, "fixture") << "deinit() after a successful init() and the last object";
  fs::remove(mark);
  std::string msg = error_of([] { only({FIXTURE_INIT_FAILS}); });
  ::unsetenv("GRPO_FIXTURE_DEINIT_MARK");
  EXPECT_NE(msg.find("failed to initialise: fixture refuses to initialise"), std::string::npos) << msg;
  EXPECT_FALSE(fs::exists(mark)) << "deinit() without a successful init()";
}

TEST(PluginOptions, DefaultsAreFilledAndValuesTypeCheckedAgainstTheSchema) {
  PluginRegistry reg = only({FIXTURE_OK});
  const PluginInfo& info = reg.require("fixture", GRPO_REWARD_INTERFACE).info;  // one option: scale, float, 1.0
  EXPECT_EQ(resolve_plugin_options(info, nlohmann::json::object(), nullptr), (nlohmann::json{{"scale", 1.0}}));
  EXPECT_EQ(resolve_plugin_options(info, {{"scale", 3}}, nullptr)["scale"], 3) << "a flag of the same name";
  EXPECT_EQ(resolve_plugin_options(info, {{"scale", 3}}, {{"scale", 2.5}})["scale"], 2.5) << "its section wins";
  std::string msg = error_of([&] { resolve_plugin_options(info, nlohmann::json::object(), {{"scale", "big"}}); });
  EXPECT_NE(msg.find("plugin_args.fixture.scale: plugin 'fixture' takes a number"), std::string::npos) << msg;
  EXPECT_NE(msg.find("\"big\""), std::string::npos) << msg;
  msg = error_of([&] { resolve_plugin_options(info, nlohmann::json::object(), {{"scal", 1}}, "sampler_args"); });
  EXPECT_NE(msg.find("sampler_args.scal: plugin 'fixture' has no option 'scal' (did you mean 'scale'?)"),
            std::string::npos)
      << msg;
}

// A list option ("strings"): external_server's base_urls takes several servers' URLs.
TEST(PluginOptions, AListOptionTakesAListOfStrings) {
  const PluginInfo& info = grpo::testing::builtin_registry().require("external_server", GRPO_SAMPLER_INTERFACE).info;
  const nlohmann::json urls = {"http://a:1", "http://b:2"};
  EXPECT_EQ(resolve_plugin_options(info, nlohmann::json::object(), {{"base_urls", urls}}, "sampler_args")["base_urls"],
            urls);
  const std::string msg = error_of(
      [&] { resolve_plugin_options(info, nlohmann::json::object(), {{"base_urls", "http://a:1"}}, "sampler_args"); });
  EXPECT_NE(msg.find("sampler_args.base_urls: plugin 'external_server' takes a list of strings"), std::string::npos)
      << msg;
}

TEST(PluginOptions, EverySectionOfPluginArgsNamesALoadedReward) {
  const std::vector<PluginInfo> known = grpo::testing::builtin_registry().all();
  const nlohmann::json ok = {{"format", {{"x", 1}}}};
  EXPECT_NO_THROW(check_plugin_args_sections(ok, {"accuracy", "format"}, "native", known));
  EXPECT_NO_THROW(check_plugin_args_sections({{"cosine", nlohmann::json::object()}}, {"format"}, "native", known))
      << "a known reward this run does not use: a warning";
  std::string msg = error_of(
      [&] { check_plugin_args_sections({{"native", {{"model", "m"}}}}, {"format"}, "native", known); });
  EXPECT_NE(msg.find("plugin_args.native: 'native' is a sampler; its options go in --sampler_args"), std::string::npos)
      << msg;
  msg = error_of([&] {
    check_plugin_args_sections({{"external_server", nlohmann::json::object()}}, {"format"}, "native", known);
  });
  EXPECT_NE(msg.find("is a sampler"), std::string::npos) << msg;
  msg = error_of([&] { check_plugin_args_sections({{"acuracy", nlohmann::json::object()}}, {"format"}, "", known); });
  EXPECT_NE(msg.find("no plugin called 'acuracy' is loaded (--reward_funcs: format); did you mean 'accuracy'?"),
            std::string::npos)
      << msg;
}

TEST(PluginHost, LoadsAWellFormedPluginAndScores) {
  auto fn = make(FIXTURE_OK, "fixture");
  std::vector<double> r = fn->score(inputs({"abc", "", "hello"}), {});
  EXPECT_EQ(r, (std::vector<double>{3, 0, 5}));
  EXPECT_TRUE(fn->thread_safe());
}

TEST(PluginHost, MissingFileNamesThePathAndWhereItCameFrom) {
  std::string msg = error_of([] { only({"/nonexistent/libnothing.so"}); });
  EXPECT_NE(msg.find("/nonexistent/libnothing.so"), std::string::npos) << msg;
  EXPECT_NE(msg.find("does not exist"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--plugins"), std::string::npos) << msg;
}

TEST(PluginHost, NotASharedObject) {
  fs::path fake = fs::temp_directory_path() / "grpo_not_elf.so";
  std::ofstream(fake) << "this is text, not ELF\n";
  std::string msg = error_of([&] { only({fake.string()}); });
  EXPECT_NE(msg.find(fake.string()), std::string::npos) << msg;
  EXPECT_NE(msg.find("not a shared object"), std::string::npos) << msg;
  fs::remove(fake);
}

TEST(PluginHost, NoEntrySymbol) {
  std::string msg = error_of([] { only({FIXTURE_NO_ENTRY}); });
  EXPECT_NE(msg.find(FIXTURE_NO_ENTRY), std::string::npos) << msg;
  EXPECT_NE(msg.find("grpo_plugin_entry"), std::string::npos) << msg;
}

TEST(PluginHost, WrongMajorNamesBothVersions) {
  std::string msg = error_of([] { only({FIXTURE_WRONG_MAJOR}); });
  EXPECT_NE(msg.find(FIXTURE_WRONG_MAJOR), std::string::npos) << msg;
  EXPECT_NE(msg.find("SDK 2.0.0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("SDK " + std::to_string(GRPO_SDK_VERSION_MAJOR) + "."), std::string::npos) << msg;
}

TEST(PluginHost, NewerMinorWithLargerStructsLoadsAndWorks) {
  PluginRegistry reg = only({FIXTURE_NEWER_MINOR});
  auto all = reg.all();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].version, "9.9.9");
  EXPECT_EQ(all[0].sdk_version, std::to_string(GRPO_SDK_VERSION_MAJOR) + "." +
                                    std::to_string(GRPO_SDK_VERSION_MINOR + 7) + ".0");
  auto fn = make(FIXTURE_NEWER_MINOR, "fixture_future");
  EXPECT_EQ(fn->score(inputs({"four"}), {}), std::vector<double>{4});
}

TEST(PluginHost, TwoPluginsWithOneNameNameBothFiles) {
  std::string msg = error_of([] { only({FIXTURE_OK, FIXTURE_TWIN}); });
  EXPECT_NE(msg.find(FIXTURE_OK), std::string::npos) << msg;
  EXPECT_NE(msg.find(FIXTURE_TWIN), std::string::npos) << msg;
  EXPECT_NE(msg.find("'fixture'"), std::string::npos) << msg;
}

TEST(PluginHost, SameFileTwiceLoadsOnce) {
  PluginRegistry reg = only({FIXTURE_OK, FIXTURE_OK});
  EXPECT_EQ(reg.all().size(), 1u);
}

TEST(PluginHost, CreateFailureCarriesThePluginsMessage) {
  std::string msg = error_of([] { make(FIXTURE_CREATE_FAILS, "fixture_create_fails"); });
  EXPECT_NE(msg.find("the model file is missing"), std::string::npos) << msg;
  EXPECT_NE(msg.find(FIXTURE_CREATE_FAILS), std::string::npos) << msg;
}

TEST(PluginHost, ThrowingPluginScoresNaNAndHostKeepsRunning) {
  auto fn = make(FIXTURE_SCORE_THROWS, "fixture_throws");
  std::vector<double> r = fn->score(inputs({"a", "b"}), {});
  ASSERT_EQ(r.size(), 2u);
  EXPECT_TRUE(std::isnan(r[0]) && std::isnan(r[1]));
  EXPECT_EQ(fn->failures(), 1);
  fn->score(inputs({"c"}), {});  // still callable
  EXPECT_EQ(fn->failures(), 2);
}

TEST(PluginHost, ErrorStatusScoresNaN) {
  auto fn = make(FIXTURE_SCORE_ERROR, "fixture_error");
  std::vector<double> r = fn->score(inputs({"a"}), {});
  EXPECT_TRUE(std::isnan(r[0]));
  EXPECT_EQ(fn->failures(), 1);
}

TEST(PluginHost, WrongCountIsRejectedAsNaN) {
  auto fn = make(FIXTURE_WRONG_COUNT, "fixture_wrong_count");
  std::vector<double> r = fn->score(inputs({"a", "bb", "ccc"}), {});
  for (double x : r) EXPECT_TRUE(std::isnan(x));
  EXPECT_EQ(fn->failures(), 1);
}

TEST(PluginHost, NaNMeansNoOpinionAndIsNotAFailure) {
  auto fn = make(FIXTURE_RETURNS_NAN, "fixture_nan");
  std::vector<double> r = fn->score(inputs({"a", "bb", "ccc"}), {});
  EXPECT_EQ(r[0], 1);
  EXPECT_TRUE(std::isnan(r[1]));
  EXPECT_EQ(r[2], 3);
  EXPECT_EQ(fn->failures(), 0);
}

TEST(PluginHost, AnInfiniteRewardIsNoOpinionCountedButNotAFailure) {
  auto fn = make(FIXTURE_RETURNS_INF, "fixture_inf");
  std::vector<double> r = fn->score(inputs({"a", "bb", "ccc", "dddd"}), {});
  EXPECT_TRUE(std::isnan(r[0]));  // +Inf
  EXPECT_EQ(r[1], 2);
  EXPECT_TRUE(std::isnan(r[2]));  // -Inf
  EXPECT_EQ(r[3], 4);
  EXPECT_EQ(fn->nonfinite(), 2);
  EXPECT_EQ(fn->failures(), 0);
}

TEST(PluginHost, ThreadSafePluginWithEnoughWorkIsScoredInParallel) {
  auto fn = make(FIXTURE_SLOW, "fixture_slow");  // 20 ms per call; reward = calls seen at once
  std::vector<RewardInput> in(64);
  std::vector<double> first = fn->score(in, {});  // one thread: measures the cost
  EXPECT_EQ(first[0], 1);
  std::vector<double> second = fn->score(in, {});  // worth two threads now
  EXPECT_EQ(second.front(), 2);
  EXPECT_EQ(second.back(), 2);
  auto cheap = make(FIXTURE_OK, "fixture");  // sub-microsecond work stays on one thread
  std::vector<RewardInput> many(1000);
  for (int i = 0; i < 1000; ++i) many[i].completion = std::string(static_cast<size_t>(i % 37), 'x');
  for (int round = 0; round < 2; ++round) {
    std::vector<double> r = cheap->score(many, {});
    for (int i = 0; i < 1000; ++i) ASSERT_EQ(r[i], i % 37);
  }
}

TEST(PluginHost, UnknownPluginNameSuggestsTheClosest) {
  PluginRegistry reg = only({FIXTURE_OK});
  std::string msg = error_of([&] { reg.require("fixtur", GRPO_REWARD_INTERFACE); });
  EXPECT_NE(msg.find("did you mean 'fixture'"), std::string::npos) << msg;
}

TEST(PluginHost, EnvironmentPathFindsPlugins) {
  fs::path dir = fs::temp_directory_path() / "grpo_env_plugins";
  fs::create_directories(dir);
  fs::copy_file(FIXTURE_OK, dir / "libfixture.so", fs::copy_options::overwrite_existing);
  ::setenv("GRPO_PLUGIN_PATH", dir.c_str(), 1);
  PluginSources s;
  s.use_builtin = false;
  PluginRegistry reg = PluginRegistry::discover(s);
  ::unsetenv("GRPO_PLUGIN_PATH");
  EXPECT_NO_THROW(reg.require("fixture", GRPO_REWARD_INTERFACE));
  fs::remove_all(dir);
}

TEST(PluginHost, ASearchedDirectorySkipsFilesThatAreNoPluginButANamedOneIsAnError) {
  fs::path dir = fs::temp_directory_path() / ("grpo_env_mixed_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::copy_file(FIXTURE_OK, dir / "libfixture.so", fs::copy_options::overwrite_existing);
  fs::copy_file(FIXTURE_NO_ENTRY, dir / "libother.so", fs::copy_options::overwrite_existing);  // a .so, no entry
  std::ofstream(dir / "libnotes.so") << "not a library";
  ::setenv("GRPO_PLUGIN_PATH", dir.c_str(), 1);
  PluginSources s;
  s.use_builtin = false;
  PluginRegistry reg = PluginRegistry::discover(s);
  EXPECT_NO_THROW(reg.require("fixture", GRPO_REWARD_INTERFACE));
  s.files = {(dir / "libother.so").string()};  // named explicitly: the user meant that file
  std::string msg = error_of([&] { PluginRegistry::discover(s); });
  ::unsetenv("GRPO_PLUGIN_PATH");
  EXPECT_NE(msg.find("not a grpo plugin"), std::string::npos) << msg;
  fs::remove_all(dir);
}

TEST(PluginHost, BuiltInDirectoryHoldsTheFiveRewards) {
  PluginRegistry reg = grpo::testing::builtin_registry();
  for (const char* name : {"accuracy", "format", "cosine", "repetition", "soft_overlong"})
    EXPECT_NO_THROW(reg.require(name, GRPO_REWARD_INTERFACE)) << name;
}

TEST(HostServices, TheSdkHostGivesTheRunsTokenizerAndChatTemplate) {
  const fs::path dir = fs::temp_directory_path() / ("grpo_host_text_" + std::to_string(::getpid()));
  grpo::tok::write_byte_level_tokenizer(dir.string());
  const grpo::tok::Tokenizer tokenizer = grpo::tok::Tokenizer::from_dir(dir.string());
  HostServices services("test", nullptr, "{}", TextServices{&tokenizer, grpo::tok::ChatFamily::ChatML});
  const grpo::Host host(services.api());
  ASSERT_TRUE(host.has_text());
  EXPECT_EQ(host.tokenize("Hi"), (std::vector<int32_t>{72, 105}));
  EXPECT_EQ(host.detokenize({72, 105, 258}), "Hi") << "special tokens skipped by default";
  EXPECT_EQ(host.detokenize({72, 105, 258}, false), "Hi<|im_end|>");
  EXPECT_EQ(host.detokenize({72, 300}), "H") << "an id past the vocabulary decodes to nothing";
  EXPECT_EQ(host.render_chat(R"([{"role": "user", "content": "x"}])"),
            "<|im_start|>user\nx<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_THROW(host.render_chat("not json"), grpo::Error);
  HostServices without("test", nullptr, "{}");
  EXPECT_FALSE(grpo::Host(without.api()).has_text());
  EXPECT_THROW(grpo::Host(without.api()).tokenize("x"), grpo::Error);
  fs::remove_all(dir);
}
