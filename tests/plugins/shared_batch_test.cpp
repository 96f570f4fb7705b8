// The batch an isolated reward reads from shared memory: what the host wrote,
// byte for byte, through a second mapping of the same memfd (as the worker
// maps it), and a whole batch larger than the first mapping scored in a real
// grpo-plugin-worker.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "plugin_paths.h"
#include "plugins/plugin_registry.h"
#include "plugins/reward_function.h"
#include "plugins/shared_batch.h"

using namespace grpo::plugins;

namespace {

grpo_column column(const std::string& name, const std::string& json, const std::string& text) {
  return {{name.data(), name.size()}, {json.data(), json.size()}, {text.data(), text.size()}};
}

std::string as_string(grpo_str s) { return {s.data, s.size}; }

}  // namespace

TEST(SharedBatch, TheWorkersMappingReadsWhatTheHostWroteAndGrowsWithIt) {
  SharedMemory host = SharedMemory::create(4096);
  SharedMemory worker = SharedMemory::attach(::dup(host.fd()));
  ASSERT_EQ(worker.size(), 4096u);

  const std::string name = "solution", json = "\"\\u00e9t\\u00e9\"", text = "été";
  ColumnsView shared{{column(name, json, text)}, "{\"solution\":\"été\"}"};
  const std::string big(20000, 'x');  // the batch outgrows the first 4096 bytes
  const std::string with_nul("a\0b", 3);
  const std::vector<int32_t> ids = {1, -2, 151935};
  const int32_t none = 0;
  std::vector<RewardView> rows = {
      {"[{\"role\":\"user\"}]", big, "", ids.data(), ids.size(), 3, false, 0, &shared},
      {"[]", with_nul, "[{}]", &none, 0, 0, true, 0, &shared},  // known, and none
      {"[]", "ünïcode ✓", "", nullptr, 0, -1, false, 7, nullptr},  // ids unknown, no columns
  };
  const size_t used = write_batch(host, rows, {12, 100, 1.5});
  EXPECT_GT(host.size(), 20000u);
  worker.map_at_least(used);
  EXPECT_GE(worker.size(), used);

  BatchViews got;
  read_batch(worker.data(), used, &got);
  EXPECT_EQ(got.state.global_step, 12);
  EXPECT_EQ(got.state.max_steps, 100);
  EXPECT_EQ(got.state.epoch, 1.5);
  ASSERT_EQ(got.column_sets.size(), 1u) << "the rows of one prompt share one column set";
  ASSERT_EQ(got.column_sets[0].columns.size(), 1u);
  EXPECT_EQ(as_string(got.column_sets[0].columns[0].name), name);
  EXPECT_EQ(as_string(got.column_sets[0].columns[0].json), json);
  EXPECT_EQ(as_string(got.column_sets[0].columns[0].text), text);
  EXPECT_EQ(got.column_sets[0].json, shared.json);
  ASSERT_EQ(got.rows.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(got.rows[i].messages_json, rows[i].messages_json);
    EXPECT_EQ(got.rows[i].completion, rows[i].completion);
    EXPECT_EQ(got.rows[i].conversation, rows[i].conversation);
    EXPECT_EQ(got.rows[i].ids != nullptr, rows[i].ids != nullptr);
    EXPECT_EQ(got.rows[i].n_ids, rows[i].n_ids);
    EXPECT_EQ(got.rows[i].tokens, rows[i].tokens);
    EXPECT_EQ(got.rows[i].truncated, rows[i].truncated);
    EXPECT_EQ(got.rows[i].prompt_index, rows[i].prompt_index);
    EXPECT_EQ(got.rows[i].columns != nullptr, rows[i].columns != nullptr);
  }
  EXPECT_EQ(std::vector<int32_t>(got.rows[0].ids, got.rows[0].ids + 3), ids);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(got.rows[0].ids) % alignof(int32_t), 0u);
  EXPECT_EQ(got.rows[0].columns, got.rows[1].columns);
  // Views, not copies: the texts are read where the host wrote them.
  EXPECT_GE(got.rows[0].completion.data(), worker.data());
  EXPECT_LT(got.rows[0].completion.data(), worker.data() + used);
}

TEST(SharedBatch, ABatchCutShortIsAnErrorNotAReadPastTheEnd) {
  SharedMemory mem = SharedMemory::create(4096);
  std::vector<RewardView> rows = {{"[]", std::string(300, 'y'), "", nullptr, 0, -1, false, 0, nullptr}};
  const size_t used = write_batch(mem, rows, {});
  BatchViews got;
  for (size_t cut : {size_t{0}, size_t{8}, used / 2, used - 8})
    EXPECT_THROW(read_batch(mem.data(), cut, &got), std::runtime_error) << cut;
  EXPECT_NO_THROW(read_batch(mem.data(), used, &got));
}

// The worker holds the same file. Before, it could shrink it and the host's
// next write died of SIGBUS; the seal refuses that, and a file the worker
// grew is still one the host can grow its mapping over.
TEST(SharedBatch, TheWorkerCanNeitherShrinkTheFileNorUnsealIt) {
  SharedMemory host = SharedMemory::create(4096);
  const int worker_fd = ::dup(host.fd());
  EXPECT_NE(::ftruncate(worker_fd, 0), 0);
  EXPECT_EQ(errno, EPERM);
  EXPECT_NE(::fcntl(worker_fd, F_ADD_SEALS, F_SEAL_WRITE), 0) << "no seal can be added to stop the host's writes";
  ASSERT_EQ(::ftruncate(worker_fd, 1 << 20), 0);  // growing is allowed, to either side
  host.grow(8192);
  EXPECT_GE(host.size(), 8192u);
  host.data()[host.size() - 1] = 'x';  // mapped and backed
  ::close(worker_fd);
}

TEST(SharedBatch, AnIsolatedRewardScoresABatchLargerThanTheFirstMappingAsInProcess) {
  PluginSources sources;
  sources.files = {FIXTURE_OK};
  sources.use_env = false;
  sources.use_builtin = false;
  const PluginRegistry registry = PluginRegistry::discover(sources);
  const ResolvedPlugin plugin = registry.require("fixture", GRPO_REWARD_INTERFACE);
  Isolation isolation;
  isolation.process = true;
  isolation.worker_exe = GRPO_PLUGIN_WORKER_EXE;
  auto local = RewardFunction::create(plugin, nlohmann::json::object(), nullptr, "{}", 1);
  auto isolated = RewardFunction::create(plugin, nlohmann::json::object(), nullptr, "{}", 1, {}, isolation);
  // 64 completions of ~50 kB (3.2 MB; the shared memory starts at 1 MB), then
  // a small batch again. The fixture's reward is the completion's length.
  for (size_t each : {size_t{50000}, size_t{10}}) {
    std::vector<RewardInput> inputs(64);
    for (size_t i = 0; i < inputs.size(); ++i) inputs[i].completion.assign(each + i, 'a' + static_cast<char>(i % 26));
    const std::vector<double> want = local->score(inputs, {}), got = isolated->score(inputs, {});
    EXPECT_EQ(got, want) << each;
    EXPECT_EQ(got.back(), static_cast<double>(each + 63));
  }
  EXPECT_EQ(isolated->failures(), 0);
}
