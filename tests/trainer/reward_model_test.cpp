// --reward_model on a tiny Qwen2ForSequenceClassification checkpoint written
// here: the tiny causal model's body plus a random `score` head, config.json
// as transformers writes a sequence classifier's. The independent
// computation is the causal model's own hidden state at the chosen token
// through the head.
#include "trainer/reward_model.h"

#include <cmath>
#include <filesystem>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "cli/cli_util.h"
#include "model/checkpoint_files.h"
#include "model/weights.h"

using namespace grpo;
using grpo::testing::read_file;
using grpo::testing::tiny_run_dir;
using grpo::testing::write_file;
using nlohmann::json;

namespace {

constexpr int64_t kPad = 257;

// dir/rm: the tiny model as a one-label sequence classifier; returns its head.
at::Tensor write_reward_model(const std::string& dir, json edit = json::object()) {
  model::CausalLM lm = model::load_model(dir + "/model");
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  for (const auto& p : lm->named_parameters())
    if (p.key().rfind("lm_head", 0) != 0) tensors.emplace_back(p.key(), p.value());
  torch::manual_seed(11);
  const at::Tensor head = torch::randn({1, lm->config().hidden_size});
  tensors.emplace_back("score.weight", head);
  model::save_model_tensors(lm->config(), tensors, dir + "/rm", dir + "/model");
  json config = json::parse(read_file(dir + "/rm/config.json"));
  config["architectures"] = {"Qwen2ForSequenceClassification"};
  config["id2label"] = {{"0", "LABEL_0"}};
  config["label2id"] = {{"LABEL_0", 0}};
  config["pad_token_id"] = kPad;
  config.update(edit);
  write_file(dir + "/rm/config.json", config.dump(2));
  return head;
}

// The oracle: the causal model's last hidden state at `at` through the head.
double oracle(const std::string& dir, const at::Tensor& head, const std::vector<int32_t>& ids, int64_t at) {
  model::CausalLM lm = model::load_model(dir + "/model");
  torch::NoGradGuard no_grad;
  at::Tensor input = at::tensor(std::vector<int64_t>(ids.begin(), ids.end())).unsqueeze(0);
  return at::dot(head[0], lm->hidden_states(input)[0][at]).item<double>();
}

}  // namespace

TEST(RewardModel, ScoresTheLastNonPadTokenThroughTheScoreHead) {
  const std::string dir = tiny_run_dir("reward_model_score");
  const at::Tensor head = write_reward_model(dir);
  trainer::RewardModel rm(dir + "/rm", at::kFloat);
  EXPECT_EQ(rm.name(), "rm");  // the directory's basename names its metrics
  const std::vector<int32_t> ids = {60, 61, 62, 63};
  EXPECT_NEAR(rm.score_ids(ids), oracle(dir, head, ids, 3), 1e-5);
  // Trailing pad tokens are skipped, as transformers picks the last non-pad token.
  std::vector<int32_t> padded = ids;
  padded.insert(padded.end(), {static_cast<int32_t>(kPad), static_cast<int32_t>(kPad)});
  EXPECT_NEAR(rm.score_ids(padded), oracle(dir, head, padded, 3), 1e-5);
  EXPECT_GT(std::abs(oracle(dir, head, padded, 5) - oracle(dir, head, padded, 3)), 1e-4);  // the rule matters
}

// Many rows are left-padded into batches (of at most kBatchTokens padded
// tokens): each row's score is its own, whatever its neighbours' lengths.
TEST(RewardModel, ABatchOfManyLengthsScoresEachRowAsAlone) {
  const std::string dir = tiny_run_dir("reward_model_batch");
  const at::Tensor head = write_reward_model(dir);
  trainer::RewardModel rm(dir + "/rm", at::kFloat);
  const auto pad = static_cast<int32_t>(kPad);
  std::vector<std::vector<int32_t>> rows = {{60, 61, 62, 63}, {70}, {}, {80, 81, 82, 83, 84, 85, 86, 87, 88},
                                            {60, 61, 62, 63, pad, pad}, {pad}};
  std::vector<int64_t> at = {3, 0, -1, 8, 3, 0};  // the token scored: the last that is no pad (a lone pad: itself)
  // Long rows after them: more padded tokens than one batch takes.
  const int64_t long_len = 1000, per_batch = trainer::RewardModel::kBatchTokens / long_len;
  for (int64_t r = 0; r < per_batch + 2; ++r) {
    std::vector<int32_t> row;
    for (int64_t t = 0; t < long_len - r; ++t) row.push_back(static_cast<int32_t>(40 + (t * 7 + r) % 90));
    rows.push_back(row);
    at.push_back(long_len - r - 1);
  }
  const std::vector<double> scores = rm.score_rows(rows);
  ASSERT_EQ(scores.size(), rows.size());
  EXPECT_TRUE(std::isnan(scores[2])) << "an empty row has no score";
  for (size_t r : {size_t{0}, size_t{1}, size_t{3}, size_t{4}, size_t{5}, size_t{6}, rows.size() - 1})
    EXPECT_NEAR(scores[r], oracle(dir, head, rows[r], at[r]), 1e-4) << "row " << r;
  EXPECT_EQ(scores[0], scores[4]) << "trailing pads change nothing";
  EXPECT_NEAR(rm.score_ids(rows[3]), scores[3], 1e-5);
}

TEST(RewardModel, ScoresPromptAndCompletionInItsOwnTemplate) {
  const std::string dir = tiny_run_dir("reward_model_template");
  const at::Tensor head = write_reward_model(dir);
  trainer::RewardModel rm(dir + "/rm", at::kFloat);
  Prompt prompt;
  prompt.messages_json = R"([{"role": "user", "content": "1+1=?"}])";
  Sample s;
  s.prompt = &prompt;
  s.text = "2";
  EXPECT_EQ(rm.text_of(s), "<|im_start|>user\n1+1=?<|im_end|>\n<|im_start|>assistant\n2<|im_end|>\n");
  const tok::Tokenizer tokenizer = tok::Tokenizer::from_dir(dir + "/rm");
  const std::vector<int32_t> ids = tokenizer.encode(rm.text_of(s), false);
  const std::vector<double> scores = rm.score({s, s});
  ASSERT_EQ(scores.size(), 2u);
  EXPECT_NEAR(scores[0], oracle(dir, head, ids, static_cast<int64_t>(ids.size()) - 1), 1e-5);
  EXPECT_EQ(scores[0], scores[1]);
}

TEST(RewardModel, RefusesWhatIsNoSingleLabelClassifier) {
  const std::string dir = tiny_run_dir("reward_model_refuses");
  auto error = [](const std::string& path) {
    try {
      trainer::RewardModel rm(path, at::kFloat);
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error(dir + "/model").find("not a sequence classifier"), std::string::npos) << error(dir + "/model");
  write_reward_model(dir, {{"id2label", {{"0", "A"}, {"1", "B"}}}});
  EXPECT_NE(error(dir + "/rm").find("it has 2 labels"), std::string::npos) << error(dir + "/rm");
  EXPECT_NE(error(dir + "/missing").find("no config.json"), std::string::npos);
}

TEST(RewardModel, TrainsAsARewardColumnAfterTheFunctions) {
  const std::string dir = tiny_run_dir("reward_model_train");
  write_reward_model(dir);
  grpo::testing::CommandResult r = grpo::testing::run_host(
      "train --model " + dir + "/model --dataset " + dir + "/rows.jsonl --train_type full --reward_funcs format "
      "--reward_model " + dir + "/rm --reward_weights 1 0.5 --num_generations 4 --per_device_train_batch_size 4 "
      "--max_completion_length 8 --max_steps 1 --logging_steps 1 --log_completions true --report_to none "
      "--output_dir " + dir + "/out");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto log = grpo::testing::read_jsonl(dir + "/out/logging.jsonl");
  ASSERT_EQ(log.size(), 1u);
  EXPECT_TRUE(log[0].contains("rewards/rm/mean")) << log[0];
  EXPECT_EQ(log[0]["rewards/rm/nan_frac"], 0.0);
  trainer::RewardModel rm(dir + "/rm", at::kFloat);
  for (const auto& c : grpo::testing::read_jsonl(dir + "/out/completions.jsonl")) {
    Prompt prompt;
    prompt.messages_json = c["prompt"].dump();
    Sample s;
    s.prompt = &prompt;
    s.text = c["completion"];
    const double expected = rm.score({s})[0];
    EXPECT_NEAR(c["rewards"]["rm"].get<double>(), expected, 1e-4) << c;
    EXPECT_NEAR(c["reward"].get<double>(), c["rewards"]["format"].get<double>() + 0.5 * expected, 1e-4) << c;
  }
}
