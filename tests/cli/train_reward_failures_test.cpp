// Reward failures nobody misses: per-step counts in logging.jsonl, infinite
// rewards turned into NaN with a warning, and a run whose reward failed ends
// with a summary and a non-zero exit unless the user tolerates it.
#include <signal.h>

#include <filesystem>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/cli_util.h"
#include "plugin_paths.h"

using namespace grpo::testing;

namespace {

std::string flags(const std::string& dir, const std::string& plugin, const std::string& reward) {
  return "train --model " + dir + "/model --dataset " + dir + "/rows.jsonl --train_type full --plugins " + plugin +
         " --reward_funcs " + reward + " format --num_generations 4 --per_device_train_batch_size 4 "
         "--gradient_accumulation_steps 1 --max_completion_length 8 --logging_steps 1 --max_steps 2 "
         "--report_to none --gradient_checkpointing false --output_dir " + dir + "/out ";
}

}  // namespace

TEST(TrainRewardFailures, AFailingRewardIsCountedSummarisedAndFailsTheRun) {
  const std::string dir = tiny_run_dir("train_reward_throws");
  CommandResult r = run_host(flags(dir, FIXTURE_SCORE_THROWS, "fixture_throws"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("reward 'fixture_throws'"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("failed on 2 batch(es)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--tolerate_reward_errors true"), std::string::npos) << r.output;
  EXPECT_TRUE(std::filesystem::exists(dir + "/out/checkpoint-2")) << "the finished steps are kept";
  auto log = read_jsonl(dir + "/out/logging.jsonl");
  ASSERT_EQ(log.size(), 2u);
  for (const auto& line : log) {
    EXPECT_EQ(line["rewards/fixture_throws/internal_errors"], 1.0) << line;
    EXPECT_EQ(line["rewards/fixture_throws/nan_frac"], 1.0) << line;
    EXPECT_EQ(line["rewards/format/internal_errors"], 0.0) << line;
    EXPECT_EQ(line["rewards/format/nan_frac"], 0.0) << line;
  }
}

TEST(TrainRewardFailures, ToleratedFailuresExitZero) {
  const std::string dir = tiny_run_dir("train_reward_tolerated");
  CommandResult r = run_host(flags(dir, FIXTURE_SCORE_THROWS, "fixture_throws") + "--tolerate_reward_errors true");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("failed on 2 batch(es)"), std::string::npos) << "still summarised: " << r.output;
}

TEST(TrainRewardFailures, InfiniteRewardsAreNaNWithAWarning) {
  const std::string dir = tiny_run_dir("train_reward_inf");
  CommandResult r = run_host(flags(dir, FIXTURE_RETURNS_INF, "fixture_inf"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("returned 2 infinite value(s) of 4"), std::string::npos) << r.output;
  auto log = read_jsonl(dir + "/out/logging.jsonl");
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[0]["rewards/fixture_inf/nan_frac"], 0.5) << log[0];
  EXPECT_EQ(log[0]["rewards/fixture_inf/internal_errors"], 0.0) << log[0];
  // The step's mean reward is a number: no infinite value reached the totals.
  EXPECT_TRUE(log[0]["reward"].is_number()) << log[0];
}

// --plugin_isolation process: the reward runs in grpo-plugin-worker; what it
// does there costs a batch at most.
TEST(TrainRewardIsolation, ACrashingRewardCostsItsBatchAndTrainingGoesOn) {
  const std::string dir = tiny_run_dir("train_reward_crash");
  CommandResult r = run_host(flags(dir, FIXTURE_CRASHES, "fixture_crashes") +
                             "--plugin_isolation process --tolerate_reward_errors true");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("reward 'fixture_crashes'"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("died of signal 11"), std::string::npos) << r.output;
  EXPECT_TRUE(std::filesystem::exists(dir + "/out/checkpoint-2"));
  auto log = read_jsonl(dir + "/out/logging.jsonl");
  ASSERT_EQ(log.size(), 2u) << "the worker restarts for the second step";
  for (const auto& line : log) EXPECT_EQ(line["rewards/fixture_crashes/internal_errors"], 1.0) << line;
}

TEST(TrainRewardIsolation, IsolateInARewardsSectionIsolatesThatRewardAlone) {
  const std::string dir = tiny_run_dir("train_reward_isolate_one");
  CommandResult r = run_host(flags(dir, FIXTURE_CRASHES, "fixture_crashes") +
                             "--plugin_args '{\"fixture_crashes\": {\"isolate\": true}}' --tolerate_reward_errors true");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("died of signal 11"), std::string::npos) << r.output;
  auto log = read_jsonl(dir + "/out/logging.jsonl");
  ASSERT_EQ(log.size(), 2u);
  for (const auto& line : log) EXPECT_EQ(line["rewards/fixture_crashes/internal_errors"], 1.0) << line;
  CommandResult bad = run_host(flags(dir, FIXTURE_CRASHES, "fixture_crashes") +
                               "--plugin_args '{\"fixture_crashes\": {\"isolate\": \"yes\"}}'");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("plugin_args.fixture_crashes.isolate takes true or false"), std::string::npos)
      << bad.output;
}

TEST(TrainRewardIsolation, AHangingRewardIsCutAtTheTimeout) {
  const std::string dir = tiny_run_dir("train_reward_hang");
  CommandResult r = run_host(flags(dir, FIXTURE_HANGS, "fixture_hangs") +
                             "--plugin_isolation process --reward_timeout 1 --tolerate_reward_errors true");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("did not answer within 1 s"), std::string::npos) << r.output;
  auto log = read_jsonl(dir + "/out/logging.jsonl");
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[1]["rewards/fixture_hangs/internal_errors"], 1.0) << log[1];
}

TEST(TrainRewardIsolation, AnIsolatedRewardScoresAsInProcess) {
  const std::string dir = tiny_run_dir("train_reward_isolated_same");
  const std::string base = flags(dir, FIXTURE_OK, "fixture") + "--log_completions true ";
  CommandResult in_process = run_host(base);
  ASSERT_EQ(in_process.exit_code, 0) << in_process.output;
  const auto want = read_jsonl(dir + "/out/completions.jsonl");
  std::filesystem::remove_all(dir + "/out");
  CommandResult isolated = run_host(base + "--plugin_isolation process");
  ASSERT_EQ(isolated.exit_code, 0) << isolated.output;
  const auto got = read_jsonl(dir + "/out/completions.jsonl");
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i]["rewards"], want[i]["rewards"]) << i;
}

// Before: the worker could ftruncate the batch memory both processes map, and
// the host's next write into it died of SIGBUS. The memory is sealed against
// shrinking now: the plugin's ftruncate fails and the run goes on.
TEST(TrainRewardIsolation, AWorkerCannotShrinkTheSharedBatchUnderTheHost) {
  const std::string dir = tiny_run_dir("train_reward_shrinks");
  CommandResult r = run_host(flags(dir, FIXTURE_SHRINKS_BATCH, "fixture_shrinks") +
                             "--plugin_isolation process --tolerate_reward_errors true");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("fixture_shrinks: ftruncate(/memfd:grpo-reward-batch"), std::string::npos)
      << "the plugin did try: " << r.output;
  EXPECT_EQ(r.output.find("-> done"), std::string::npos) << r.output;
  EXPECT_TRUE(std::filesystem::exists(dir + "/out/checkpoint-2")) << r.output;
  auto log = read_jsonl(dir + "/out/logging.jsonl");
  ASSERT_EQ(log.size(), 2u) << r.output;
  for (const auto& line : log) EXPECT_EQ(line["rewards/fixture_shrinks/internal_errors"], 0.0) << line;
}

namespace {

// grpo-host under `timeout`: a host that deadlocks is a failed test, not a hung one.
CommandResult run_host_within(int seconds, const std::string& args) {
  return run_shell("timeout -s KILL " + std::to_string(seconds) + " '" GRPO_HOST_EXE "' " + args);
}

// Both steps of a 2-step run logged `reward`'s batch as failed: one internal
// error, every reward NaN.
void expect_every_batch_failed(const std::string& dir, const std::string& reward, const std::string& output) {
  auto log = read_jsonl(dir + "/out/logging.jsonl");
  ASSERT_EQ(log.size(), 2u) << output;
  for (const auto& line : log) {
    EXPECT_EQ(line["rewards/" + reward + "/internal_errors"], 1.0) << line;
    EXPECT_EQ(line["rewards/" + reward + "/nan_frac"], 1.0) << line;
  }
}

// A 2-step isolated run of `fixture` (plugin `reward`) whose every batch
// fails, tolerated: exit 0, every batch logged as failed. Its output.
std::string run_failing_isolated(const std::string& run, const char* fixture, const std::string& reward) {
  const std::string dir = tiny_run_dir(run);
  CommandResult r = run_host_within(120, flags(dir, fixture, reward) +
                                             "--plugin_isolation process --tolerate_reward_errors true");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  expect_every_batch_failed(dir, reward, r.output);
  return r.output;
}

// Whether process `pid` runs: gone, or a zombie nobody in this container
// reaps, is not running.
bool process_runs(const std::string& pid) {
  const std::string stat = std::filesystem::exists("/proc/" + pid + "/stat") ? read_file("/proc/" + pid + "/stat") : "";
  const size_t paren = stat.rfind(')');
  const char state = paren == std::string::npos || paren + 2 >= stat.size() ? 'X' : stat[paren + 2];
  return state != 'X' && state != 'Z';
}

}  // namespace

// Before: a reply the plugin wrote on the worker's pipe was taken as the
// batch's (rewards 1000), and the worker's own reply then answered the next
// batch, silently. Replies carry the worker's token and the batch's number
// now: the forged one fails its batch and the worker is restarted.
TEST(TrainRewardIsolation, AReplyForgedByThePluginFailsItsBatch) {
  const std::string output = run_failing_isolated("train_reward_forges", FIXTURE_FORGES_REPLY, "fixture_forges");
  EXPECT_NE(output.find("not its reply"), std::string::npos) << output;
}

// Before: a reply claiming a 2^63-byte message threw length_error, and the
// host then waited for a worker that waited for it: forever, whatever
// --reward_timeout said. Now the batch fails and the worker is killed.
TEST(TrainRewardIsolation, AReplyClaimingAnAbsurdLengthFailsItsBatch) {
  run_failing_isolated("train_reward_huge_reply", FIXTURE_HUGE_REPLY, "fixture_huge_reply");
}

// Before: a worker that died while a helper it had forked still held its
// reply pipe was waited for forever without --reward_timeout (the pipe never
// ended). The worker's death is watched for now: the batch fails naming the
// signal, and its process group, the helper with it, is killed.
TEST(TrainRewardIsolation, AWorkerThatDiesWhileItsHelperHoldsThePipeFailsItsBatch) {
  const std::string output =
      run_failing_isolated("train_reward_crashes_after_fork", FIXTURE_CRASHES_AFTER_FORK, "fixture_crashes_after_fork");
  EXPECT_NE(output.find("died of signal 11"), std::string::npos) << output;
}

// Before: a worker that closed its reply pipe and went on running was waited
// for forever, past --reward_timeout. The end of the pipe is a failure now,
// and the worker is killed.
TEST(TrainRewardIsolation, AWorkerThatClosesItsReplyPipeIsKilled) {
  const std::string dir = tiny_run_dir("train_reward_closes_reply");
  CommandResult r = run_host_within(120, flags(dir, FIXTURE_CLOSES_REPLY, "fixture_closes_reply") +
                                             "--plugin_isolation process --reward_timeout 30 "
                                             "--tolerate_reward_errors true");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("closed its reply pipe"), std::string::npos) << r.output;
  auto log = read_jsonl(dir + "/out/logging.jsonl");
  ASSERT_EQ(log.size(), 2u) << r.output;
  for (const auto& line : log) {
    EXPECT_EQ(line["rewards/fixture_closes_reply/internal_errors"], 1.0) << line;
    EXPECT_LT(line["time/reward"].get<double>(), 10.0) << "not the 30 s timeout: " << line;
  }
}

// Before: a stop signal while an isolated score() ran waited for it to
// return: forever, for one that never does. Now the worker is killed
// kStopGrace (3 s) after the signal, the batch dropped, the last finished
// step saved, exit status 0.
TEST(TrainRewardIsolation, SigtermWhileAnIsolatedRewardHangsStopsWithinSecondsAndSaves) {
  const std::string dir = tiny_run_dir("train_reward_sigterm");
  const std::string out = run_shell(
      "timeout -s KILL 60 '" GRPO_HOST_EXE "' " + flags(dir, FIXTURE_HANGS_LATER, "fixture_hangs_later") +
      "--plugin_isolation process > " + dir + "/log.txt 2>&1 & pid=$!; " +
      "for i in $(seq 1 600); do [ -s " + dir + "/out/logging.jsonl ] && break; sleep 0.1; done; sleep 1; " +
      "start=$(date +%s); kill -TERM $pid; wait $pid; echo exit=$? seconds=$(( $(date +%s) - start ))").output;
  const std::string log = read_file(dir + "/log.txt");
  EXPECT_NE(out.find("exit=0"), std::string::npos) << out << log;
  const size_t at = out.find("seconds=");
  ASSERT_NE(at, std::string::npos) << out;
  EXPECT_LE(std::stoi(out.substr(at + 8)), 10) << out << log;
  EXPECT_NE(log.find("that batch is dropped"), std::string::npos) << log;
  EXPECT_TRUE(std::filesystem::exists(dir + "/out/checkpoint-1/model.safetensors")) << log;
}

// Before: a helper process a plugin started outlived the run (the worker was
// killed alone). The worker is a process group of its own now, killed whole.
TEST(TrainRewardIsolation, HelpersAPluginStartedDoNotOutliveTheRun) {
  const std::string dir = tiny_run_dir("train_reward_helpers");
  CommandResult r = run_host(flags(dir, FIXTURE_FORKS_HELPER, "fixture_forks_helper") + "--plugin_isolation process",
                             "GRPO_FIXTURE_HELPER_PIDS=" + dir + "/helpers.txt");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const std::string pids = read_file(dir + "/helpers.txt");
  ASSERT_FALSE(pids.empty()) << r.output;
  std::istringstream lines(pids);
  for (std::string pid; std::getline(lines, pid);) EXPECT_FALSE(process_runs(pid)) << "helper " << pid;
}

// Before: a worker whose plugin was busy outlived a grpo-host killed with
// SIGKILL (forever, for a plugin that never returns). A worker now ends with
// its process group once it is reparented.
TEST(TrainRewardIsolation, AWorkerDoesNotOutliveAHostKilledWhileItScores) {
  const std::string dir = tiny_run_dir("train_reward_host_killed");
  // The host is killed below whatever happens. Its workers are the children
  // running grpo-plugin-worker at that moment (a first one may have come and
  // gone); the test waits for one, then 2 s for the hanging batch to start.
  const std::string workers_now =
      "workers=; for c in /proc/[0-9]*; do [ \"$(awk '/^PPid/ {print $2}' $c/status 2>/dev/null)\" = \"$pid\" ] && "
      "grep -q grpo-plugin-worker $c/cmdline 2>/dev/null && workers=\"$workers ${c#/proc/}\"; done; ";
  const std::string out = run_shell(
      "'" GRPO_HOST_EXE "' " + flags(dir, FIXTURE_HANGS, "fixture_hangs") + "--plugin_isolation process > " + dir +
      "/log.txt 2>&1 & pid=$!; for i in $(seq 1 600); do " + workers_now + "[ -n \"$workers\" ] && break; " +
      "sleep 0.1; done; sleep 2; " + workers_now + "kill -KILL $pid; wait $pid; sleep 3; echo workers:$workers.").output;
  const size_t at = out.find("workers:");
  ASSERT_NE(at, std::string::npos) << out;
  std::istringstream workers(out.substr(at + 8, out.find('.', at) - at - 8));
  int seen = 0;
  for (std::string worker; workers >> worker; ++seen) {
    EXPECT_FALSE(process_runs(worker)) << "worker " << worker << " outlived its host";
    if (process_runs(worker)) ::kill(-std::stoi(worker), SIGKILL);
  }
  EXPECT_GT(seen, 0) << "no worker was running when the host was killed: " << out << read_file(dir + "/log.txt");
}
