// The external_server sampler when the server is not there: no server at
// start waits timeout_s then names the URL; a server that goes away fails
// generate and load_weights at once with its URL; a wrong API key is named.
// Plus where completions are cut when a server runs past a stop.
#include <gtest/gtest.h>

#include <chrono>

#include "external_server/completion_cut.h"
#include "model/weights.h"
#include "plugins/builtin_plugins.h"
#include "plugins/external_sampler_util.h"
#include "trainer/weight_views.h"
#include "plugins/plugin_error.h"
#include "rollout/rollout_process.h"
#include "tokenizer/tokenizer.h"

using namespace grpo::testing;
using grpo::plugins::PluginError;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

std::string create_error(const std::string& url, const nlohmann::json& extra) {
  try {
    external_sampler(url, extra);
  } catch (const PluginError& e) {
    return e.what();
  }
  return "";
}

const std::vector<grpo::plugins::SampleRequest> kRequest = {{{72, 101, 108}, "", "", 2, 1, {}}};

}  // namespace

TEST(ExternalSamplerFaults, NoServerWaitsTimeoutThenNamesTheUrl) {
  const std::string url = "http://127.0.0.1:" + std::to_string(free_port());
  const auto t0 = std::chrono::steady_clock::now();
  const std::string error = create_error(url, {{"timeout_s", 1.5}});
  const double waited = seconds_since(t0);
  EXPECT_NE(error.find(url + "/health/"), std::string::npos) << error;
  EXPECT_NE(error.find("within 1 s"), std::string::npos) << error;
  EXPECT_NE(error.find("grpo-rollout --model"), std::string::npos) << error;
  EXPECT_GE(waited, 1.2);
  EXPECT_LT(waited, 10.0);
}

TEST(ExternalSamplerFaults, MissingAddressOrModelIsNamed) {
  EXPECT_NE(create_error("", {}).find("needs the rollout server's address"), std::string::npos);
  EXPECT_NE(create_error("http://127.0.0.1:1", {{"model", nullptr}}).find("needs 'model'"), std::string::npos);
}

TEST(ExternalSamplerFaults, AWrongApiKeyFailsAtOnceAndTheRightOneWorks) {
  RolloutProcess server(tiny_model_dir(), {}, "s3cret");
  ASSERT_NE(server.port(), 0);
  const auto t0 = std::chrono::steady_clock::now();
  const std::string error = create_error(server.base_url(), {{"api_key", "wrong"}, {"timeout_s", 30}});
  EXPECT_NE(error.find("api_key"), std::string::npos) << error;
  EXPECT_LT(seconds_since(t0), 10.0) << "a refused key is not waited for";
  auto ok = external_sampler(server.base_url(), {{"api_key", "s3cret"}});
  grpo::plugins::SampleOptions o;
  o.max_new_tokens = 3;
  EXPECT_EQ(ok->generate(kRequest, o).size(), 2u);
}

TEST(ExternalSamplerFaults, AServerThatWentAwayFailsGenerateAndLoadWeightsWithItsUrl) {
  auto server = std::make_unique<RolloutProcess>(tiny_model_dir());
  ASSERT_NE(server->port(), 0);
  const std::string url = server->base_url();
  auto sampler = external_sampler(url);
  grpo::model::CausalLM model = grpo::model::load_model(tiny_model_dir());
  grpo::trainer::WeightViews views(*model);
  sampler->load_weights(views.tensors(), GRPO_WEIGHTS_LAST_BUCKET);
  server.reset();  // SIGTERM: the server exits
  grpo::plugins::SampleOptions o;
  o.max_new_tokens = 3;
  auto t0 = std::chrono::steady_clock::now();
  try {
    sampler->generate(kRequest, o);
    ADD_FAILURE() << "generate succeeded without a server";
  } catch (const PluginError& e) {
    EXPECT_NE(std::string(e.what()).find(url + "/generate/"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("still running"), std::string::npos) << e.what();
  }
  EXPECT_LT(seconds_since(t0), 10.0);
  t0 = std::chrono::steady_clock::now();
  try {
    sampler->load_weights(views.tensors(), GRPO_WEIGHTS_LAST_BUCKET);
    ADD_FAILURE() << "load_weights succeeded without a server";
  } catch (const PluginError& e) {
    EXPECT_NE(std::string(e.what()).find(url), std::string::npos) << e.what();
  }
  EXPECT_LT(seconds_since(t0), 40.0);
}

TEST(CompletionCut, EndsAtTheFirstStopIdOrStopStringKeepingThatToken) {
  using grpo::external::cut_completion;
  grpo::tok::Tokenizer tok = grpo::tok::Tokenizer::from_dir(tiny_model_dir());
  const std::vector<int32_t> ids = tok.encode("one two three four five");
  ASSERT_GE(ids.size(), 5u);
  auto c = cut_completion(ids, {ids[2]}, {}, nullptr);
  EXPECT_EQ(c.length, 3u);
  EXPECT_TRUE(c.stopped);
  c = cut_completion(ids, {}, {"thr"}, &tok);  // a stop string ends on the token that completes it
  EXPECT_TRUE(c.stopped);
  EXPECT_NE(tok.decode(std::vector<int32_t>(ids.begin(), ids.begin() + c.length)).find("thr"), std::string::npos);
  EXPECT_EQ(tok.decode(std::vector<int32_t>(ids.begin(), ids.begin() + c.length - 1)).find("thr"), std::string::npos);
  c = cut_completion(ids, {999999}, {"seven"}, &tok);
  EXPECT_EQ(c.length, ids.size());
  EXPECT_FALSE(c.stopped);
}
