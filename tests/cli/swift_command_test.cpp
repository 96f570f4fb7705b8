// ms-swift's GRPO guide's single-GPU LoRA command, run as its users would run it: every flag as the guide
// writes it, on `grpo-host rlhf`, and the files they look at afterwards.
#include <filesystem>
#include <set>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/cli_util.h"

using namespace grpo::testing;
namespace fs = std::filesystem;

namespace {

// ms-swift's examples/train/grpo/prompt.txt, the guide's --system.
const char* const kPromptTxt =
    "A conversation between User and Assistant. The user asks a question, and the Assistant solves it. The "
    "assistant first thinks about the reasoning process in the mind and then provides the user with the answer. "
    "The reasoning process and answer are enclosed within <think> </think> and <answer> </answer> tags, "
    "respectively, i.e., <think> reasoning process here </think><answer> answer here </answer>\n";

// Rows shaped as AI-MO/NuminaMath-TIR's: a `problem`, and a `solution` that ends in \boxed{}.
std::string numina_rows(int count) {
  std::string rows;
  for (int i = 1; i <= count; ++i)
    rows += "{\"problem\": \"What is " + std::to_string(i) + " + 1?\", \"solution\": \"Adding one to " +
            std::to_string(i) + " gives $\\\\boxed{" + std::to_string(i + 1) + "}$.\"}\n";
  return rows;
}

std::set<std::string> files_under(const std::string& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) out.insert(fs::relative(e.path(), dir).string());
  return out;
}

}  // namespace

TEST(SwiftGuideCommand, SingleGpuLoraCommandRunsVerbatimOnTheCpu) {
  const std::string dir = temp_dir("swift_guide_command");
  // Substitution: a tiny random Qwen2 with grpo-host's byte-level tokenizer and chat template, not Qwen2.5-7B.
  CommandResult init = run_host("init-model --arch qwen2 --preset tiny --out " + dir + "/model --seed 3");
  ASSERT_EQ(init.exit_code, 0) << init.output;
  write_file(dir + "/numina.jsonl", numina_rows(12));
  write_file(dir + "/prompt.txt", kPromptTxt);
  // The guide's command line, flag for flag. Substituted, for a machine with no GPU and no network: --model
  // (the tiny model), --dataset (the rows above, still taking `#N` of them: 2 prompts, 2 steps), --system (the
  // guide's prompt.txt, written above) and --output_dir (this test's directory). CUDA_VISIBLE_DEVICES=0 stays:
  // without a GPU the trainer computes on the CPU. Nothing is appended: one prompt of 4 completions per step,
  // 2 steps of up to 1024 tokens in bfloat16 take about 15 s of a 2-core machine.
  const std::string command =
      "rlhf \\\n"
      "    --rlhf_type grpo \\\n"
      "    --model " + dir + "/model \\\n"
      "    --reward_funcs accuracy format cosine repetition \\\n"
      "    --train_type lora \\\n"
      "    --lora_rank 8 \\\n"
      "    --lora_alpha 32 \\\n"
      "    --target_modules all-linear \\\n"
      "    --torch_dtype bfloat16 \\\n"
      "    --dataset '" + dir + "/numina.jsonl#2' \\\n"
      "    --max_completion_length 1024 \\\n"
      "    --num_train_epochs 1 \\\n"
      "    --per_device_train_batch_size 4 \\\n"
      "    --per_device_eval_batch_size 4 \\\n"
      "    --learning_rate 1e-5 \\\n"
      "    --gradient_accumulation_steps 1 \\\n"
      "    --eval_steps 100 \\\n"
      "    --save_steps 100 \\\n"
      "    --save_total_limit 2 \\\n"
      "    --logging_steps 5 \\\n"
      "    --max_length 2048 \\\n"
      "    --output_dir " + dir + "/output \\\n"
      "    --warmup_ratio 0.05 \\\n"
      "    --dataloader_num_workers 4 \\\n"
      "    --dataset_num_proc 4 \\\n"
      "    --num_generations 4 \\\n"
      "    --temperature 0.9 \\\n"
      "    --system '" + dir + "/prompt.txt' \\\n"
      "    --log_completions true";
  CommandResult r = run_host(command, "CUDA_VISIBLE_DEVICES=0");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(" on cpu in bfloat16 for 2 steps"), std::string::npos) << r.output;
  // Every flag is read by the trainer except the two ms-swift DataLoader settings, which say so (cli.md:
  // never silently ignored).
  for (const char* flag : {"dataloader_num_workers", "dataset_num_proc"})
    EXPECT_NE(r.output.find(std::string("--") + flag + " is accepted but has no effect"), std::string::npos) << flag;
  size_t no_effect = 0;
  for (size_t at = r.output.find("has no effect"); at != std::string::npos; at = r.output.find("has no effect", at + 1))
    ++no_effect;
  EXPECT_EQ(no_effect, 2u) << r.output;
  const std::string out = dir + "/output";

  // args.yaml: the values as given, and the system prompt's text (as ms-swift's args.json holds it).
  const std::string args = read_file(out + "/args.yaml");
  for (const std::string line :
       {"rlhf_type: grpo", "train_type: lora", "lora_rank: 8", "lora_alpha: 32", "target_modules: [all-linear]",
        "torch_dtype: bfloat16", "reward_funcs: [accuracy, format, cosine, repetition]",
        "max_completion_length: 1024", "num_train_epochs: 1.0", "per_device_train_batch_size: 4",
        "per_device_eval_batch_size: 4", "learning_rate: 1e-05", "gradient_accumulation_steps: 1",
        "eval_steps: 100", "save_steps: 100", "save_total_limit: 2", "logging_steps: 5", "max_length: 2048",
        "warmup_ratio: 0.05", "dataloader_num_workers: 4", "dataset_num_proc: 4", "num_generations: 4",
        "temperature: 0.9", "log_completions: true"})
    EXPECT_NE(args.find("\n" + line + "\n"), std::string::npos) << line << "\n" << args;
  EXPECT_NE(args.find("\ndataset: [\"" + dir + "/numina.jsonl#2\"]\n"), std::string::npos) << args;
  EXPECT_NE(args.find("\noutput_dir: " + out + "\n"), std::string::npos) << args;
  EXPECT_NE(args.find("\nsystem: " + nlohmann::json(kPromptTxt).dump() + "  # read from " + dir + "/prompt.txt\n"),
            std::string::npos)
      << args;

  // logging.jsonl: no line for step 1 (logging_steps 5), one for the last step, with the names TRL's
  // GRPOTrainer logs.
  const auto lines = read_jsonl(out + "/logging.jsonl");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0]["global_step"], 2);
  for (const char* key :
       {"loss", "grad_norm", "learning_rate", "epoch", "reward", "reward_std", "rewards/accuracy/mean",
        "rewards/accuracy/std", "rewards/format/mean", "rewards/format/std", "rewards/cosine/mean",
        "rewards/cosine/std", "rewards/repetition/mean", "rewards/repetition/std", "frac_reward_zero_std", "kl",
        "entropy", "clip_ratio/low_mean", "clip_ratio/high_mean", "clip_ratio/region_mean",
        "completions/mean_length", "completions/min_length", "completions/max_length", "completions/clipped_ratio",
        "completions/mean_terminated_length", "num_tokens"})
    EXPECT_TRUE(lines[0].contains(key)) << key << " in " << lines[0].dump();
  EXPECT_LE(lines[0]["completions/max_length"].get<double>(), 1024.0);

  // completions.jsonl (log_completions true): every completion, 2 steps x 4, the system prompt in each prompt.
  const auto completions = read_jsonl(out + "/completions.jsonl");
  ASSERT_EQ(completions.size(), 8u);
  for (const char* key : {"step", "prompt", "completion", "completion_tokens", "finish_reason", "rewards", "reward",
                          "advantage"})
    EXPECT_TRUE(completions[0].contains(key)) << key << " in " << completions[0].dump();
  EXPECT_EQ(completions[0]["prompt"][0]["role"], "system");
  EXPECT_EQ(completions[0]["prompt"][0]["content"], kPromptTxt);
  for (const char* reward : {"accuracy", "format", "cosine", "repetition"})
    EXPECT_TRUE(completions[0]["rewards"].contains(reward)) << reward << " in " << completions[0].dump();

  // save_steps 100 is past the 2 steps: the one checkpoint is the last step's, a PEFT adapter only.
  const std::string ckpt = out + "/checkpoint-2";
  const nlohmann::json adapter = nlohmann::json::parse(read_file(ckpt + "/adapter_config.json"));
  EXPECT_EQ(adapter["peft_type"], "LORA");
  EXPECT_EQ(adapter["r"], 8);
  EXPECT_EQ(adapter["lora_alpha"], 32);
  const std::set<std::string> expected = {
      "args.yaml", "logging.jsonl", "completions.jsonl", "checkpoint-2/adapter_config.json",
      "checkpoint-2/adapter_model.safetensors", "checkpoint-2/optimizer.pt", "checkpoint-2/rng_state.pt",
      "checkpoint-2/tokenizer.json", "checkpoint-2/tokenizer_config.json", "checkpoint-2/trainer_state.json"};
  std::set<std::string> found = files_under(out);
  // report_to defaults to tensorboard, as in ms-swift: one event file under runs/.
  size_t event_files = 0;
  for (auto it = found.begin(); it != found.end();)
    if (it->rfind("runs/events.out.tfevents.", 0) == 0) {
      ++event_files;
      it = found.erase(it);
    } else {
      ++it;
    }
  EXPECT_EQ(event_files, 1u);
  EXPECT_EQ(found, expected);
}

// The guide's --system names examples/train/grpo/prompt.txt relative to ms-swift's checkout; run from
// elsewhere, the path would silently become the system prompt. ms-swift refuses it, and so does grpo-host.
TEST(SwiftGuideCommand, SystemTxtThatIsNoFileIsRefused) {
  const std::string dir = tiny_run_dir("swift_guide_system_txt");
  // Otherwise a valid run (one short step), so that the exit status is the missing file's alone.
  CommandResult r = run_host("rlhf --rlhf_type grpo --model " + dir + "/model --dataset " + dir +
                             "/rows.jsonl --reward_funcs format --num_generations 2 --per_device_train_batch_size 2 "
                             "--max_completion_length 4 --max_steps 1 --report_to none "
                             "--system examples/train/grpo/prompt.txt --output_dir " + dir + "/out");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("system examples/train/grpo/prompt.txt (--system) names a .txt file that does not exist"),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(dir + "/out/args.yaml"));
}
