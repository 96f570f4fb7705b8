// grpo-host: the command-line entry point. Each subcommand lives in its own file.
#include <csignal>
#include <cstdio>
#include <string>
#include <vector>

#include <grpo/version.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "app/evaluate_command.h"
#include "app/model_commands.h"
#include "app/plugins_command.h"
#include "config/config.h"
#include "config/log_level.h"
#include "dist/launcher.h"
#include "dist/nccl_group.h"
#include "score/score_command.h"
#include "trainer/grpo_trainer.h"
#include "trainer/sft_trainer.h"
#include "util/user_error.h"

namespace {

constexpr const char* kUsage = R"(usage: grpo-host [COMMAND] [--config x.yaml] [--flag value ...]

commands:
  train      GRPO / DAPO training (the default when no command is given)
  rlhf       the same as train, so that `swift rlhf --rlhf_type grpo ...` scripts run with swift replaced
  sft        supervised fine-tuning on each row's answer (the last assistant turn, or `response`)
  evaluate   generate once per row (greedy; --sample to sample) and score: --model DIR --dataset rows.jsonl
             --reward_funcs accuracy format
  score      score logged completions with reward plugins:
             --dataset rows.jsonl --completions c.jsonl --reward_funcs accuracy format [--output out.jsonl]
  plugins    list the plugins found; --describe NAME prints a plugin's options; --check LIB runs the
             conformance checks on a plugin library, each in a process of its own (PASS/FAIL each, exit 1
             on a failure; --check_timeout SECONDS per check, default 60)
  init-model create a randomly initialised model: --arch qwen2|llama|qwen3 --preset tiny|small|base25m|qwen2.5-0.5b|qwen2.5-1.5b|qwen2.5-7b
             --out DIR [--tokenizer PATH] (without one, a byte-level tokenizer of its own; --train_tokenizer
             rows.jsonl [--vocab_size 512] adds BPE merges learned from the rows' text) [--torch_dtype
             float32|bfloat16|float16] [--device cpu|cuda[:N]] (draws on the CPU unless told: the same
             --seed, the same weights on every machine)
  generate   sample from a model: --model DIR --prompt TEXT [--n K] [--temperature ...]; the prompt is a
             user turn in the model's chat format (--template to choose it), or plain text with --raw
  config     validate a configuration and print it resolved, as args.yaml holds it; --save PATH writes it
  help       this text and every flag (--help)
  version    the program and SDK version
)";

// Prints the resolved configuration; --save PATH also writes it there (as args.yaml).
int run_config_command(const std::vector<std::string>& args) {
  grpo::config::ParseResult parsed = grpo::config::parse(args, grpo::config::ParseOptions{{"save"}});
  std::fputs(parsed.config.to_yaml().c_str(), stdout);
  auto save = parsed.extras.find("save");
  if (save != parsed.extras.end()) {
    if (save->second.size() != 1) throw grpo::config::ConfigError("--save takes one path, e.g. --save args.yaml");
    parsed.config.write_args_yaml(save->second[0]);
    std::fprintf(stderr, "wrote %s\n", save->second[0].c_str());
  }
  return 0;
}

// `argv`: the whole command line, which the ranks of a data parallel run get too.
int run_train_command(const std::vector<std::string>& args, const std::vector<std::string>& argv) {
  grpo::config::ParseOptions options;
  options.plugin_flags = true;  // a reward's options are flags too; checked once the plugins are loaded
  grpo::config::ParseResult parsed = grpo::config::parse(args, options);  // validated before anything loads
  grpo::trainer::GrpoSettings settings = grpo::trainer::GrpoSettings::from(parsed.config);  // refuses what is not built
  // NPROC_PER_NODE=N without RANK: start this node's N ranks and watch them.
  // Their grace to stop after one failed: a collective's timeout, plus a save.
  if (auto launch = grpo::dist::launch_request_from_environment())
    return grpo::dist::launch_ranks(*launch, argv, settings.dist.timeout_s + 60.0);
  grpo::trainer::run_grpo(settings);
  return 0;
}

// Errors about what the user gave (flags, files, plugins, models) exit with 2,
// as usage errors do; anything else is ours and exits with 1.
bool is_input_error(const std::exception& e) { return dynamic_cast<const grpo::UserError*>(&e) != nullptr; }

}  // namespace

int main(int argc, char** argv) {
  grpo::dist::default_nccl_error_handling();  // before any thread: it may set an environment variable
  // Logs and errors on stderr, as Python's logging writes them; stdout keeps
  // what a command produces (metric lines, generated text, JSON).
  spdlog::set_default_logger(spdlog::stderr_color_mt("grpo-host"));
  // A file size limit (ulimit -f) makes writes fail with EFBIG, reported like a full disk, instead of killing us.
  std::signal(SIGXFSZ, SIG_IGN);
  std::vector<std::string> args(argv + 1, argv + argc);
  std::string command = "train";
  if (!args.empty() && args[0].rfind("--", 0) != 0) {
    command = args[0];
    args.erase(args.begin());
  }
  for (const auto& a : args)
    if (a == "--help" || a == "-h") command = "help";
  try {
    grpo::config::apply_log_level_from_env();  // --log_level, parsed with each command's flags, wins
    if (command == "help") {
      std::fputs(kUsage, stdout);
      std::fputs("\n", stdout);
      std::fputs(grpo::config::help_text().c_str(), stdout);
      return 0;
    }
    if (command == "version" || (command == "train" && args.size() == 1 && args[0] == "--version")) {
      std::printf("grpo-host %d.%d.%d (plugin SDK %d.%d)\n", GRPO_SDK_VERSION_MAJOR, GRPO_SDK_VERSION_MINOR,
                  GRPO_SDK_VERSION_PATCH, GRPO_SDK_VERSION_MAJOR, GRPO_SDK_VERSION_MINOR);
      return 0;
    }
    if (command == "score") return grpo::score::run_score_command(args);
    if (command == "plugins") return grpo::app::run_plugins_command(args);
    if (command == "config") return run_config_command(args);
    if (command == "init-model") return grpo::app::run_init_model_command(args);
    if (command == "generate") return grpo::app::run_generate_command(args);
    if (command == "evaluate") return grpo::app::run_evaluate_command(args);
    // ms-swift trains GRPO as `swift rlhf --rlhf_type grpo`; the ranks a launch starts get the same argv.
    if (command == "train" || command == "rlhf")
      return run_train_command(args, std::vector<std::string>(argv, argv + argc));
    if (command == "sft") {
      grpo::trainer::run_sft(
          grpo::trainer::SftSettings::from(grpo::config::parse(args, grpo::config::ParseOptions{{}, 0, false}).config));
      return 0;
    }
    std::fprintf(stderr, "grpo-host: unknown command '%s'\n\n%s", command.c_str(), kUsage);
    return 2;
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return is_input_error(e) ? 2 : 1;
  }
}
