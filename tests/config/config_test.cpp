#include "config/config.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <unistd.h>
#include <vector>

namespace fs = std::filesystem;
using grpo::config::Config;
using grpo::config::ConfigError;
using grpo::config::ParseOptions;
using nlohmann::json;

namespace {

// swift's defaults alone give 1 completion per generation batch for groups of 8 (swift fails too),
// so runs in these tests set a batch that holds a whole group.
const std::vector<std::string> kBatch = {"--per_device_train_batch_size", "8"};

std::vector<std::string> with_batch(std::vector<std::string> args) {
  args.insert(args.end(), kBatch.begin(), kBatch.end());
  return args;
}

grpo::config::ParseResult parse_args(const std::vector<std::string>& args, int world_size = 1,
                                     std::vector<std::string> extra = {}) {
  ParseOptions options;
  options.world_size = world_size;
  options.allowed_extra = std::move(extra);
  return grpo::config::parse(args, options);
}

// The ConfigError message of `f`, or a marker that makes the assertions fail readably.
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "<no ConfigError thrown>";
}

std::string cli_error(const std::vector<std::string>& args, int world_size = 1) {
  return error_of([&] { parse_args(args, world_size); });
}

class ConfigFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("grpo_config_test_" + std::to_string(::getpid())) / info->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& text) {
    const fs::path path = dir_ / name;
    std::ofstream(path) << text;
    return path.string();
  }

  fs::path dir_;
};

}  // namespace

// ---- defaults ----

TEST(ConfigDefaults, MatchCliMd) {
  const Config c;
  EXPECT_EQ(c.get_int("num_generations"), 8);
  EXPECT_EQ(c.get_int("max_completion_length"), 512);
  EXPECT_EQ(c.get_int("per_device_train_batch_size"), 1);
  EXPECT_EQ(c.get_int("gradient_accumulation_steps"), 1);
  EXPECT_EQ(c.get_int("num_iterations"), 1);
  EXPECT_DOUBLE_EQ(c.get_double("beta"), 0.04);
  EXPECT_DOUBLE_EQ(c.get_double("epsilon"), 0.2);
  EXPECT_EQ(c.get_string("loss_type"), "grpo");
  EXPECT_EQ(c.get_string("importance_sampling_level"), "token");
  EXPECT_EQ(c.get_string("scale_rewards"), "group");
  EXPECT_DOUBLE_EQ(c.get_double("temperature"), 0.9);
  EXPECT_DOUBLE_EQ(c.get_double("top_p"), 0.9);
  EXPECT_EQ(c.get_int("top_k"), 50);
  EXPECT_DOUBLE_EQ(c.get_double("repetition_penalty"), 1.0);
  EXPECT_EQ(c.get_int("max_resample_times"), 3);
  EXPECT_EQ(c.get_int("lora_rank"), 8);
  EXPECT_EQ(c.get_int("lora_alpha"), 32);
  EXPECT_DOUBLE_EQ(c.get_double("lora_dropout"), 0.05);
  EXPECT_EQ(c.get_strings("target_modules"), std::vector<std::string>{"all-linear"});
  EXPECT_DOUBLE_EQ(c.get_double("split_dataset_ratio"), 0.0);
  EXPECT_TRUE(c.get_bool("dataset_shuffle"));
  EXPECT_EQ(c.get_string("truncation_strategy"), "left");
  EXPECT_EQ(c.get_int("seed"), 42);
  EXPECT_EQ(c.get_string("output_dir"), "output");
  EXPECT_TRUE(c.get_bool("gradient_checkpointing"));
  EXPECT_DOUBLE_EQ(c.get_double("cosine_min_len_value_wrong"), -0.5);
  EXPECT_DOUBLE_EQ(c.get_double("cosine_max_len_value_correct"), 0.5);
  EXPECT_EQ(c.get_int("repetition_n_grams"), 3);
  EXPECT_DOUBLE_EQ(c.get_double("repetition_max_penalty"), -1.0);
  EXPECT_EQ(c.get_json("vllm_server_port"), nlohmann::json::array({8000}));
  EXPECT_DOUBLE_EQ(c.get_double("vllm_server_timeout"), 240.0);
  EXPECT_DOUBLE_EQ(c.get_double("vllm_gpu_memory_utilization"), 0.9);
  EXPECT_TRUE(c.get_bool("vllm_enable_prefix_caching"));
  EXPECT_EQ(c.get_string("vllm_importance_sampling_mode"), "sequence_mask");
  EXPECT_DOUBLE_EQ(c.get_double("vllm_importance_sampling_clip_max"), 3.0);
  EXPECT_EQ(c.get_int("ref_model_sync_steps"), 512);
  EXPECT_DOUBLE_EQ(c.get_double("ref_model_mixup_alpha"), 0.6);
  EXPECT_DOUBLE_EQ(c.get_double("learning_rate"), 1e-6);
  EXPECT_DOUBLE_EQ(c.get_double("weight_decay"), 0.1);
  EXPECT_DOUBLE_EQ(c.get_double("adam_beta2"), 0.95);
  EXPECT_DOUBLE_EQ(c.get_double("max_grad_norm"), 1.0);
  EXPECT_EQ(c.get_string("lr_scheduler_type"), "cosine");
  EXPECT_DOUBLE_EQ(c.get_double("warmup_ratio"), 0.05);
  EXPECT_EQ(c.get_int("logging_steps"), 5);
  EXPECT_EQ(c.get_string("sampler"), "native");
  EXPECT_EQ(c.get_int("num_threads"), 0);
  EXPECT_TRUE(c.is_null("torch_dtype"));  // auto: bfloat16 on GPU, float32 on CPU
  EXPECT_TRUE(c.is_null("max_steps"));
  EXPECT_TRUE(c.is_null("soft_cache_length"));
  EXPECT_TRUE(c.is_null("reward_weights"));
  EXPECT_FALSE(c.is_set("num_generations"));
  EXPECT_EQ(c.origin("num_generations"), "default");
}

TEST(ConfigDefaults, ValuesThatFollowOthers) {
  const Config c;
  EXPECT_DOUBLE_EQ(c.get_double("epsilon_high"), 0.2);
  EXPECT_FALSE(c.is_set("epsilon_high"));
  EXPECT_NE(c.origin("epsilon_high").find("epsilon"), std::string::npos);
  EXPECT_EQ(c.get_int("cosine_max_len"), 512);
  EXPECT_EQ(c.get_int("soft_max_length"), 512);
  EXPECT_EQ(c.get_int("steps_per_generation"), 1);
  EXPECT_EQ(c.get_int("generation_batch_size"), 1);
}

TEST(ConfigTable, EveryFlagIsWellFormed) {
  for (const auto& spec : grpo::config::flag_table()) {
    SCOPED_TRACE(spec.name);
    EXPECT_FALSE(spec.help.empty());
    EXPECT_EQ(grpo::config::find_flag(spec.name), &spec);
    if (spec.availability != grpo::config::Availability::Available) {
      EXPECT_FALSE(spec.reason.empty());
    }
    EXPECT_TRUE(spec.default_value.is_null() == spec.nullable);
  }
  EXPECT_EQ(grpo::config::find_flag("num-generations")->name, "num_generations");
  EXPECT_EQ(grpo::config::find_flag("nope"), nullptr);
}

TEST(ConfigTable, ClosestName) {
  EXPECT_EQ(grpo::config::closest_flag_name("num_generation"), "num_generations");
  EXPECT_EQ(grpo::config::closest_flag_name("learnig_rate"), "learning_rate");
  EXPECT_EQ(grpo::config::closest_flag_name("external_plugin"), "external_plugins");
  EXPECT_EQ(grpo::config::closest_flag_name("xyzzy"), "");
}

TEST(ConfigTable, GettersCheckTypes) {
  const Config c;
  EXPECT_THROW(c.get_int("beta"), std::invalid_argument);
  EXPECT_THROW(c.get_bool("no_such_flag"), std::invalid_argument);
  EXPECT_THROW(c.get_int("max_steps"), std::logic_error);
  EXPECT_EQ(c.get_string("model"), "");
  EXPECT_DOUBLE_EQ(c.get_double("num_generations"), 8.0);
  EXPECT_TRUE(c.get_json("max_steps").is_null());
  EXPECT_TRUE(c.get_json("plugin_args").is_object());
}

// ---- YAML and the command line ----

TEST_F(ConfigFiles, YamlValuesListsAndMaps) {
  const std::string path = write("run.yaml",
                                 "model: /models/qwen\n"
                                 "per_device_train_batch_size: 8\n"
                                 "reward_funcs: [accuracy, format]\n"
                                 "reward_weights:\n"
                                 "  - 1.0\n"
                                 "  - 0.5\n"
                                 "dataset: data/train.jsonl#100\n"
                                 "learning_rate: 1e-5\n"
                                 "use_vllm: yes\n"
                                 "max_steps: null\n"
                                 "plugin_args:\n"
                                 "  my_reward: {threshold: 1024, name: \"x\", on: true}\n");
  const Config c = grpo::config::load_yaml_file(path);
  EXPECT_EQ(c.get_string("model"), "/models/qwen");
  EXPECT_EQ(c.get_strings("reward_funcs"), (std::vector<std::string>{"accuracy", "format"}));
  EXPECT_EQ(c.get_doubles("reward_weights"), (std::vector<double>{1.0, 0.5}));
  EXPECT_EQ(c.get_strings("dataset"), std::vector<std::string>{"data/train.jsonl#100"});
  EXPECT_DOUBLE_EQ(c.get_double("learning_rate"), 1e-5);
  EXPECT_TRUE(c.get_bool("use_vllm"));
  EXPECT_TRUE(c.is_null("max_steps"));
  EXPECT_EQ(c.get_json("plugin_args"), json::parse(R"({"my_reward": {"threshold": 1024, "name": "x", "on": true}})"));
  EXPECT_TRUE(c.is_set("model"));
  EXPECT_EQ(c.origin("model"), path + ":1");
}

TEST_F(ConfigFiles, CommandLineWinsOverYaml) {
  const std::string path = write("run.yaml",
                                 "num_generations: 4\n"
                                 "per_device_train_batch_size: 4\n"
                                 "temperature: 0.7\n");
  const auto r = parse_args({"--config", path, "--num_generations", "8", "--per_device_train_batch_size=8"});
  EXPECT_EQ(r.config.get_int("num_generations"), 8);
  EXPECT_EQ(r.config.get_int("per_device_train_batch_size"), 8);
  EXPECT_DOUBLE_EQ(r.config.get_double("temperature"), 0.7);  // untouched YAML keys stay
  EXPECT_EQ(r.config.origin("num_generations"), "--num_generations");
  EXPECT_EQ(r.config.origin("temperature"), path + ":3");
  // The position of --config does not matter: YAML is always applied first.
  const auto r2 = parse_args({"--num_generations", "8", "--config", path, "--per_device_train_batch_size", "8"});
  EXPECT_EQ(r2.config.get_int("num_generations"), 8);
}

TEST(ConfigCli, ValueForms) {
  const auto r = parse_args(with_batch({"--reward_funcs", "accuracy", "format", "cosine",
                                        "--dynamic-sample",                 // bare bool, dashed name
                                        "--overlong_filter", "no", "--log_completions", "1",
                                        "--cosine_min_len_value_wrong", "-0.25",  // negative value
                                        "--reward_weights", "[1, 0.5, 2]",
                                        "--sampler_args", R"({"base_url": "http://h:1", "retries": 3})",
                                        "--stop_words"}));
  const Config& c = r.config;
  EXPECT_EQ(c.get_strings("reward_funcs"), (std::vector<std::string>{"accuracy", "format", "cosine"}));
  EXPECT_TRUE(c.get_bool("dynamic_sample"));
  EXPECT_FALSE(c.get_bool("overlong_filter"));
  EXPECT_TRUE(c.get_bool("log_completions"));
  EXPECT_DOUBLE_EQ(c.get_double("cosine_min_len_value_wrong"), -0.25);
  EXPECT_EQ(c.get_doubles("reward_weights"), (std::vector<double>{1, 0.5, 2}));
  EXPECT_EQ(c.get_json("sampler_args"), json::parse(R"({"base_url": "http://h:1", "retries": 3})"));
  EXPECT_TRUE(c.get_strings("stop_words").empty());
  for (const char* word : {"true", "True", "yes", "1"})
    EXPECT_TRUE(parse_args(with_batch({"--use_vllm", word})).config.get_bool("use_vllm")) << word;
  for (const char* word : {"false", "False", "no", "0"})
    EXPECT_FALSE(parse_args(with_batch({"--use_vllm", word})).config.get_bool("use_vllm")) << word;
}

TEST(ConfigCli, SubcommandsWithExtrasDoNotCheckTheBatch) {
  // `grpo-host plugins` and `grpo-host score` do not train: the default batch must not stop them.
  const auto r = grpo::config::parse({"--describe", "accuracy"}, {"describe"});
  EXPECT_EQ(r.extras.at("describe"), std::vector<std::string>{"accuracy"});
  // Without extras the batch is checked; 3 completions never split into groups of 2, whatever the world size.
  EXPECT_NE(error_of([] {
              grpo::config::parse({"--num_generations", "2", "--generation_batch_size", "3"});
            }).find("generation_batch_size"),
            std::string::npos);
}

TEST(ConfigCli, ExtrasAndPositional) {
  const auto r = parse_args(with_batch({"first", "--completions", "a.jsonl", "b.jsonl", "--output", "o.json",
                                        "--reward_funcs", "format"}),
                            1, {"completions", "output"});
  EXPECT_EQ(r.positional, std::vector<std::string>{"first"});
  EXPECT_EQ(r.extras.at("completions"), (std::vector<std::string>{"a.jsonl", "b.jsonl"}));
  EXPECT_EQ(r.extras.at("output"), std::vector<std::string>{"o.json"});
  EXPECT_EQ(r.config.get_strings("reward_funcs"), std::vector<std::string>{"format"});
}

TEST(ConfigCli, NormalisedValues) {
  const Config c = parse_args(with_batch({"--max_steps", "-1", "--torch_dtype", "bf16", "--report_to", "none"})).config;
  EXPECT_TRUE(c.is_null("max_steps"));
  EXPECT_EQ(c.get_string("torch_dtype"), "bfloat16");
  EXPECT_TRUE(c.get_strings("report_to").empty());
  EXPECT_TRUE(parse_args(with_batch({"--torch_dtype", "auto"})).config.is_null("torch_dtype"));
  EXPECT_EQ(parse_args(with_batch({"--report_to", "all"})).config.get_strings("report_to"),
            std::vector<std::string>{"tensorboard"});
}

TEST(ConfigCli, ScaleRewardsNormalisation) {
  EXPECT_EQ(parse_args(with_batch({"--scale_rewards", "true"})).config.get_string("scale_rewards"), "group");
  EXPECT_EQ(parse_args(with_batch({"--scale_rewards", "False"})).config.get_string("scale_rewards"), "none");
  EXPECT_EQ(parse_args(with_batch({"--scale_rewards", "batch"})).config.get_string("scale_rewards"), "batch");
  EXPECT_EQ(parse_args(with_batch({"--scale_rewards", "none"})).config.get_string("scale_rewards"), "none");
  const std::string e = cli_error(with_batch({"--scale_rewards", "maybe"}));
  EXPECT_NE(e.find("--scale_rewards"), std::string::npos) << e;
  EXPECT_NE(e.find("'maybe'"), std::string::npos) << e;
  EXPECT_NE(e.find("group | batch | none"), std::string::npos) << e;
}

TEST_F(ConfigFiles, ScaleRewardsFromYamlBool) {
  const Config c = grpo::config::load_yaml_file(write("s.yaml", "scale_rewards: false\nper_device_train_batch_size: 8\n"));
  EXPECT_EQ(c.get_string("scale_rewards"), "none");
}

TEST(ConfigCli, Aliases) {
  const Config c = parse_args(with_batch({"--external_plugins", "./libmy.so", "--tuner_type", "full"})).config;
  EXPECT_EQ(c.get_strings("plugins"), std::vector<std::string>{"./libmy.so"});
  EXPECT_EQ(c.get_strings("external_plugins"), std::vector<std::string>{"./libmy.so"});
  EXPECT_TRUE(c.is_set("plugins"));
  EXPECT_EQ(c.get_string("train_type"), "full");
  const std::string e = cli_error(with_batch({"--plugins", "a.so", "--external_plugins", "b.so"}));
  EXPECT_NE(e.find("given twice"), std::string::npos) << e;
  // ms-swift 3.5's name of the multi-turn scheduler flag.
  EXPECT_EQ(parse_args(with_batch({"--multi_turn_func", "math_tip_trick"})).config.get_string("multi_turn_scheduler"),
            "math_tip_trick");
  // The alias of a flag that is not built is refused like the flag itself.
  const std::string m = cli_error(with_batch({"--tensor_parallel_size", "2"}));
  EXPECT_NE(m.find("--tensor_parallel_size"), std::string::npos) << m;
  EXPECT_NE(m.find("tensor-parallel sampling is not built yet"), std::string::npos) << m;
}

// ---- error messages ----

TEST_F(ConfigFiles, UnknownYamlKeySuggests) {
  const std::string path = write("x.yaml", "model: m\nbeta: 0.0\nnum_generation: 8\n");
  const std::string e = error_of([&] { grpo::config::load_yaml_file(path); });
  EXPECT_NE(e.find("unknown option 'num_generation' in " + path + ":3 — did you mean 'num_generations'?"),
            std::string::npos)
      << e;
}

TEST(ConfigErrors, UnknownCliFlagSuggests) {
  const std::string e = cli_error(with_batch({"--num_generation", "8"}));
  EXPECT_NE(e.find("unknown flag --num_generation — did you mean --num_generations?"), std::string::npos) << e;
  const std::string far = cli_error(with_batch({"--completely_unrelated_thing", "1"}));
  EXPECT_NE(far.find("unknown flag --completely_unrelated_thing"), std::string::npos) << far;
  EXPECT_EQ(far.find("did you mean"), std::string::npos) << far;
}

TEST_F(ConfigFiles, WrongTypeInYamlNamesKeyLineValueAndExpectation) {
  const std::string path = write("x.yaml", "per_device_train_batch_size: 8\n\nepsilon: -0.1\nnum_generations: lots\n");
  const std::string e = error_of([&] { grpo::config::load_yaml_file(path); });
  EXPECT_NE(e.find("option 'epsilon' in " + path + ":3 has an invalid value '-0.1': expected a number > 0"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("option 'num_generations' in " + path + ":4 has an invalid value 'lots': expected an integer >= 2"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("2 problems"), std::string::npos) << e;
}

TEST(ConfigErrors, WrongTypeOnCommandLine) {
  const std::string e = cli_error(with_batch({"--num_generations", "abc"}));
  EXPECT_NE(e.find("flag --num_generations has an invalid value 'abc': expected an integer >= 2"),
            std::string::npos)
      << e;
  const std::string two = cli_error(with_batch({"--beta", "0.1", "0.2"}));
  EXPECT_NE(two.find("one value"), std::string::npos) << two;
  const std::string map = cli_error(with_batch({"--plugin_args", "{not json"}));
  EXPECT_NE(map.find("--plugin_args"), std::string::npos) << map;
  EXPECT_NE(map.find("JSON object"), std::string::npos) << map;
}

TEST(ConfigErrors, Ranges) {
  EXPECT_NE(cli_error(with_batch({"--top_p", "0"})).find("> 0 and <= 1"), std::string::npos);
  EXPECT_NE(cli_error(with_batch({"--split_dataset_ratio", "1"})).find(">= 0 and < 1"), std::string::npos);
  EXPECT_NE(cli_error(with_batch({"--num_generations", "1"})).find(">= 2"), std::string::npos);
  EXPECT_NE(cli_error(with_batch({"--learning_rate", "-1e-6"})).find(">= 0"), std::string::npos);
  EXPECT_NE(cli_error(with_batch({"--temperature", "0"})).find("> 0"), std::string::npos);
  EXPECT_NE(cli_error(with_batch({"--loss_type", "ppo"})).find("grpo | bnpo | dr_grpo | dapo"), std::string::npos);
  EXPECT_NO_THROW(parse_args(with_batch({"--warmup_ratio", "1", "--top_p", "1"})));
}

TEST_F(ConfigFiles, MalformedYaml) {
  const std::string path = write("bad.yaml", "model: m\nreward_funcs: [accuracy, format\nbeta: 0\n");
  const std::string e = error_of([&] { grpo::config::load_yaml_file(path); });
  EXPECT_NE(e.find(path + ":"), std::string::npos) << e;
  EXPECT_NE(e.find("malformed YAML"), std::string::npos) << e;
}

TEST_F(ConfigFiles, MalformedYamlLine) {
  const std::string path = write("bad.yaml", "model: m\nbeta: 0\n  - oops: [\n");
  const std::string e = error_of([&] { grpo::config::load_yaml_file(path); });
  EXPECT_NE(e.find(path + ":3:"), std::string::npos) << e;
}

TEST_F(ConfigFiles, MissingFile) {
  const std::string path = (dir_ / "nowhere.yaml").string();
  const std::string e = cli_error(with_batch({"--config", path}));
  EXPECT_NE(e.find("config file '" + path + "' not found"), std::string::npos) << e;
  EXPECT_NE(e.find("--config"), std::string::npos) << e;
  EXPECT_NE(error_of([&] { grpo::config::load_yaml_file(dir_.string()); }).find("is a directory"),
            std::string::npos);
}

TEST_F(ConfigFiles, YamlShapeProblems) {
  EXPECT_NE(error_of([&] { grpo::config::load_yaml_file(write("l.yaml", "- a\n- b\n")); }).find("a list"),
            std::string::npos);
  const std::string dup = error_of([&] {
    grpo::config::load_yaml_file(write("d.yaml", "per_device_train_batch_size: 8\nbeta: 0\nbeta: 0.1\n"));
  });
  EXPECT_NE(dup.find("line 2"), std::string::npos) << dup;
  EXPECT_NE(dup.find(":3"), std::string::npos) << dup;
  const std::string self = error_of([&] {
    grpo::config::load_yaml_file(write("c.yaml", "per_device_train_batch_size: 8\nconfig: other.yaml\n"));
  });
  EXPECT_NE(self.find("config is the path of the YAML file itself"), std::string::npos) << self;
  const std::string list = error_of([&] {
    grpo::config::load_yaml_file(write("t.yaml", "per_device_train_batch_size: [8, 4]\n"));
  });
  EXPECT_NE(list.find("[8, 4]"), std::string::npos) << list;
}

TEST(ConfigErrors, ProblemsAreReportedTogether) {
  const std::string e = cli_error({"--num_generation", "8", "--deepspeed", "zero3", "--epsilon", "0"});
  EXPECT_EQ(e.rfind("4 problems in the configuration:", 0), 0u) << e;  // + the batch divisibility
  EXPECT_NE(e.find("--num_generation "), std::string::npos) << e;
  EXPECT_NE(e.find("--deepspeed"), std::string::npos) << e;
  EXPECT_NE(e.find("--epsilon"), std::string::npos) << e;
  EXPECT_NE(e.find("generation_batch_size 1"), std::string::npos) << e;
}

// ---- flags that are not built, and Python-only flags ----

TEST(ConfigAvailability, NotBuiltAcceptsOnlyItsDefault) {
  EXPECT_NO_THROW(parse_args(with_batch({"--vllm_tensor_parallel_size", "1", "--sequence_parallel_size", "1", "--sync_ref_model", "no"})));
  const std::string e = cli_error(with_batch({"--vllm_tensor_parallel_size", "2"}));
  EXPECT_NE(e.find("flag --vllm_tensor_parallel_size is not accepted with the value '2'"), std::string::npos) << e;
  EXPECT_NE(e.find("leave it at 1"), std::string::npos) << e;
  for (const char* flag : {"--vllm_tensor_parallel_size", "--move_model_batches"}) {
    const std::string m = cli_error(with_batch({flag, "2"}));
    EXPECT_NE(m.find("not built yet"), std::string::npos) << m;
  }
  EXPECT_NE(cli_error(with_batch({"--sequence_parallel_size", "2"})).find("not built yet"), std::string::npos);
  // An ill-formed value for a flag that is not built still says it is not built.
  EXPECT_NE(cli_error(with_batch({"--vllm_tensor_parallel_size", "many"})).find("not built yet"), std::string::npos);
  // sleep_level and the offload flags are built (the native sampler, trainer/offload.h).
  EXPECT_NO_THROW(parse_args(with_batch({"--sleep_level", "1", "--offload_model", "true", "--offload_optimizer",
                                         "true", "--gc_collect_after_offload", "true"})));
}

TEST_F(ConfigFiles, NotBuiltInYamlNamesLine) {
  const std::string path = write("nb.yaml", "per_device_train_batch_size: 8\nmove_model_batches: 4\n");
  const std::string e = error_of([&] { grpo::config::load_yaml_file(path); });
  EXPECT_NE(e.find("option 'move_model_batches' in " + path + ":2"), std::string::npos) << e;
  EXPECT_NE(e.find("not built yet"), std::string::npos) << e;
}

TEST(ConfigAvailability, PythonOnlyFlags) {
  // ZeRO 1 and 2 are built (sharding across processes); ZeRO-3 and offload say what to use instead.
  EXPECT_NO_THROW(parse_args(with_batch({"--deepspeed", "zero2"})));
  const std::string ds = cli_error(with_batch({"--deepspeed", "zero3"}));
  EXPECT_NE(ds.find("ZeRO-3 shards the weights themselves"), std::string::npos) << ds;
  EXPECT_NE(ds.find("use --deepspeed zero2"), std::string::npos) << ds;
  EXPECT_NE(cli_error(with_batch({"--deepspeed", "zero2_offload"})).find("offloading optimizer state"), std::string::npos);
  EXPECT_NE(cli_error(with_batch({"--deepspeed", "fast"})).find("expected zero0, zero1, zero2"), std::string::npos);
  const std::string wandb = cli_error(with_batch({"--report_to", "tensorboard", "wandb"}));
  EXPECT_NE(wandb.find("Weights & Biases"), std::string::npos) << wandb;
  EXPECT_NE(wandb.find("report_to tensorboard"), std::string::npos) << wandb;
  EXPECT_TRUE(parse_args(with_batch({"--use_hf", "true"})).config.get_bool("use_hf"));  // the hub caches' order
  EXPECT_NE(cli_error(with_batch({"--attn_impl", "flash_attn"})).find("attention kernel"), std::string::npos);
  EXPECT_NE(cli_error(with_batch({"--num_infer_workers", "2"})).find("it needs --use_vllm true --vllm_mode server"),
            std::string::npos);
  EXPECT_NE(cli_error(with_batch({"--mini_batch_size", "2"})).find("steps_per_generation"), std::string::npos);
  const std::string dpo = cli_error(with_batch({"--rlhf_type", "dpo"}));
  EXPECT_NE(dpo.find("GRPO only"), std::string::npos) << dpo;

  // Accepted: the only mode, values equal to the defaults, and flags with an equivalent.
  const Config c = parse_args(with_batch({"--rlhf_type", "grpo", "--use_hf", "false", "--ddp_timeout", "600",
                                          "--loss_scale", "last_round", "--tensor_parallel_size", "1",
                                          "--dataloader_num_workers", "4", "--dataset_num_proc", "4"}))
                       .config;
  EXPECT_EQ(c.get_string("rlhf_type"), "grpo");
  EXPECT_EQ(c.get_int("ddp_timeout"), 600);
  EXPECT_EQ(c.get_int("dataloader_num_workers"), 4);
}

// ---- rules across flags ----

TEST(ConfigRules, DivisibilityMessageNamesNumbersFlagsAndFix) {
  const std::string e = cli_error({"--gradient_accumulation_steps", "3", "--num_generations", "8"}, 2);
  EXPECT_NE(e.find("generation_batch_size 6 is not a multiple of num_generations 8 (--num_generations)"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("per_device_train_batch_size 1 (default) x world size 2 x steps_per_generation 3 "
                   "(derived from gradient_accumulation_steps)"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("--gradient_accumulation_steps 4"), std::string::npos) << e;
  EXPECT_NE(e.find("--per_device_train_batch_size 4"), std::string::npos) << e;
  EXPECT_NE(e.find("--num_generations 6"), std::string::npos) << e;
  // Each suggestion is a valid setting.
  EXPECT_NO_THROW(parse_args({"--gradient_accumulation_steps", "4", "--num_generations", "8"}, 2));
  EXPECT_NO_THROW(parse_args({"--gradient_accumulation_steps", "3", "--per_device_train_batch_size", "4"}, 2));
  EXPECT_NO_THROW(parse_args({"--gradient_accumulation_steps", "3", "--num_generations", "6"}, 2));

  const std::string spg = cli_error({"--steps_per_generation", "3"}, 1);
  EXPECT_NE(spg.find("--steps_per_generation 8"), std::string::npos) << spg;
}

TEST(ConfigRules, GenerationBatchSize) {
  const Config ok = parse_args({"--generation_batch_size", "32", "--per_device_train_batch_size", "4"}, 2).config;
  EXPECT_EQ(ok.get_int("steps_per_generation"), 4);
  EXPECT_FALSE(ok.is_set("steps_per_generation"));

  const std::string e = cli_error({"--generation_batch_size", "12", "--per_device_train_batch_size", "4"});
  EXPECT_NE(e.find("generation_batch_size 12 (--generation_batch_size) is not a multiple of num_generations 8"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("--generation_batch_size 16"), std::string::npos) << e;
  EXPECT_NE(e.find("--num_generations 6"), std::string::npos) << e;

  const std::string split = cli_error({"--generation_batch_size", "10", "--per_device_train_batch_size", "4"});
  EXPECT_NE(split.find("cannot be split into whole micro-batches"), std::string::npos) << split;

  const std::string both = cli_error(with_batch({"--generation_batch_size", "16", "--steps_per_generation", "2"}));
  EXPECT_NE(both.find("mutually exclusive"), std::string::npos) << both;
  EXPECT_NE(both.find("(--steps_per_generation)"), std::string::npos) << both;
}

TEST(ConfigRules, EvaluationBatchOnlyWhenEvaluating) {
  EXPECT_NO_THROW(parse_args(with_batch({})));
  const std::string e = cli_error(with_batch({"--split_dataset_ratio", "0.1"}));
  EXPECT_NE(e.find("per_device_eval_batch_size 1 (default)"), std::string::npos) << e;
  EXPECT_NE(e.find("--per_device_eval_batch_size 8"), std::string::npos) << e;
}

TEST(ConfigRules, BatchGeometryCanBeLeftUnchecked) {
  ParseOptions options;
  options.world_size = 1;
  options.check_batch_geometry = false;
  const auto r = grpo::config::parse({"--reward_funcs", "accuracy"}, options);
  EXPECT_EQ(r.config.get_int("generation_batch_size"), 1);
}

TEST(ConfigRules, RewardWeightsLength) {
  const std::string e = cli_error(with_batch({"--reward_funcs", "accuracy", "format", "--reward_weights", "1", "0.5", "2"}));
  EXPECT_NE(e.find("reward_weights (--reward_weights) has 3 values but there are 2 reward functions (accuracy, format)"),
            std::string::npos)
      << e;
  EXPECT_NO_THROW(parse_args(with_batch({"--reward_funcs", "accuracy", "format", "--reward_weights", "1", "0.5"})));
}

TEST(ConfigRules, SoftOverlong) {
  const std::string missing = cli_error(with_batch({"--reward_funcs", "accuracy", "soft_overlong"}));
  EXPECT_NE(missing.find("needs soft_cache_length"), std::string::npos) << missing;
  EXPECT_NE(missing.find("soft_max_length 512 (derived from max_completion_length)"), std::string::npos) << missing;

  const std::string big = cli_error(
      with_batch({"--reward_funcs", "soft_overlong", "--soft_cache_length", "600", "--max_completion_length", "600"}));
  EXPECT_NE(big.find("soft_cache_length 600 (--soft_cache_length) must be smaller than soft_max_length 600 "
                     "(derived from max_completion_length)"),
            std::string::npos)
      << big;

  const Config ok = parse_args(with_batch({"--reward_funcs", "soft_overlong", "--soft_cache_length", "256",
                                           "--max_completion_length", "1024"}))
                        .config;
  EXPECT_EQ(ok.get_int("soft_max_length"), 1024);
  EXPECT_FALSE(ok.is_set("soft_max_length"));
  // The plugin's own section (cli.md: per-plugin options under plugin_args) counts too.
  const Config section = parse_args(with_batch({"--reward_funcs", "soft_overlong", "--max_completion_length", "16",
                                                "--plugin_args", R"({"soft_overlong": {"soft_cache_length": 8}})"}))
                             .config;
  EXPECT_TRUE(section.is_null("soft_cache_length"));
  const std::string bad_section = cli_error(with_batch(
      {"--reward_funcs", "soft_overlong", "--plugin_args", R"({"soft_overlong": {"soft_cache_length": 600}})"}));
  EXPECT_NE(bad_section.find("plugin_args.soft_overlong.soft_cache_length 600 (--plugin_args) must be smaller than "
                             "soft_max_length 512"),
            std::string::npos)
      << bad_section;
  // Without soft_overlong the cache length is not needed.
  EXPECT_NO_THROW(parse_args(with_batch({"--reward_funcs", "accuracy"})));
}

TEST(ConfigRules, EpsilonHighFollowsEpsilon) {
  EXPECT_DOUBLE_EQ(parse_args(with_batch({"--epsilon", "0.3"})).config.get_double("epsilon_high"), 0.3);
  const Config c = parse_args(with_batch({"--epsilon", "0.3", "--epsilon_high", "0.28"})).config;
  EXPECT_DOUBLE_EQ(c.get_double("epsilon_high"), 0.28);
}

TEST(ConfigRules, UseVllmSelectsSampler) {
  const Config native = parse_args(with_batch({"--use_vllm", "true"})).config;
  EXPECT_EQ(native.get_string("sampler"), "native");

  const Config server = parse_args(with_batch({"--use_vllm", "true", "--vllm_mode", "server",
                                               "--vllm_server_host", "10.0.0.2", "--vllm_server_port", "8001"}))
                            .config;
  EXPECT_EQ(server.get_string("sampler"), "external_server");
  EXPECT_FALSE(server.is_set("sampler"));
  EXPECT_EQ(server.get_json("sampler_args")["base_url"], "http://10.0.0.2:8001");
  EXPECT_DOUBLE_EQ(server.get_json("sampler_args")["timeout_s"].get<double>(), 240.0);

  const Config url = parse_args(with_batch({"--use_vllm", "true", "--vllm_server_base_url", "http://h:9000"})).config;
  EXPECT_EQ(url.get_string("sampler"), "external_server");
  EXPECT_EQ(url.get_json("sampler_args")["base_url"], "http://h:9000");

  const std::string no_address = cli_error(with_batch({"--use_vllm", "true", "--vllm_mode", "server"}));
  EXPECT_NE(no_address.find("--vllm_server_host"), std::string::npos) << no_address;
  const std::string conflict = cli_error(
      with_batch({"--use_vllm", "true", "--vllm_server_host", "h", "--sampler", "native"}));
  EXPECT_NE(conflict.find("conflicts with use_vllm"), std::string::npos) << conflict;
  // cli.md: a server address selects the server whatever vllm_mode says.
  EXPECT_EQ(parse_args(with_batch({"--use_vllm", "true", "--vllm_mode", "colocate", "--vllm_server_host", "h"}))
                .config.get_string("sampler"),
            "external_server");
  const std::string bare = cli_error(with_batch({"--sampler", "external_server"}));
  EXPECT_NE(bare.find("base_url"), std::string::npos) << bare;
}

// ms-swift's lists: several servers by host (one port each, or one for all) or by URL.
TEST(ConfigRules, SeveralServersBecomeBaseUrls) {
  const auto args = [](std::vector<std::string> flags) {
    flags.insert(flags.begin(), {"--use_vllm", "true", "--vllm_mode", "server"});
    return parse_args(with_batch(flags)).config.get_json("sampler_args");
  };
  EXPECT_EQ(args({"--vllm_server_host", "10.0.0.2", "10.0.0.3", "--vllm_server_port", "8001", "8002"})["base_urls"],
            nlohmann::json::array({"http://10.0.0.2:8001", "http://10.0.0.3:8002"}));
  EXPECT_EQ(args({"--vllm_server_host", "10.0.0.2", "::1", "--vllm_server_port", "9000"})["base_urls"],
            nlohmann::json::array({"http://10.0.0.2:9000", "http://[::1]:9000"}));
  EXPECT_EQ(args({"--vllm_server_base_url", "http://a:1", "http://b:2"})["base_urls"],
            nlohmann::json::array({"http://a:1", "http://b:2"}));
  EXPECT_EQ(args({"--vllm_server_host", "10.0.0.2"})["base_url"], "http://10.0.0.2:8000");  // one stays base_url
  const std::string mismatch = cli_error(with_batch({"--use_vllm", "true", "--vllm_server_host", "a", "b", "c",
                                                     "--vllm_server_port", "1", "2"}));
  EXPECT_NE(mismatch.find("gives 2 ports for 3 hosts"), std::string::npos) << mismatch;
  EXPECT_NE(cli_error(with_batch({"--vllm_server_port", "80.5"})).find("whole numbers"), std::string::npos);
  // num_infer_workers: the host starts the servers, so there is no address to derive.
  const Config own = parse_args(with_batch({"--use_vllm", "true", "--vllm_mode", "server", "--num_infer_workers",
                                            "3"})).config;
  EXPECT_EQ(own.get_string("sampler"), "external_server");
  EXPECT_FALSE(own.get_json("sampler_args").contains("base_url"));
  EXPECT_EQ(own.get_int("num_infer_workers"), 3);
}

// ---- set(), args.yaml, help ----

TEST(ConfigSet, ValidatedAndRederived) {
  Config c = parse_args(with_batch({})).config;
  c.set("epsilon", 0.3, "test");
  EXPECT_DOUBLE_EQ(c.get_double("epsilon_high"), 0.3);
  EXPECT_EQ(c.origin("epsilon"), "test");
  c.set("scale_rewards", false, "test");
  EXPECT_EQ(c.get_string("scale_rewards"), "none");

  const std::string e = error_of([&] { c.set("num_generations", 3, "a plugin"); });
  EXPECT_NE(e.find("generation_batch_size 8 is not a multiple of num_generations 3"), std::string::npos) << e;
  EXPECT_EQ(c.get_int("num_generations"), 8);  // unchanged after a refused set
  EXPECT_NE(error_of([&] { c.set("beta", "high", "test"); }).find("'beta' (set by test)"), std::string::npos);
  EXPECT_NE(error_of([&] { c.set("num_generation", 8, "test"); }).find("did you mean 'num_generations'"),
            std::string::npos);
}

TEST_F(ConfigFiles, ArgsYamlRoundTrip) {
  const std::string yaml = write("in.yaml",
                                 "model: /m\n"
                                 "system: \"Answer: think first # then reply\"\n"
                                 "reward_funcs: [accuracy, soft_overlong]\n"
                                 "reward_weights: [1.0, 0.5]\n"
                                 "soft_cache_length: 128\n"
                                 "stop_words: [\"</answer>\", \"true\", \"8\"]\n"
                                 "plugin_args: {my_reward: {threshold: 1024, tags: [a, b]}}\n");
  const Config original = parse_args({"--config", yaml, "--generation_batch_size", "16", "--per_device_train_batch_size",
                                      "4", "--use_vllm", "--vllm_server_host", "127.0.0.1", "--scale_rewards", "false",
                                      "--max_steps", "100", "--learning_rate", "3e-7"},
                                     2)
                              .config;
  const std::string args_yaml = (dir_ / "out" / "args.yaml").string();
  original.write_args_yaml(args_yaml);
  EXPECT_TRUE(fs::exists(args_yaml));
  for (const auto& entry : fs::directory_iterator(dir_ / "out"))
    EXPECT_EQ(entry.path().filename(), "args.yaml");  // no temporary left behind

  const Config reloaded = parse_args({"--config", args_yaml}, 2).config;
  EXPECT_EQ(reloaded.to_json(), original.to_json());
  EXPECT_EQ(reloaded.get_int("steps_per_generation"), 2);
  EXPECT_EQ(reloaded.get_string("sampler"), "external_server");
  EXPECT_EQ(reloaded.get_string("system"), "Answer: think first # then reply");
}

TEST_F(ConfigFiles, ArgsYamlRoundTripOfDefaults) {
  const Config original = parse_args(with_batch({})).config;
  const std::string path = (dir_ / "args.yaml").string();
  original.write_args_yaml(path);
  EXPECT_EQ(grpo::config::load_yaml_file(path).to_json(), original.to_json());
}

TEST(ConfigHelp, GroupedWithDefaults) {
  const std::string help = grpo::config::help_text();
  for (const char* title : {"Model and data:", "GRPO:", "Rewards:", "Plugins:", "Sampling backend and memory:",
                            "Optimisation, logging, saving:"})
    EXPECT_NE(help.find(title), std::string::npos) << title;
  EXPECT_NE(help.find("--num_generations N"), std::string::npos);
  EXPECT_NE(help.find("(default: 8)"), std::string::npos);
  EXPECT_NE(help.find("also --external_plugins"), std::string::npos);
  EXPECT_NE(help.find("not built yet"), std::string::npos);
  EXPECT_NE(help.find("--deepspeed CONFIG"), std::string::npos);
  EXPECT_NE(help.find("refused: "), std::string::npos);
  EXPECT_LT(help.find("GRPO:"), help.find("Rewards:"));
}

TEST(ConfigEnv, WorldSizeFromEnvironment) {
  const char* names[] = {"WORLD_SIZE", "NPROC_PER_NODE", "NNODES"};
  std::vector<std::pair<std::string, std::string>> saved;
  for (const char* n : names)
    if (const char* v = std::getenv(n)) saved.emplace_back(n, v);
  for (const char* n : names) ::unsetenv(n);

  EXPECT_EQ(grpo::config::world_size_from_env(), 1);
  ::setenv("NPROC_PER_NODE", "4", 1);
  ::setenv("NNODES", "2", 1);
  EXPECT_EQ(grpo::config::world_size_from_env(), 8);
  ::setenv("WORLD_SIZE", "3", 1);
  EXPECT_EQ(grpo::config::world_size_from_env(), 3);
  ::setenv("WORLD_SIZE", "three", 1);
  EXPECT_NE(error_of([] { grpo::config::world_size_from_env(); }).find("WORLD_SIZE='three'"), std::string::npos);
  // parse() reads the environment when no world size is given.
  ::setenv("WORLD_SIZE", "8", 1);
  EXPECT_EQ(grpo::config::parse({}).config.world_size(), 8);

  for (const char* n : names) ::unsetenv(n);
  for (const auto& [n, v] : saved) ::setenv(n.c_str(), v.c_str(), 1);
}

// ---- the shipped configs ----

// Every YAML file under configs/ loads; the training ones also pass the batch divisibility check
// (others, such as a config for `grpo-host score`, need not describe a training batch).
TEST(ConfigFilesShipped, EveryConfigLoads) {
  const fs::path dir = fs::path(GRPO_SOURCE_DIR) / "configs";
  auto loads = [](const fs::path& path, bool check_batch_geometry) {
    try {
      grpo::config::load_yaml_file(path.string(), check_batch_geometry);
      return std::string();
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
  };
  int count = 0;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (entry.path().extension() != ".yaml") continue;
    EXPECT_EQ(loads(entry.path(), false), "") << entry.path();
    ++count;
  }
  EXPECT_GE(count, 3);
  for (const char* name : {"grpo.yaml", "grpo_lora.yaml", "dapo.yaml"})
    EXPECT_EQ(loads(dir / name, true), "") << name;

  const Config dapo = grpo::config::load_yaml_file((dir / "dapo.yaml").string());
  EXPECT_EQ(dapo.get_string("loss_type"), "bnpo");
  EXPECT_DOUBLE_EQ(dapo.get_double("epsilon_high"), 0.28);
  EXPECT_TRUE(dapo.get_bool("dynamic_sample"));
  EXPECT_TRUE(dapo.get_bool("overlong_filter"));
  EXPECT_EQ(dapo.get_int("max_resample_times"), 3);
  EXPECT_EQ(dapo.get_strings("reward_funcs"), (std::vector<std::string>{"accuracy", "soft_overlong"}));

  const Config base = grpo::config::load_yaml_file((dir / "grpo.yaml").string());
  EXPECT_EQ(base.get_int("num_generations"), 8);
  EXPECT_TRUE(base.get_bool("use_vllm"));
  EXPECT_EQ(base.get_string("sampler"), "native");
}
