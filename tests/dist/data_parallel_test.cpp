// The pieces of data parallel training on their own: seeds of a split group,
// shares, the batch exchange, the micro-batch interleave, and a real c10d
// world of two ranks (two threads, Gloo on 127.0.0.1).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <future>
#include <limits>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "dist/launcher.h"
#include "dist/nccl_group.h"
#include "dist/world.h"
#include "model/sampling.h"
#include "trainer/batch_exchange.h"
#include "trainer/data_parallel.h"
#include "trainer/micro_batches.h"
#include "trainer/overlapped_all_reduce.h"

using namespace grpo;
using namespace grpo::trainer;

TEST(DataParallelSeeds, CopiesOfASplitGroupKeepTheirSeeds) {
  for (uint64_t seed : {0ull, 42ull, 0xffffffffffffffffull})
    for (uint64_t first : {0ull, 1ull, 3ull, 7ull})
      for (uint64_t i = 0; i < 4; ++i)
        EXPECT_EQ(model::sequence_seed(model::seed_of_copies(seed, first), i), model::sequence_seed(seed, first + i));
}

TEST(DataParallelShares, ContiguousSharesCoverTheBatchInRankOrder) {
  for (size_t n : {0u, 1u, 7u, 8u, 33u})
    for (int world : {1, 2, 3, 8}) {
      size_t next = 0;
      for (int r = 0; r < world; ++r) {
        Share s = share_of(n, r, world);
        EXPECT_EQ(s.begin, next);
        EXPECT_LE(s.end - s.begin, n / world + 1);
        EXPECT_GE(s.end - s.begin, n / world);
        next = s.end;
      }
      EXPECT_EQ(next, n);
    }
}

namespace {

Sample sample(const Prompt* p, size_t request, uint32_t index, std::vector<int32_t> ids) {
  Sample s;
  s.prompt = p;
  s.request = request;
  s.index = index;
  s.ids = std::move(ids);
  s.logprobs.assign(s.ids.size(), -0.5f);
  s.text = "text " + std::to_string(index) + " \xe2\x9c\x93";
  return s;
}

}  // namespace

TEST(DataParallelExchange, SharesUnpackToTheWholeBatchWithEveryField) {
  Prompt a, b;
  std::vector<const Prompt*> prompts{&a, &b};
  GenerationBatch r0, r1;
  r0.rewards.names = r1.rewards.names = {"x", "y"};
  r0.rewards.by_fn = {{1.0, 2.0, 3.0}, {0.5, std::numeric_limits<double>::quiet_NaN(), 0.25}};
  r0.rewards.total = {1.5, 2.0, 3.25};
  r0.samples = {sample(&a, 0, 0, {1, 2}), sample(&a, 0, 1, {3}), sample(&b, 1, 0, {})};
  Sample multi = sample(&b, 1, 1, {4, 5, 6});
  multi.sampled = {1, 0, 1};
  multi.last_turn_begin = 2;
  multi.conversation_json = R"([{"role":"user","content":"hi"}])";
  multi.turns = 2;
  multi.tool_calls = 1;
  multi.tool_failures = 1;
  multi.environment_reward = 0.75;
  multi.handler_failed = true;
  multi.finish = FinishReason::Length;
  r1.samples = {multi};
  r1.rewards.by_fn = {{4.0}, {-1.0}};
  r1.rewards.total = {3.0};

  GenerationBatch whole = unpack_shares({pack_share(r0, prompts), pack_share(r1, prompts)}, prompts);
  ASSERT_EQ(whole.size(), 4u);
  EXPECT_EQ(whole.rewards.by_fn[0], (std::vector<double>{1.0, 2.0, 3.0, 4.0}));
  EXPECT_TRUE(std::isnan(whole.rewards.by_fn[1][1]));
  EXPECT_EQ(whole.rewards.total, (std::vector<double>{1.5, 2.0, 3.25, 3.0}));
  EXPECT_EQ(whole.samples[2].prompt, &b);
  EXPECT_EQ(whole.samples[1].ids, (std::vector<int32_t>{3}));
  EXPECT_EQ(whole.samples[0].text, r0.samples[0].text);
  const Sample& m = whole.samples[3];
  EXPECT_EQ(m.prompt, &b);
  EXPECT_EQ(m.request, 1u);
  EXPECT_EQ(m.index, 1u);
  EXPECT_EQ(m.ids, multi.ids);
  EXPECT_EQ(m.logprobs, multi.logprobs);
  EXPECT_EQ(m.sampled, multi.sampled);
  EXPECT_EQ(m.last_turn_begin, 2u);
  EXPECT_EQ(m.conversation_json, multi.conversation_json);
  EXPECT_EQ(m.turns, 2u);
  EXPECT_EQ(m.tool_calls, 1u);
  EXPECT_EQ(m.tool_failures, 1u);
  EXPECT_EQ(m.environment_reward, 0.75);
  EXPECT_TRUE(m.handler_failed);
  EXPECT_EQ(m.finish, FinishReason::Length);

  std::string cut = pack_share(r1, prompts);
  cut.pop_back();
  EXPECT_THROW(unpack_shares({cut}, prompts), std::runtime_error);
}

TEST(DataParallelMicroBatches, RanksTakeInterleavedRowsThatTogetherMakeOneProcessMicroBatches) {
  GenerationBatch batch;
  Prompt p;
  p.ids = {5, 6};
  for (int i = 0; i < 8; ++i) batch.samples.push_back(sample(&p, 0, static_cast<uint32_t>(i), std::vector<int32_t>(i + 1, 7)));
  at::Tensor adv = at::arange(8, at::kDouble);
  auto whole = split_micro_batches(batch, adv, 4, 0, false);
  auto r0 = split_micro_batches(batch, adv, 2, 0, false, 0, 2), r1 = split_micro_batches(batch, adv, 2, 0, false, 1, 2);
  ASSERT_EQ(whole.size(), 2u);
  ASSERT_EQ(r0.size(), 2u);
  ASSERT_EQ(r1.size(), 2u);
  for (size_t k = 0; k < 2; ++k) {
    EXPECT_TRUE(at::equal(at::cat({r0[k].advantages, r1[k].advantages}), whole[k].advantages)) << k;
    EXPECT_EQ(r0[k].active_tokens + r1[k].active_tokens, whole[k].active_tokens);
    EXPECT_EQ(r0[k].dapo_active_tokens, whole[k].dapo_active_tokens);  // the whole batch's count on every rank
  }
  EXPECT_EQ(whole[0].dapo_active_tokens, 36.0);  // 1 + 2 + ... + 8
}

TEST(DataParallelWorld, AWorldOfOneIsTheIdentity) {
  dist::World one;
  std::vector<at::Tensor> t{at::ones({3})};
  one.all_reduce_sum(t, dist::Channel::Train, "x");
  EXPECT_TRUE(at::equal(t[0], at::ones({3})));
  EXPECT_EQ(one.all_gather("abc", dist::Channel::Rollout, "x"), std::vector<std::string>{"abc"});
  bool stop = true;
  auto m = global_metrics(one, {{"loss", 0.5}}, stop, "x");
  EXPECT_EQ(m.at("loss"), 0.5);
  EXPECT_TRUE(stop);
}

namespace {

// `fn(world)` on ranks 0 and 1 of a world on 127.0.0.1, each on its own thread.
template <typename Fn>
void two_ranks(Fn fn, std::chrono::milliseconds timeout = std::chrono::milliseconds(20000)) {
  const int port = dist::free_port("127.0.0.1");
  auto run = [&](int rank) {
    dist::RankEnv env;
    env.rank = rank;
    env.world_size = 2;
    env.local_rank = rank;
    env.local_world_size = 2;
    env.master_addr = "127.0.0.1";
    env.master_port = port;
    // A loaded machine may take seconds to join: only the collectives get `timeout`.
    std::unique_ptr<dist::World> w = dist::World::join(env, timeout, std::max(timeout, std::chrono::milliseconds(20000)));
    fn(*w);
  };
  auto other = std::async(std::launch::async, run, 1);
  run(0);
  other.get();
}

}  // namespace

TEST(DataParallelWorld, TwoRanksSumGatherAverageGradientsAndAgreeOnStopping) {
  two_ranks([](dist::World& w) {
    EXPECT_EQ(w.size(), 2);
    std::vector<at::Tensor> t{at::full({2}, static_cast<float>(w.rank() + 1))};
    w.all_reduce_sum(t, dist::Channel::Train, "a test tensor");
    EXPECT_TRUE(at::equal(t[0], at::full({2}, 3.0f)));

    // Shares of different sizes, on the other channel.
    auto all = w.all_gather(std::string(static_cast<size_t>(w.rank()) * 5 + 1, static_cast<char>('a' + w.rank())),
                            dist::Channel::Rollout, "strings");
    EXPECT_EQ(all, (std::vector<std::string>{"a", "bbbbbb"}));

    // Two parameters in buckets of one float: the mean of the ranks' gradients.
    at::Tensor p = at::zeros({3}).set_requires_grad(true), q = at::zeros({2}).set_requires_grad(true);
    (p * static_cast<float>(w.rank() + 1)).sum().add((q * 10.0f).sum()).backward();
    const int64_t active = average_gradients(w, {p, q}, w.rank() == 0 ? 0 : 5, 4, "test gradients");
    EXPECT_EQ(active, 5);
    EXPECT_TRUE(at::allclose(p.grad(), at::full({3}, 1.5f)));
    EXPECT_TRUE(at::allclose(q.grad(), at::full({2}, 10.0f)));

    bool stop = w.rank() == 1;
    std::map<std::string, double> mine{{"loss", w.rank() == 0 ? 1.0 : 3.0},
                                       {"rewards/r/internal_errors", 1.0},
                                       {"clip_ratio/low_min", w.rank() == 0 ? 0.25 : 0.5},
                                       {"clip_ratio/high_max", w.rank() == 0 ? 0.25 : 0.5},
                                       {"nan", std::numeric_limits<double>::quiet_NaN()}};
    if (w.rank() == 1) mine["completions/aborted_ratio"] = 0.5;
    auto m = global_metrics(w, mine, stop, "test metrics");
    EXPECT_TRUE(stop) << "rank 1 was asked to stop: so is everyone";
    EXPECT_DOUBLE_EQ(m.at("loss"), 2.0);
    EXPECT_DOUBLE_EQ(m.at("rewards/r/internal_errors"), 2.0);  // failures add up
    EXPECT_DOUBLE_EQ(m.at("completions/aborted_ratio"), 0.5);  // over the ranks that reported it
    EXPECT_TRUE(std::isnan(m.at("nan")));
    EXPECT_DOUBLE_EQ(m.at("clip_ratio/low_min"), 0.25);
    EXPECT_DOUBLE_EQ(m.at("clip_ratio/high_max"), 0.5);
  });
}

namespace {

// A chain of four layers (8 floats each, a bucket each at 32 bytes) after a
// parameter nothing uses; each rank feeds its own input.
struct Chain {
  std::vector<at::Tensor> params;
  explicit Chain(int rank) {
    params.push_back(at::zeros({8}).set_requires_grad(true));  // unused: no gradient
    for (int i = 0; i < 4; ++i)
      params.push_back(at::linspace(0.1, 0.8, 8).mul(i + 1).set_requires_grad(true));
    input = at::linspace(-1, 1, 8).mul(rank + 1);
  }
  void backward() const {
    at::Tensor h = input;
    for (size_t i = 1; i < params.size(); ++i) h = at::tanh(h * params[i]);
    h.sum().backward();
  }
  std::vector<at::Tensor> copies() const {
    std::vector<at::Tensor> out;
    for (const at::Tensor& p : params) out.push_back(p.detach().clone().set_requires_grad(true));
    return out;
  }
  at::Tensor input;
};

// The gradients of `params`, as they are after `backwards` backward passes
// of the chain averaged over the ranks the blocking way.
std::vector<at::Tensor> averaged_blocking(dist::World& w, const Chain& chain, int backwards) {
  Chain copy(w.rank());
  copy.params = chain.copies();
  for (int i = 0; i < backwards; ++i) copy.backward();
  average_gradients(w, copy.params, 1, 32, "blocking");
  std::vector<at::Tensor> out;
  for (const at::Tensor& p : copy.params) out.push_back(p.grad().defined() ? p.grad() : at::zeros({8}));
  return out;
}

void expect_gradients(const std::vector<at::Tensor>& params, const std::vector<at::Tensor>& want) {
  for (size_t i = 0; i < params.size(); ++i) {
    ASSERT_TRUE(params[i].grad().defined()) << i;
    EXPECT_TRUE(at::allclose(params[i].grad(), want[i], 1e-6, 1e-7)) << i << ": " << params[i].grad() << want[i];
  }
}

}  // namespace

// Each bucket's all-reduce starts from the backward pass as soon as its
// gradient is final: the four layers' buckets start during backward, the
// unused parameter's (the last to start) after it, as zeros. A first
// backward before arming (gradient accumulation) starts nothing, and the
// result is the blocking average of the accumulated gradients.
TEST(DataParallelWorld, BucketsStartDuringTheLastBackwardAndAverageAsBlocking) {
  two_ranks([](dist::World& w) {
    Chain chain(w.rank());
    const auto want = averaged_blocking(w, chain, 2);
    OverlappedAllReduce reduce(w, chain.params, 32);
    chain.backward();  // the step's first micro-batch
    reduce.arm("the gradients of a test step");
    chain.backward();  // its last
    EXPECT_EQ(reduce.finish(w.rank() == 0 ? 2 : 3, "the gradients of a test step"), 5);
    EXPECT_EQ(reduce.overlapped(), 4u);
    expect_gradients(chain.params, want);

    // The next step: armed again, the same hooks start the buckets again.
    for (const at::Tensor& p : chain.params) p.mutable_grad().reset();
    const auto want_once = averaged_blocking(w, chain, 1);
    reduce.arm("the gradients of the next test step");
    chain.backward();
    reduce.finish(1, "the gradients of the next test step");
    EXPECT_EQ(reduce.overlapped(), 4u);
    expect_gradients(chain.params, want_once);
  });
}

// A gradient that grows after its bucket started (two backward passes while
// armed) makes the sums stale: they are reduced again after backward.
TEST(DataParallelWorld, AGradientThatGrowsAfterItsBucketStartedIsReducedAgain) {
  two_ranks([](dist::World& w) {
    Chain chain(w.rank());
    const auto want = averaged_blocking(w, chain, 2);
    OverlappedAllReduce reduce(w, chain.params, 32);
    reduce.arm("the gradients of a test step");
    chain.backward();
    chain.backward();
    reduce.finish(1, "the gradients of a test step");
    EXPECT_EQ(reduce.overlapped(), 0u);
    expect_gradients(chain.params, want);
  });
}

TEST(DataParallelWorld, ACollectiveOneRankNeverJoinsFailsWithinTheTimeoutNamingIt) {
  two_ranks(
      [](dist::World& w) {
        if (w.rank() == 1) {
          std::this_thread::sleep_for(std::chrono::milliseconds(4500));  // past rank 0's timeout, then joins in the cleanup
          return;
        }
        std::vector<at::Tensor> t{at::ones({4})};
        const auto t0 = std::chrono::steady_clock::now();
        try {
          w.all_reduce_sum(t, dist::Channel::Train, "the gradients of step 3");
          ADD_FAILURE() << "the all_reduce should have timed out";
        } catch (const dist::CollectiveError& e) {
          const std::string what = e.what();
          EXPECT_NE(what.find("rank 0: the all_reduce of the gradients of step 3 failed"), std::string::npos) << what;
          EXPECT_NE(what.find("--ddp_timeout 1 s"), std::string::npos) << what;
        }
        EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
      },
      std::chrono::milliseconds(1000));
}

// NCCL takes one rank per GPU: the World keeps ranks that share one on Gloo.
TEST(RanksSharingAGpu, TheFirstPairIsNamedAndUnknownGpusAreNotCompared) {
  using grpo::dist::ranks_sharing_a_gpu;
  EXPECT_EQ(ranks_sharing_a_gpu({"GPU-a", "GPU-b", "GPU-c"}), std::nullopt);
  EXPECT_EQ(ranks_sharing_a_gpu({"GPU-a", "GPU-b", "GPU-a", "GPU-b"}), (std::pair{0, 2}));
  EXPECT_EQ(ranks_sharing_a_gpu({"GPU-a", "GPU-b", "GPU-b"}), (std::pair{1, 2}));
  EXPECT_EQ(ranks_sharing_a_gpu({"GPU-a", "", "GPU-a"}), std::nullopt);
  EXPECT_EQ(ranks_sharing_a_gpu({"GPU-a"}), std::nullopt);
}

// NCCL's watchdog aborts the communicator (2) rather than ending the process
// (its default, 3), unless the user said otherwise.
TEST(NcclErrorHandling, TwoByDefaultAndAUsersSettingKept) {
  const char* name = "TORCH_NCCL_ASYNC_ERROR_HANDLING";
  const char* before = std::getenv(name);
  const std::string saved = before ? before : "";
  unsetenv(name);
  grpo::dist::default_nccl_error_handling();
  ASSERT_NE(std::getenv(name), nullptr);
  EXPECT_STREQ(std::getenv(name), "2");
  setenv(name, "1", 1);
  grpo::dist::default_nccl_error_handling();
  EXPECT_STREQ(std::getenv(name), "1");
  if (before) setenv(name, saved.c_str(), 1);
  else unsetenv(name);
}
