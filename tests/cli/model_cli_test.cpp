// `grpo-host init-model` and `grpo-host generate` as a user runs them.
#include <fstream>

#include <gtest/gtest.h>

#include "cli/cli_util.h"

using namespace grpo::testing;

TEST(InitModelCommand, CreatesALoadableModelAndGenerateIsReproducible) {
  std::string dir = temp_dir("init_model") + "/m";
  CommandResult r = run_host("init-model --arch qwen2 --preset tiny --out " + dir + " --seed 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("Qwen2ForCausalLM"), std::string::npos) << r.output;
  const std::string gen = "generate --model " + dir + " --prompt 'abc' --max_completion_length 8 --n 2 --seed 5";
  CommandResult a = run_host(gen), b = run_host(gen);
  ASSERT_EQ(a.exit_code, 0) << a.output;
  EXPECT_NE(a.output.find("completion 1 (8 tokens, length)"), std::string::npos) << a.output;
  auto strip_timing = [](std::string s) { return s.substr(0, s.rfind(" tokens in ")); };
  EXPECT_EQ(strip_timing(a.output), strip_timing(b.output));
  // --torch_dtype is what the weights are computed in, for generate as for training.
  CommandResult bf16 = run_host(gen + " --torch_dtype bfloat16");
  ASSERT_EQ(bf16.exit_code, 0) << bf16.output;
  EXPECT_NE(bf16.output.find("tokens/s, bfloat16)"), std::string::npos) << bf16.output;
  EXPECT_NE(a.output.find("tokens/s, float32)"), std::string::npos) << a.output;
}

TEST(InitModelCommand, EveryArchitectureAndAForeignTokenizer) {
  for (const char* arch : {"llama", "qwen3"}) {
    std::string dir = temp_dir(std::string("init_") + arch) + "/m";
    CommandResult r = run_host(std::string("init-model --arch ") + arch + " --preset tiny --out " + dir +
                               " --tokenizer " GRPO_TEST_DATA_DIR "/qwen3-tokenizer.json");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("vocab 151669"), std::string::npos) << r.output;
    r = run_host("generate --model " + dir + " --prompt 'Hello' --max_completion_length 3 --top_k 1 --raw");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    // tokenizer.json alone has no chat template: say how to choose one.
    r = run_host("generate --model " + dir + " --prompt 'Hello' --max_completion_length 3");
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find("--template"), std::string::npos) << r.output;
    r = run_host("generate --model " + dir + " --prompt 'Hello' --max_completion_length 3 --template qwen3");
    EXPECT_EQ(r.exit_code, 0) << r.output;
  }
}

TEST(InitModelCommand, TrainsItsTokenizerOnADataset) {
  const std::string base = temp_dir("init_trained_tokenizer");
  {
    std::ofstream rows(base + "/rows.jsonl");
    for (int i = 0; i < 30; ++i)
      rows << R"({"messages": [{"role": "user", "content": "What is the expression?"}, )"
           << R"({"role": "assistant", "content": "The expression is )" << i << R"(."}]})" << "\n";
  }
  CommandResult r = run_host("init-model --preset tiny --out " + base + "/m --train_tokenizer " + base +
                             "/rows.jsonl --vocab_size 270");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("vocab 270"), std::string::npos) << r.output;  // 259 + 11 merges, the cap
  r = run_host("init-model --preset tiny --out " + base + "/big --train_tokenizer " + base + "/rows.jsonl");
  ASSERT_EQ(r.exit_code, 0) << r.output;  // 512 by default: every repeated piece merges, far fewer
  EXPECT_EQ(r.output.find("vocab 512"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("where --vocab_size 512 asks for 253: no pair of tokens occurs twice more"),
            std::string::npos) << "fewer merges than asked are said: " << r.output;
  std::ofstream(base + "/numbers.jsonl") << "{\"a\": 1, \"b\": [2.5, null]}\n{\"a\": \"\"}\n";
  r = run_host("init-model --preset tiny --out " + base + "/none --train_tokenizer " + base + "/numbers.jsonl");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("the rows hold no text to learn merges from"), std::string::npos) << r.output;
  r = run_host("generate --model " + base + "/big --prompt 'What is the expression?' --max_completion_length 4");
  EXPECT_EQ(r.exit_code, 0) << r.output;

  r = run_host("init-model --preset tiny --out " + base + "/x --train_tokenizer " + base + "/rows.jsonl --vocab_size 100");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("above 259"), std::string::npos) << r.output;
  r = run_host("init-model --preset tiny --out " + base + "/x --vocab_size 300");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("--train_tokenizer"), std::string::npos) << r.output;
  r = run_host("init-model --preset tiny --out " + base + "/x --train_tokenizer " + base + "/missing.jsonl");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("missing.jsonl"), std::string::npos) << r.output;
  r = run_host("init-model --preset tiny --out " + base + "/x --train_tokenizer " + base + "/rows.jsonl --tokenizer " +
               GRPO_TEST_DATA_DIR "/qwen3-tokenizer.json");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("give one of them"), std::string::npos) << r.output;
}

// --torch_dtype is the dtype written; --device where the weights are drawn
// (the CPU unless told, so that a seed means the same weights everywhere).
TEST(InitModelCommand, WritesTheAskedDtypeOnTheAskedDevice) {
  const std::string base = temp_dir("init_dtype");
  auto header = [](const std::string& file) {  // a safetensors file: 8 bytes of length, then its JSON header
    std::ifstream in(file, std::ios::binary);
    uint64_t n = 0;
    in.read(reinterpret_cast<char*>(&n), 8);
    std::string text(n, '\0');
    in.read(text.data(), static_cast<std::streamsize>(n));
    return text;
  };
  for (const char* dtype : {"float32", "bfloat16"}) {
    CommandResult r = run_host(std::string("init-model --preset tiny --seed 2 --out ") + base + "/" + dtype +
                               " --torch_dtype " + dtype);
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  const std::string f32 = header(base + "/float32/model.safetensors"), bf16 = header(base + "/bfloat16/model.safetensors");
  EXPECT_NE(f32.find("\"F32\""), std::string::npos) << f32;
  EXPECT_EQ(f32.find("\"BF16\""), std::string::npos) << f32;
  EXPECT_NE(bf16.find("\"BF16\""), std::string::npos) << bf16;
  EXPECT_EQ(bf16.find("\"F32\""), std::string::npos) << bf16;
  const std::string gen = " --prompt abc --max_completion_length 4 --seed 5";
  CommandResult g = run_host("generate --model " + base + "/bfloat16" + gen);
  EXPECT_EQ(g.exit_code, 0) << g.output;
  // A GPU the process cannot see, and a spelling that is no device, are refused naming the flag.
  for (const char* device : {"cuda:99", "gpu"}) {
    CommandResult r = run_host(std::string("init-model --preset tiny --out ") + base + "/x --device " + device);
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find("--device"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find(device), std::string::npos) << r.output;
  }
}

TEST(InitModelCommand, BadArgumentsSayWhatIsValid) {
  std::string dir = temp_dir("init_bad") + "/m";
  CommandResult r = run_host("init-model --arch gpt2 --preset tiny --out " + dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("qwen2, llama or qwen3"), std::string::npos) << r.output;
  r = run_host("init-model --preset huge --out " + dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("tiny, small, base25m, qwen2.5-0.5b, qwen2.5-1.5b, qwen2.5-7b"), std::string::npos) << r.output;
  r = run_host("generate --prompt hi");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("--model"), std::string::npos) << r.output;
  r = run_host("generate --model /nonexistent --prompt hi");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("/nonexistent"), std::string::npos) << r.output;
}

TEST(EvaluateCommand, GeneratesOncePerRowAndScores) {
  std::string dir = temp_dir("evaluate");
  ASSERT_EQ(run_host("init-model --arch qwen2 --preset tiny --out " + dir + "/m").exit_code, 0);
  write_file(dir + "/rows.jsonl", "{\"problem\": \"1+1?\", \"solution\": \"2\"}\n{\"problem\": \"2+2?\", \"solution\": \"4\"}\n");
  const std::string cmd = "evaluate --model " + dir + "/m --dataset " + dir +
                          "/rows.jsonl --reward_funcs accuracy format --max_completion_length 6";
  CommandResult a = run_host(cmd), b = run_host(cmd);
  ASSERT_EQ(a.exit_code, 0) << a.output;
  EXPECT_NE(a.output.find("on 2 rows (greedy)"), std::string::npos) << a.output;
  EXPECT_NE(a.output.find("mean length (tokens) 6.0"), std::string::npos) << a.output;
  EXPECT_EQ(a.output, b.output);  // greedy: the same numbers every time
  CommandResult r = run_host("evaluate --model " + dir + "/m --reward_funcs format");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("--dataset"), std::string::npos) << r.output;
}
