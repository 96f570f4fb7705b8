// `grpo-host config` and the train command's refusal, as a user runs them.
#include <gtest/gtest.h>

#include "cli/cli_util.h"
#include "plugin_paths.h"

using namespace grpo::testing;

namespace {

// "key: value" lines without comments.
std::vector<std::string> values_of(const std::string& yaml) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < yaml.size()) {
    size_t end = yaml.find('\n', start);
    if (end == std::string::npos) end = yaml.size();
    std::string line = yaml.substr(start, end - start);
    start = end + 1;
    size_t hash = line.find("  #");
    if (hash != std::string::npos) line.resize(hash);
    if (!line.empty() && line[0] != '#' && line.find(": ") != std::string::npos) out.push_back(line);
  }
  return out;
}

}  // namespace

TEST(ConfigCommand, PrintsAndSavesTheResolvedConfigurationThatLoadsAgain) {
  std::string dir = temp_dir("config_cmd");
  write_file(dir + "/x.yaml", "num_generations: 4\nper_device_train_batch_size: 4\nlearning_rate: 2.0e-6\n");
  CommandResult r = run_host("config --config " + dir + "/x.yaml --beta 0.0 --save " + dir + "/args.yaml");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("num_generations: 4"), std::string::npos) << r.output;
  std::string saved = read_file(dir + "/args.yaml");
  EXPECT_NE(saved.find("beta: 0"), std::string::npos) << saved;
  CommandResult again = run_host("config --config " + dir + "/args.yaml");
  ASSERT_EQ(again.exit_code, 0) << again.output;
  // Same values; only the comments on derived values may differ.
  EXPECT_EQ(values_of(again.output), values_of(r.output));
}

TEST(ConfigCommand, UnknownKeyNamesFileLineAndTheClosestFlag) {
  std::string dir = temp_dir("config_typo");
  write_file(dir + "/x.yaml", "num_generations: 4\nper_device_train_batch_size: 4\nlearnig_rate: 1e-6\n");
  CommandResult r = run_host("config --config " + dir + "/x.yaml");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("x.yaml:3"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("learning_rate"), std::string::npos) << r.output;
}

TEST(ConfigCommand, BadCommandLineFlagSuggestsTheRightOne) {
  CommandResult r = run_host("config --num_generation 8");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("--num_generations"), std::string::npos) << r.output;
}

TEST(TrainCommand, ValidatesEveryFlagBeforeLoadingAnything) {
  std::string dir = temp_dir("train_validate");
  write_file(dir + "/x.yaml", "num_generations: 4\nper_device_train_batch_size: 4\n");
  CommandResult r = run_host("train --config " + dir + "/x.yaml --epsilon -1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("epsilon"), std::string::npos) << r.output;
  r = run_host("--config " + dir + "/x.yaml --train_type full");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("--model"), std::string::npos) << r.output;
}

TEST(HelpCommand, ListsCommandsAndFlagGroups) {
  CommandResult r = run_host("--help");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* s : {"score", "plugins", "num_generations", "reward_funcs", "cosine_max_len"})
    EXPECT_NE(r.output.find(s), std::string::npos) << s;
}

TEST(PluginsCheck, PrintsPassOrFailPerCheckAndExitsWithTheVerdict) {
  CommandResult good = run_host(std::string("plugins --check ") + PLUGIN_DIR + "/libgrpo_format.so");
  EXPECT_EQ(good.exit_code, 0) << good.output;
  EXPECT_NE(good.output.find("PASS  format: score 64 completion(s)"), std::string::npos) << good.output;
  EXPECT_NE(good.output.find("12 of 12 checks passed: the plugin conforms"), std::string::npos) << good.output;
  EXPECT_NE(good.output.find("PASS  format: destroy"), std::string::npos) << good.output;
  CommandResult bad = run_host(std::string("plugins --check ") + FIXTURE_WRONG_COUNT);
  EXPECT_EQ(bad.exit_code, 1) << bad.output;
  EXPECT_NE(bad.output.find("FAIL  fixture_wrong_count: score 1 completion(s)"), std::string::npos) << bad.output;
  EXPECT_NE(bad.output.find("PASS  fixture_wrong_count: create with its defaults"), std::string::npos) << bad.output;
  CommandResult needs = run_host(std::string("plugins --check ") + PLUGIN_DIR + "/libgrpo_soft_overlong.so");
  EXPECT_EQ(needs.exit_code, 1) << needs.output;
  EXPECT_NE(needs.output.find("--plugin_args"), std::string::npos) << "says how to give required options";
  CommandResult given = run_host(std::string("plugins --check ") + PLUGIN_DIR +
                                 "/libgrpo_soft_overlong.so --plugin_args '{\"soft_overlong\": {\"soft_cache_length\": 8}}'");
  EXPECT_EQ(given.exit_code, 0) << given.output;
}

// The checker outlives the plugin it checks: each check that calls into the
// plugin runs in a process of its own. Before, a segfault in score() killed
// `plugins --check` (exit status 139) with no FAIL line and no later checks.
TEST(PluginsCheck, APluginThatCrashesAbortsExitsOrHangsFailsItsChecksAndTheRestRun) {
  struct Case {
    const char* file;
    std::string plugin, what;
  };
  const std::vector<Case> cases = {
      {FIXTURE_CRASHES, "fixture_crashes", "signal 11 (Segmentation fault)"},
      {FIXTURE_ABORTS, "fixture_aborts", "signal 6 (Aborted)"},
      {FIXTURE_EXITS, "fixture_exits", "exited with status 3"},
      {FIXTURE_HANGS, "fixture_hangs", "did not finish within 2 s (--check_timeout)"},
  };
  for (const Case& c : cases) {
    CommandResult r = run_host(std::string("plugins --check ") + c.file + " --check_timeout 2");
    EXPECT_EQ(r.exit_code, 1) << r.output;
    const size_t line = r.output.find("FAIL  " + c.plugin + ": score 1 completion(s): ");
    ASSERT_NE(line, std::string::npos) << r.output;
    EXPECT_NE(r.output.substr(line, r.output.find('\n', line) - line).find(c.what), std::string::npos) << r.output;
    for (const char* passes : {"create with its defaults", "score 0 completion(s)", "destroy"})
      EXPECT_NE(r.output.find("PASS  " + c.plugin + ": " + passes), std::string::npos) << passes << "\n" << r.output;
    EXPECT_NE(r.output.find("8 of 12 checks passed, 4 failed"), std::string::npos) << r.output;
  }
  CommandResult bad = run_host(std::string("plugins --check ") + FIXTURE_OK + " --check_timeout 0");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("--check_timeout"), std::string::npos) << bad.output;
}
