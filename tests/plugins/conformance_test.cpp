// One conformance suite run against every plugin library in plugins/.
#include <cmath>
#include <cstdio>
#include <filesystem>

#include <grpo/reward.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "plugin_paths.h"
#include "plugins/plugin_options.h"
#include "plugins/plugin_registry.h"
#include "plugins/reward_function.h"

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
nlohmann::json required_options(const std::string& name) {
  if (name == "soft_overlong") return {{"soft_cache_length", 64}};
  return nlohmann::json::object();
}

std::vector<RewardInput> edge_inputs() {
  std::vector<RewardInput> v;
  auto add = [&](std::string text, std::vector<int32_t> ids, bool truncated) {
    RewardInput in;
    in.completion = std::move(text);
    in.completion_ids = std::move(ids);
    in.ids_known = true;
    in.is_truncated = truncated;
    in.columns = RowColumns::from_json({{"solution", "\\boxed{42}"}});
    v.push_back(std::move(in));
  };
  add("", {}, false);
  add("<think>x</think><answer>\\boxed{42}</answer>", {1, 2, 3}, false);
  add(std::string(100000, 'a'), std::vector<int32_t>(5000, 7), true);
  add("\xff\xfe invalid utf-8 \\boxed{", {9}, false);
  add("日本語のテキスト \\boxed{\\frac{1}{0}}", {4, 4, 4, 4}, false);
  add(std::string(5000, '{') + "\\boxed{" + std::string(5000, '{'), {1}, false);
  return v;
}

class Conformance : public ::testing::TestWithParam<std::string> {};

}  // namespace

TEST_P(Conformance, DescriptorsOptionsAndScoringFollowTheContract) {
  PluginSources s;
  s.files = {GetParam()};
  s.use_env = false;
  s.use_builtin = false;
  PluginRegistry reg = PluginRegistry::discover(s);
  ASSERT_FALSE(reg.all().empty()) << GetParam() << " lists no plugin";
  for (const PluginInfo& info : reg.all()) {
    SCOPED_TRACE(info.name);
    EXPECT_FALSE(info.version.empty());
    EXPECT_FALSE(info.description.empty());
    nlohmann::json schema = nlohmann::json::parse(info.options_json);
    ASSERT_TRUE(schema.is_array());
    for (const auto& o : schema) {
      EXPECT_TRUE(o.contains("name") && o["name"].is_string());
      EXPECT_TRUE(o.contains("type") && o.contains("default") && o.contains("help"));
    }
    if (info.interface_id != GRPO_REWARD_INTERFACE) continue;
    nlohmann::json options = resolve_plugin_options(info, nlohmann::json::object(), required_options(info.name));
    auto fn = RewardFunction::create(reg.require(info.name, GRPO_REWARD_INTERFACE), options, nullptr, "{}", 2);
    EXPECT_TRUE(fn->score({}, {}).empty());
    auto in = edge_inputs();
    std::vector<double> r = fn->score(in, {});
    ASSERT_EQ(r.size(), in.size());
    EXPECT_EQ(fn->failures(), 0) << "a built-in reward must not fail on odd completions";
    for (double x : r) EXPECT_TRUE(std::isfinite(x) || std::isnan(x));
  }
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
}

INSTANTIATE_TEST_SUITE_P(BuiltIn, Conformance, ::testing::ValuesIn(built_in_libraries()),
                         [](const auto& info) { return fs::path(info.param).stem().string(); });
