// grpo-rollout refuses what does not fit the protocol with an answer that
// names the field, guards its endpoints, and keeps serving.
#include <gtest/gtest.h>

#include "cli/cli_util.h"
#include "plugin_paths.h"
#include "rollout/rollout_process.h"

using grpo::testing::HttpReply;
using grpo::testing::RolloutProcess;
using nlohmann::json;

namespace {

class RolloutErrors : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new RolloutProcess(grpo::testing::tiny_model_dir(), {"--max_body_bytes", "4096", "--max_prompt_tokens",
                                                                   "64"});
  }
  static void TearDownTestSuite() { delete server_; }

  // Expects a JSON error with this status naming this field.
  static void expect_error(const HttpReply& r, int status, const std::string& field) {
    EXPECT_EQ(r.status, status) << r.raw;
    ASSERT_TRUE(r.body.is_object()) << r.raw;
    EXPECT_TRUE(r.body.contains("error")) << r.raw;
    if (!field.empty()) EXPECT_EQ(r.body.value("field", ""), field) << r.raw;
  }
  static RolloutProcess* server_;
};
RolloutProcess* RolloutErrors::server_ = nullptr;

}  // namespace

TEST_F(RolloutErrors, BodiesThatDoNotFitTheSchemaAre422NamingTheField) {
  expect_error(server_->post_raw("/generate/", "{\"prompts\": [[1, 2]"), 422, "body");
  expect_error(server_->post_raw("/generate/", "[1, 2]"), 422, "body");
  expect_error(server_->post("/generate/", json::object()), 422, "prompts");
  expect_error(server_->post("/generate/", {{"prompts", "hello"}}), 422, "prompts");
  expect_error(server_->post("/generate/", {{"prompts", {{1, 2}, 3.5}}}), 422, "prompts[1]");
  expect_error(server_->post("/generate/", {{"prompts", {{1, -2}}}}), 422, "prompts[0][1]");
  expect_error(server_->post("/generate/", {{"prompts", {{1, 100000}}}}), 422, "prompts[0][1]");
  expect_error(server_->post("/generate/", {{"prompts", {{1, 2}}}, {"n", -1}}), 422, "n");
  expect_error(server_->post("/generate/", {{"prompts", {{1, 2}}}, {"n", "two"}}), 422, "n");
  expect_error(server_->post("/generate/", {{"prompts", {{1, 2}}}, {"temperature", "hot"}}), 422, "temperature");
  expect_error(server_->post("/generate/", {{"prompts", {{1, 2}}}, {"top_p", 0}}), 422, "top_p");
  expect_error(server_->post("/generate/", {{"prompts", {{1, 2}}}, {"max_tokens", 1.5}}), 422, "max_tokens");
  expect_error(server_->post("/generate/", {{"prompts", {{1, 2}}}, {"generation_kwargs", {{"seed", "x"}}}}), 422,
               "generation_kwargs.seed");
  expect_error(server_->post("/generate/", {{"prompts", {{1, 2}}}, {"generation_kwargs", {{"beams", 2}}}}), 422,
               "generation_kwargs.beams");
  expect_error(server_->post("/generate/", {{"prompts", {std::vector<int>(65, 7)}}}), 422, "prompts[0]");
  expect_error(server_->post("/chat/", {{"messages", {{{{"role", "wizard"}, {"content", "hi"}}}}}}), 422,
               "messages[0]");
  expect_error(server_->post("/chat/", {{"messages", {json::array()}}}), 422, "messages[0]");
  expect_error(server_->post("/infer/", {{"infer_requests", {{{"nothing", 1}}}}}), 422, "infer_requests[0].messages");
  expect_error(server_->post("/infer/", {{"infer_requests", json::array()}, {"request_config", {{"num_beams", 4}}}}),
               422, "request_config.num_beams");
  expect_error(server_->post("/update_named_param/", {{"name", "no.such.weight"}, {"dtype", "torch.float32"},
                                                      {"shape", {2}}}),
               422, "name");
  expect_error(server_->post("/update_named_param/", {{"name", "model.norm.weight"}, {"dtype", "torch.float32"},
                                                      {"shape", {3}}}),
               422, "shape");
  expect_error(server_->post("/update_named_param/", {{"name", "model.norm.weight"}, {"dtype", "torch.float128"},
                                                      {"shape", {64}}}),
               422, "dtype");
  expect_error(server_->post("/init_communicator/", {{"host", "127.0.0.1"}, {"port", 70000}, {"world_size", 2}}), 422,
               "port");
  expect_error(server_->post("/init_communicator/", {{"host", "127.0.0.1"}, {"port", 5000}, {"world_size", 3}}), 422,
               "world_size");
}

TEST_F(RolloutErrors, OversizedBodiesAre413) {
  std::string big = json{{"prompts", {std::vector<int>(3000, 7)}}}.dump();
  ASSERT_GT(big.size(), 4096u);
  expect_error(server_->post_raw("/generate/", big), 413, "body");
}

TEST_F(RolloutErrors, UnknownPathsAnswer404WithJson) {
  HttpReply r = server_->post("/generate", {{"prompts", {{1}}}});
  EXPECT_EQ(r.status, 404);
  EXPECT_NE(r.body.value("error", "").find("slash"), std::string::npos) << r.raw;
}

TEST_F(RolloutErrors, UpdateWithoutCommunicatorIs500NamingTheStep) {
  HttpReply r = server_->post("/update_named_param/", {{"name", "model.norm.weight"}, {"dtype", "torch.float32"},
                                                       {"shape", {64}}});
  EXPECT_EQ(r.status, 500) << r.raw;
  EXPECT_NE(r.body.value("error", "").find("/init_communicator/ first"), std::string::npos) << r.raw;
}

TEST_F(RolloutErrors, ServerKeepsServingAfterBadRequests) {
  for (int i = 0; i < 3; ++i) server_->post_raw("/generate/", "not json");
  server_->post_raw("/generate/", std::string(10000, 'x'));
  HttpReply ok = server_->post("/generate/", {{"prompts", {{1, 2, 3}}}, {"max_tokens", 3}});
  EXPECT_EQ(ok.status, 200) << ok.raw;
  EXPECT_EQ(ok.body["completion_ids"].size(), 1u);
}

TEST(RolloutServer, ApiKeyGuardsEveryEndpoint) {
  RolloutProcess server(grpo::testing::tiny_model_dir(), {}, "s3cret");
  for (const char* path : {"/health/", "/get_world_size/"}) {
    EXPECT_EQ(server.get(path).status, 401) << path;
    EXPECT_EQ(server.get(path, "wrong").status, 401) << path;
    EXPECT_EQ(server.get(path, "s3cret").status, 200) << path;
  }
  for (const char* path : {"/generate/", "/chat/", "/infer/", "/init_communicator/", "/update_named_param/",
                           "/update_named_params/", "/reset_prefix_cache/", "/close_communicator/"}) {
    HttpReply r = server.post(path, {{"prompts", {{1}}}});
    EXPECT_EQ(r.status, 401) << path;
    EXPECT_TRUE(r.body.contains("error")) << path;
  }
  EXPECT_EQ(server.post("/generate/", {{"prompts", {{1, 2}}}, {"max_tokens", 2}}, "s3cret").status, 200);
}

TEST(RolloutServer, SigtermExitsZero) {
  RolloutProcess server(grpo::testing::tiny_model_dir());
  ASSERT_NE(server.port(), 0);
  EXPECT_EQ(server.post("/generate/", {{"prompts", {{1, 2}}}, {"max_tokens", 2}}).status, 200);
  EXPECT_EQ(server.terminate(), 0) << server.log();
}

TEST(RolloutServer, HelpVersionAndBadFlags) {
  auto run = [](const std::string& args) { return grpo::testing::run_shell("'" GRPO_ROLLOUT_EXE "' " + args); };
  auto help = run("--help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.output.find("--max_body_bytes"), std::string::npos) << help.output;
  EXPECT_EQ(run("--version").exit_code, 0);
  auto no_model = run("--port 0");
  EXPECT_EQ(no_model.exit_code, 2);
  EXPECT_NE(no_model.output.find("--model"), std::string::npos) << no_model.output;
  auto unknown = run("--model x --prot 1");
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.output.find("--prot"), std::string::npos) << unknown.output;
  EXPECT_NE(help.output.find("--max_num_batched_tokens"), std::string::npos) << help.output;
  auto negative = run("--model /nonexistent/model --max_num_batched_tokens -1");
  EXPECT_EQ(negative.exit_code, 2);
  EXPECT_NE(negative.output.find("--max_num_batched_tokens must be an integer >= 0, got '-1'"), std::string::npos)
      << negative.output;
  EXPECT_NE(help.output.find("--data_parallel_size"), std::string::npos) << help.output;
  auto no_replica = run("--model /nonexistent/model --data_parallel_size 0");
  EXPECT_EQ(no_replica.exit_code, 2);
  EXPECT_NE(no_replica.output.find("--data_parallel_size must be an integer >= 1, got '0'"), std::string::npos)
      << no_replica.output;
  auto split = run("--model /nonexistent/model --vllm_tensor_parallel_size 2");
  EXPECT_EQ(split.exit_code, 2);
  EXPECT_NE(split.output.find("--tensor_parallel_size 2: this server does not split a model over GPUs"),
            std::string::npos)
      << split.output;
  auto twice = run("--model /nonexistent/model --dtype bfloat16 --torch_dtype float32");
  EXPECT_EQ(twice.exit_code, 2);
  EXPECT_NE(twice.output.find("--dtype and --torch_dtype are the same setting"), std::string::npos) << twice.output;
  auto bad_dir = run("--model /nonexistent/model --port 0");
  EXPECT_EQ(bad_dir.exit_code, 1);
  EXPECT_NE(bad_dir.output.find("/nonexistent/model"), std::string::npos) << bad_dir.output;
}

// A `swift rollout` command line (its vllm_ names, a bare switch, a dashed
// name, a boolean spelled Yes) and trl vllm-serve's --dtype auto run as they are; the context they give bounds
// prompt and completion together, as vLLM's max_model_len does.
TEST(RolloutServer, TrlAndSwiftCommandLinesRunAsTheyAre) {
  RolloutProcess server(grpo::testing::tiny_model_dir(),
                        {"--dtype", "auto", "--vllm-max-model-len", "32", "--vllm_tensor_parallel_size", "1",
                         "--vllm_enforce_eager", "--vllm_data_parallel_size", "1", "--vllm_gpu_memory_utilization",
                         "0.8", "--vllm_max_num_seqs", "64", "--use_hf", "Yes"});
  ASSERT_NE(server.port(), 0);
  const std::vector<int32_t> prompt(30, 40);
  const auto reply = server.post("/generate/", {{"prompts", {prompt}},
                                                {"max_tokens", 10},
                                                {"generation_kwargs", {{"ignore_eos", true}}}});
  ASSERT_EQ(reply.status, 200) << reply.raw;
  EXPECT_EQ(reply.body["completion_ids"][0].size(), 2u) << "30 prompt positions of 32: room for 2";
  const auto too_long = server.post("/generate/", {{"prompts", {std::vector<int32_t>(33, 40)}}, {"max_tokens", 1}});
  EXPECT_EQ(too_long.status, 422) << too_long.raw;
  EXPECT_NE(too_long.raw.find("over the server's limit of 32"), std::string::npos) << too_long.raw;
  EXPECT_EQ(server.terminate(), 0) << server.log();
  const std::string model = grpo::testing::tiny_model_dir();
  auto past = grpo::testing::run_shell("'" GRPO_ROLLOUT_EXE "' --port 0 --max_model_len 100000 --model " + model);
  EXPECT_EQ(past.exit_code, 1);
  EXPECT_NE(past.output.find("--max_model_len 100000 is above the model's max_position_embeddings"), std::string::npos)
      << past.output;
}

