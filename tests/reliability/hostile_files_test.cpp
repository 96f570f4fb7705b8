// grpo-host given hostile or broken files and settings: each is an error that
// names the input and what to do (exit status 2), never a signal, a hang or
// a run that goes on with something silently wrong.
#include <filesystem>
#include <functional>
#include <map>
#include <regex>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/cli_util.h"
#include "plugin_paths.h"

using namespace grpo::testing;
namespace fs = std::filesystem;

namespace {

std::string nested(size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

// A tiny run: 2 steps, a checkpoint after each; `set` replaces or adds flags.
std::string run_flags(const std::string& dir, std::map<std::string, std::string> set = {}) {
  std::map<std::string, std::string> flags = {
      {"model", dir + "/model"}, {"dataset", dir + "/rows.jsonl"}, {"train_type", "full"},
      {"reward_funcs", "format"}, {"num_generations", "4"},       {"per_device_train_batch_size", "4"},
      {"max_completion_length", "8"}, {"max_steps", "2"},        {"logging_steps", "1"},
      {"save_steps", "1"},        {"output_dir", dir + "/out"}};
  for (auto& [name, value] : set) flags[name] = value;
  std::string out = "train";
  for (const auto& [name, value] : flags) out += " --" + name + " " + value;
  return out + " ";
}

void expect_refused(const CommandResult& r, const std::vector<std::string>& needles) {
  EXPECT_EQ(r.exit_code, 2) << r.output;
  for (const auto& n : needles) EXPECT_NE(r.output.find(n), std::string::npos) << "no '" << n << "' in:\n" << r.output;
}

}  // namespace

TEST(HostileFiles, ADatasetColumnNested100000DeepIsAnErrorNamingTheLine) {
  const std::string dir = tiny_run_dir("hostile_nested_row", true, "{\"problem\": \"x\", \"extra\": " + nested(100000) + "}\n");
  expect_refused(run_host(run_flags(dir)), {dir + "/rows.jsonl:9", "nested deeper than 512"});
}

// Messages the chat template cannot take are the row's error (file:line),
// and --skip_bad_rows skips them like any other bad row.
TEST(HostileFiles, BadMessagesAreErrorsNamingTheLine) {
  const std::map<std::string, std::string> cases = {
      {R"([{"role": "user", "content": 5}])", "messages[0].content must be a string"},
      {R"([{"role": "user", "content": [{"type": "image", "image": "x.png"}]}])", "has type \"image\""},
      {R"([{"role": "wizard", "content": "hi"}])", "\"wizard\" is not one of system, user, assistant, tool"},
      {R"([])", "cannot render a chat with no messages"}};
  for (const auto& [messages, error] : cases) {
    const std::string dir = tiny_run_dir("hostile_messages", true, "{\"messages\": " + messages + "}\n");
    expect_refused(run_host(run_flags(dir)), {dir + "/rows.jsonl:9: ", error});
  }
  const std::string dir = tiny_run_dir("hostile_messages_skipped", true, R"({"messages": [{"role": "x", "content": ""}]})" "\n");
  const CommandResult r = run_host(run_flags(dir, {{"skip_bad_rows", "true"}, {"max_steps", "1"}}));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("rows.jsonl:9: messages[0].role \"x\""), std::string::npos) << r.output;
}

TEST(HostileFiles, ANumberPastDoubleRangeIsAnErrorNamingTheFile) {
  const std::string dir = tiny_run_dir("hostile_1e999");
  write_file(dir + "/rows.json", "[{\"problem\": \"1+1=?\", \"solution\": \"2\", \"w\": 1e999}]");
  CommandResult r = run_host(run_flags(dir, {{"dataset", dir + "/rows.json"}}));
  expect_refused(r, {dir + "/rows.json", "number overflow"});
  write_file(dir + "/model/tokenizer.json", "{\"version\": 1e999}");
  expect_refused(run_host(run_flags(dir)), {dir + "/model/tokenizer.json", "number overflow"});
}

TEST(HostileFiles, ASafetensorsShapeNestedDeepIsAnErrorNamingTheFile) {
  const std::string dir = tiny_run_dir("hostile_safetensors");
  std::string header = "{\"w\": {\"dtype\": \"F32\", \"shape\": " + nested(75000) + ", \"data_offsets\": [0, 4]}}";
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  write_file(dir + "/model/model.safetensors", bytes + header + std::string(4, '\0'));
  expect_refused(run_host(run_flags(dir)), {dir + "/model/model.safetensors", "nested deeper than 512"});
}

TEST(HostileFiles, AConfigYamlNestedDeepIsAnErrorNamingTheFile) {
  const std::string dir = temp_dir("hostile_yaml");
  write_file(dir + "/deep.yaml", "sampler_args: " + std::string(1000, '[') + std::string(1000, ']') + "\n");
  expect_refused(run_host("train --config " + dir + "/deep.yaml"), {dir + "/deep.yaml:1:", "nested"});
}

TEST(HostileSettings, BatchSizesWhoseProductWrapsAreRefused) {
  const std::string dir = tiny_run_dir("hostile_batch");
  CommandResult r = run_host(run_flags(dir, {{"per_device_train_batch_size", "4611686018427387904"},
                                             {"gradient_accumulation_steps", "4"}}));
  expect_refused(r, {"per_device_train_batch_size 4611686018427387904", "must stay under"});
  EXPECT_EQ(r.output.find("resolved to 0"), std::string::npos) << r.output;
}

// Before: `[error] stoull`, exit 1. A row count past 64 bits names the flag and the range.
TEST(HostileSettings, ADatasetRowCountPastSixtyFourBitsNamesTheFlagAndTheRange) {
  const std::string dir = tiny_run_dir("hostile_row_count");
  for (const char* count : {"99999999999999999999999", "9223372036854775808"})
    expect_refused(run_host(run_flags(dir, {{"dataset", dir + "/rows.jsonl#" + count}})),
                   {"--dataset: dataset '" + dir + "/rows.jsonl#" + count + "'", "at most 9223372036854775807"});
  CommandResult most = run_host(run_flags(dir, {{"dataset", dir + "/rows.jsonl#09223372036854775807"}}));
  EXPECT_EQ(most.exit_code, 0) << most.output;
  expect_refused(run_host("generate --model " + dir + "/model --prompt hi --n 99999999999999999999"),
                 {"--n '99999999999999999999': expected a whole number"});
}

TEST(HostileSettings, AMaxLengthThatLeavesNoRoomForAPromptIsRefused) {
  const std::string dir = tiny_run_dir("hostile_max_length");
  expect_refused(run_host(run_flags(dir, {{"max_length", "10"}, {"max_completion_length", "64"}})),
                 {"--max_length 10 leaves no room for a prompt", "max_completion_length is 64"});
}

TEST(HostileSettings, PromptsAreCutToTheModelsLimitWithAWarning) {
  const std::string dir = tiny_run_dir("hostile_long_prompt", true,
                                       "{\"problem\": \"" + std::string(400, '7') + "+1=?\", \"solution\": \"x\"}\n");
  // As a model with 64 positions: prompts are cut to 64 - 8 tokens unless max_length says otherwise.
  std::string config = read_file(dir + "/model/config.json");
  config = std::regex_replace(config, std::regex("\"max_position_embeddings\": *[0-9]+"),
                              "\"max_position_embeddings\": 64");
  write_file(dir + "/model/config.json", config);
  CommandResult r = run_host(run_flags(dir, {{"max_steps", "1"}}));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("1 prompts longer than 56 tokens (the model's max_position_embeddings - "
                          "max_completion_length) were cut"),
            std::string::npos)
      << r.output;
  expect_refused(run_host(run_flags(dir, {{"max_completion_length", "64"}})),
                 {"--max_completion_length 64 leaves no room for a prompt in the model's 64 positions"});
}

TEST(HostileCheckpoints, FoldersBesideTheCheckpointsAreLeftAloneBySaveTotalLimit) {
  const std::string dir = tiny_run_dir("hostile_checkpoint_best");
  fs::create_directories(dir + "/out/checkpoint-best");
  fs::create_directories(dir + "/out/.checkpoint-7.tmp");  // a save that was killed
  CommandResult r = run_host(run_flags(dir, {{"save_total_limit", "1"}}));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(fs::exists(dir + "/out/checkpoint-best"));
  EXPECT_FALSE(fs::exists(dir + "/out/checkpoint-1"));
  EXPECT_TRUE(fs::exists(dir + "/out/checkpoint-2/model.safetensors"));
  EXPECT_FALSE(fs::exists(dir + "/out/.checkpoint-7.tmp")) << "an interrupted save is cleaned at the next start";
  EXPECT_NE(r.output.find(".checkpoint-7.tmp: a checkpoint whose save was interrupted"), std::string::npos);
}

TEST(HostileCheckpoints, ADamagedCheckpointIsAnErrorNamingItsFile) {
  const std::string dir = tiny_run_dir("hostile_resume");
  ASSERT_EQ(run_host(run_flags(dir)).exit_code, 0);
  const std::string ckpt = dir + "/out/checkpoint-1";
  const std::string state_path = ckpt + "/trainer_state.json";
  const nlohmann::json state = nlohmann::json::parse(read_file(state_path));
  auto resume = [&](const std::string& what) {
    return run_host(run_flags(dir, {{"output_dir", dir + "/resumed_" + what},
                                    {"max_steps", "3"},
                                    {"resume_from_checkpoint", ckpt}}));
  };
  auto with_state = [&](const std::function<void(nlohmann::json&)>& change) {
    nlohmann::json s = state;
    change(s);
    write_file(state_path, s.dump());
  };
  with_state([](nlohmann::json& s) { s["prompts"]["order"][0] = 1000; });
  expect_refused(resume("order"), {state_path, "not a permutation", "resume from an earlier one"});
  with_state([](nlohmann::json& s) { s["prompts"]["cursor"] = 1000000000000; });
  expect_refused(resume("cursor"), {state_path, "cursor 1000000000000 is past the 8 prompts"});
  with_state([](nlohmann::json& s) { s["global_step"] = -100; });
  expect_refused(resume("step"), {state_path, "\"global_step\" must be an integer >= 0"});
  write_file(state_path, "{\"global_step\": 1, ");
  expect_refused(resume("json"), {state_path + ":1", "not valid JSON"});
  write_file(state_path, state.dump());

  const std::string optimizer = read_file(ckpt + "/optimizer.pt");
  write_file(ckpt + "/optimizer.pt", "not an archive");
  expect_refused(resume("optimizer"), {ckpt + "/optimizer.pt", "cannot be read as AdamW's state"});
  write_file(ckpt + "/optimizer.pt", optimizer);
  write_file(ckpt + "/rng_state.pt", optimizer);
  expect_refused(resume("rng"), {ckpt + "/rng_state.pt", "damaged"});
}

TEST(HostileOutput, ErrorsGoToStderrAndStdoutStaysClean) {
  CommandResult r = run_shell("(" + std::string(GRPO_HOST_EXE) + " train --num_generations many 2>/dev/null)");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.output, "");
  r = run_shell("(" + std::string(GRPO_HOST_EXE) + " train --num_generations many 2>&1 >/dev/null)");
  EXPECT_NE(r.output.find("num_generations"), std::string::npos) << r.output;
}

TEST(HostileFiles, ATokenizerWithIdsPastTheModelsVocabularyIsRefused) {
  const std::string dir = tiny_run_dir("hostile_vocab");
  nlohmann::json tokenizer = nlohmann::json::parse(read_file(dir + "/model/tokenizer.json"));
  tokenizer["added_tokens"].push_back({{"id", 100000}, {"content", "<|far|>"}, {"single_word", false},
                                       {"lstrip", false}, {"rstrip", false}, {"normalized", false}, {"special", true}});
  write_file(dir + "/model/tokenizer.json", tokenizer.dump());
  expect_refused(run_host(run_flags(dir)), {"the tokenizer has ids up to 100000, past the model's vocab_size"});
}

TEST(HostileOutput, SecretsAreNotWrittenToTheResolvedConfiguration) {
  const std::string dir = temp_dir("hostile_secrets");
  CommandResult r = run_host("config --model m --num_generations 2 --per_device_train_batch_size 2 "
                             "--sampler external_server --sampler_args "
                             "'{\"base_url\": \"http://127.0.0.1:1\", \"api_key\": \"s3cret\"}' --save " +
                             dir + "/args.yaml");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("s3cret"), std::string::npos) << r.output;
  EXPECT_EQ(read_file(dir + "/args.yaml").find("s3cret"), std::string::npos);
  EXPECT_NE(read_file(dir + "/args.yaml").find("base_url: \"http://127.0.0.1:1\""), std::string::npos) << read_file(dir + "/args.yaml");
}

TEST(HostileFiles, AConfigValueThatIsNotUtf8IsAnErrorNamingTheLine) {
  const std::string dir = temp_dir("hostile_utf8");
  write_file(dir + "/bad.yaml", "num_generations: 4\nsystem: \"caf\xff\"\n");
  expect_refused(run_host("train --config " + dir + "/bad.yaml"), {dir + "/bad.yaml:2", "UTF-8"});
}
