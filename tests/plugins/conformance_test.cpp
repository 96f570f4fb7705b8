// One conformance suite run against every plugin library in plugins/: the
// checker third parties run (`grpo-host plugins --check`), and an
// independent look at the exported symbols through binutils' nm.
#include <cstdio>
#include <filesystem>
#include <map>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "plugin_paths.h"
#include "plugins/conformance.h"

namespace fs = std::filesystem;
using namespace grpo::plugins;

namespace {

std::vector<std::string> built_in_libraries() {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(PLUGIN_DIR))
    if (e.path().extension() == ".so") out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

// Options a plugin cannot do without (the rest have defaults).
const nlohmann::json kRequired = {{"soft_overlong", {{"soft_cache_length", 64}}}};

// The checks run in the worker built beside the tests, not one installed.
CheckOptions in_worker(double timeout_s = 60) { return {timeout_s, GRPO_PLUGIN_WORKER_EXE}; }

class Conformance : public ::testing::TestWithParam<std::string> {};

}  // namespace

TEST_P(Conformance, PassesEveryCheckOfTheChecker) {
  const std::vector<CheckResult> results = check_plugin_library(GetParam(), kRequired, in_worker());
  ASSERT_GE(results.size(), 6u);
  for (const auto& r : results) EXPECT_TRUE(r.passed) << r.name << ": " << r.detail;
}

TEST_P(Conformance, ExportsOnlyTheEntrySymbol) {
  std::string cmd = "nm -D --defined-only '" + GetParam() + "' 2>/dev/null";
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  char line[1024];
  std::vector<std::string> exported;
  while (std::fgets(line, sizeof line, p)) {
    std::string l(line);
    // "addr T name": skip data/text symbols the toolchain adds (_init, _fini, ...).
    if (l.find(" _") != std::string::npos || l.find(" w ") != std::string::npos) continue;
    exported.push_back(l.substr(l.rfind(' ') + 1));
  }
  ::pclose(p);
  ASSERT_EQ(exported.size(), 1u) << "first extra symbol: " << (exported.size() > 1 ? exported[1] : "");
  EXPECT_EQ(exported[0], "grpo_plugin_entry\n");
  EXPECT_EQ(exported_symbols(GetParam()), (std::vector<std::string>{"grpo_plugin_entry"})) << "the checker agrees";
}

INSTANTIATE_TEST_SUITE_P(BuiltIn, Conformance, ::testing::ValuesIn(built_in_libraries()),
                         [](const auto& info) { return fs::path(info.param).stem().string(); });

TEST(Checker, FailsEachBrokenFixtureOnItsOwnFault) {
  auto failed = [](const std::string& file) {
    std::vector<std::string> names;
    for (const auto& r : check_plugin_library(file, nlohmann::json::object(), in_worker()))
      if (!r.passed) names.push_back(r.name);
    return names;
  };
  EXPECT_TRUE(failed(FIXTURE_OK).empty());
  EXPECT_TRUE(failed(FIXTURE_V1_0).empty()) << "a 1.0 plugin conforms";
  std::vector<std::string> no_entry = failed(FIXTURE_NO_ENTRY);
  ASSERT_EQ(no_entry.size(), 1u);
  EXPECT_EQ(no_entry[0].rfind("loads", 0), 0u);
  std::vector<std::string> wrong_count = failed(FIXTURE_WRONG_COUNT);
  EXPECT_EQ(wrong_count.size(), 4u);  // score of 1, of 64, of the edge cases, and the concurrent calls
  EXPECT_EQ(failed(FIXTURE_SCORE_THROWS).size(), 4u);
  std::vector<std::string> create = failed(FIXTURE_CREATE_FAILS);
  ASSERT_EQ(create.size(), 1u);
  EXPECT_NE(create[0].find("create"), std::string::npos);
  std::vector<std::string> inf = failed(FIXTURE_RETURNS_INF);
  EXPECT_TRUE(inf.empty()) << "infinite values become NaN in the host: " << inf.size();
}

// Each check that calls into the plugin runs in a process of its own: a
// plugin that dies or hangs in score() fails the checks that score (named
// with the signal, the exit status or the timeout), and the checks that do
// not score still run and pass. Before, the first crash took the checker down.
TEST(Checker, APluginThatDiesHangsOrPrintsInScoreFailsTheChecksThatScoreAndTheRestRun) {
  struct Case {
    const char* file;
    std::string plugin, what;
  };
  const std::vector<Case> cases = {
      {FIXTURE_CRASHES, "fixture_crashes", "died of signal 11 (Segmentation fault)"},
      {FIXTURE_ABORTS, "fixture_aborts", "died of signal 6 (Aborted)"},
      {FIXTURE_EXITS, "fixture_exits", "exited with status 3"},
      {FIXTURE_HANGS, "fixture_hangs", "did not finish within 2 s (--check_timeout)"},
      {FIXTURE_PRINTS, "fixture_prints", "bytes to stdout (\"\\x1b[2J\\xff garbage {\\\"not\\\": json\\x0a"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.plugin);
    const std::vector<CheckResult> results = check_plugin_library(c.file, nlohmann::json::object(), in_worker(2));
    std::map<std::string, CheckResult> by_name;
    for (const auto& r : results) by_name[r.name] = r;
    ASSERT_EQ(results.size(), 12u) << "every check ran";
    const std::string who = c.plugin + ": ";
    for (const std::string& scores :
         {who + "score 1 completion(s)", who + "score 64 completion(s)",
          who + "score empty, 100 kB, invalid UTF-8, CJK and deeply nested completions",
          who + "concurrent score() calls (declared thread-safe)"}) {
      ASSERT_TRUE(by_name.count(scores)) << scores;
      EXPECT_FALSE(by_name[scores].passed) << scores;
      EXPECT_NE(by_name[scores].detail.find(c.what), std::string::npos) << scores << ": " << by_name[scores].detail;
    }
    for (const std::string& calm : {std::string("loads (ELF, grpo_plugin_entry, SDK major, init)"),
                                    who + "create with its defaults", who + "score 0 completion(s)", who + "destroy"}) {
      ASSERT_TRUE(by_name.count(calm)) << calm;
      EXPECT_TRUE(by_name[calm].passed) << calm << ": " << by_name[calm].detail;
    }
  }
}
