// config.json of Qwen2, Llama 3 and Qwen3 (the shipped configs of Llama-3.2-1B and Qwen3-0.6B),
// transformers' defaults, the errors, and the check of a checkpoint against its config.
#include "model/model_config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using namespace grpo::model;
using nlohmann::json;

namespace {

const std::string kTinyQwen2 = std::string(GRPO_TEST_DATA_DIR) + "/tiny-qwen2";

fs::path fresh_dir(const std::string& name) {
  static const fs::path root = [] {
    fs::path d = fs::temp_directory_path() / ("grpo_model_config_test_" + std::to_string(::getpid()));
    std::atexit([] {
      std::error_code ec;
      fs::remove_all(fs::temp_directory_path() / ("grpo_model_config_test_" + std::to_string(::getpid())), ec);
    });
    return d;
  }();
  fs::remove_all(root / name);
  fs::create_directories(root / name);
  return root / name;
}

const json kLlama32_1B = json::parse(R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 128000, "eos_token_id": 128001, "head_dim": 64, "hidden_act": "silu",
  "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 8192,
  "max_position_embeddings": 131072, "mlp_bias": false, "model_type": "llama",
  "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8, "pretraining_tp": 1,
  "rms_norm_eps": 1e-05,
  "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "rope_theta": 500000.0, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
  "transformers_version": "4.45.0.dev0", "use_cache": true, "vocab_size": 128256})");

const json kQwen3_06B = json::parse(R"({
  "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
  "hidden_size": 1024, "initializer_range": 0.02, "intermediate_size": 3072,
  "max_position_embeddings": 40960, "max_window_layers": 28, "model_type": "qwen3",
  "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8, "rms_norm_eps": 1e-06,
  "rope_scaling": null, "rope_theta": 1000000, "sliding_window": null, "tie_word_embeddings": true,
  "torch_dtype": "bfloat16", "transformers_version": "4.51.0", "use_cache": true,
  "use_sliding_window": false, "vocab_size": 151936})");

std::map<std::string, std::vector<int64_t>> shape_map(const ModelConfig& config) {
  std::map<std::string, std::vector<int64_t>> out;
  for (const auto& [name, shape] : config.parameter_shapes()) out[name] = shape;
  return out;
}

// from_json fails with a ModelConfigError naming the source and containing every needle.
void expect_config_error(const json& config, const std::vector<std::string>& needles) {
  try {
    ModelConfig::from_json(config, "models/x/config.json");
    ADD_FAILURE() << "accepted " << config.dump();
  } catch (const ModelConfigError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("models/x/config.json"), std::string::npos) << message;
    for (const std::string& needle : needles) EXPECT_NE(message.find(needle), std::string::npos) << message;
  }
}

json with(json config, const std::string& key, const json& value) {
  config[key] = value;
  return config;
}
json without(json config, const std::string& key) {
  config.erase(key);
  return config;
}

TEST(ModelConfig, TinyQwen2Fixture) {
  const ModelConfig c = ModelConfig::load(kTinyQwen2 + "/config.json");
  EXPECT_EQ(c.arch, Arch::Qwen2);
  EXPECT_EQ(c.model_type, "qwen2");
  EXPECT_EQ(c.architecture, "Qwen2ForCausalLM");
  EXPECT_EQ(c.vocab_size, 300);
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.intermediate_size, 128);
  EXPECT_EQ(c.num_hidden_layers, 2);
  EXPECT_EQ(c.num_attention_heads, 4);
  EXPECT_EQ(c.num_key_value_heads, 2);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.max_position_embeddings, 512);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000);
  EXPECT_FALSE(c.rope_scaling.has_value());
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_TRUE(c.attention_bias);
  EXPECT_FALSE(c.o_proj_bias);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_EQ(c.torch_dtype, "float32");
  EXPECT_TRUE(c.eos_token_ids.empty());
  EXPECT_FALSE(c.bos_token_id.has_value());

  // The architecture's parameters are exactly the checkpoint's tensors.
  const CheckpointFiles files = CheckpointFiles::open(kTinyQwen2);
  std::vector<std::string> expected_names;
  for (const auto& [name, shape] : c.parameter_shapes()) {
    expected_names.push_back(name);
    ASSERT_NE(files.find(name), nullptr) << name;
    EXPECT_EQ(files.find(name)->shape, shape) << name;
  }
  std::sort(expected_names.begin(), expected_names.end());
  EXPECT_EQ(expected_names, files.names());
  EXPECT_NO_THROW(check_tensors(c, files));
}

TEST(ModelConfig, Llama32_1B) {
  const ModelConfig c = ModelConfig::from_json(kLlama32_1B, "llama/config.json");
  EXPECT_EQ(c.arch, Arch::Llama);
  EXPECT_EQ(arch_name(c.arch), "LlamaForCausalLM");
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.num_key_value_heads, 8);
  EXPECT_EQ(c.max_position_embeddings, 131072);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_DOUBLE_EQ(c.rope_theta, 500000);
  ASSERT_TRUE(c.rope_scaling.has_value());
  EXPECT_EQ(c.rope_scaling->type, "llama3");
  EXPECT_DOUBLE_EQ(c.rope_scaling->factor, 32);
  EXPECT_DOUBLE_EQ(c.rope_scaling->low_freq_factor, 1);
  EXPECT_DOUBLE_EQ(c.rope_scaling->high_freq_factor, 4);
  EXPECT_EQ(c.rope_scaling->original_max_position_embeddings, 8192);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_EQ(c.torch_dtype, "bfloat16");
  EXPECT_EQ(c.eos_token_ids, std::vector<int64_t>{128001});
  EXPECT_EQ(c.bos_token_id, 128000);

  const auto shapes = shape_map(c);
  EXPECT_EQ(shapes.size(), 2u + 16 * 9);
  EXPECT_EQ(shapes.at("model.layers.15.self_attn.k_proj.weight"), (std::vector<int64_t>{512, 2048}));
  EXPECT_EQ(shapes.at("model.layers.0.mlp.down_proj.weight"), (std::vector<int64_t>{2048, 8192}));
  EXPECT_EQ(shapes.count("model.layers.0.self_attn.q_proj.bias"), 0u);
  EXPECT_EQ(shapes.count("lm_head.weight"), 0u);
  EXPECT_EQ(c.num_parameters(), 1235814400);  // Llama-3.2-1B's published count

  // The Instruct model lists three end tokens; the legacy "type" key still names the scaling.
  json instruct = with(kLlama32_1B, "eos_token_id", {128001, 128008, 128009});
  instruct["rope_scaling"].erase("rope_type");
  instruct["rope_scaling"]["type"] = "llama3";
  const ModelConfig i = ModelConfig::from_json(instruct, "instruct");
  EXPECT_EQ(i.eos_token_ids, (std::vector<int64_t>{128001, 128008, 128009}));
  EXPECT_EQ(i.rope_scaling->type, "llama3");
}

TEST(ModelConfig, Qwen3_06B) {
  const ModelConfig c = ModelConfig::from_json(kQwen3_06B, "qwen3/config.json");
  EXPECT_EQ(c.arch, Arch::Qwen3);
  EXPECT_EQ(c.head_dim, 128);  // not hidden_size / heads = 64
  EXPECT_TRUE(c.qk_norm);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);  // an integer in the file
  EXPECT_FALSE(c.rope_scaling.has_value());
  EXPECT_EQ(c.eos_token_ids, std::vector<int64_t>{151645});

  const auto shapes = shape_map(c);
  EXPECT_EQ(shapes.size(), 2u + 28 * 11);
  EXPECT_EQ(shapes.at("model.layers.0.self_attn.q_proj.weight"), (std::vector<int64_t>{2048, 1024}));
  EXPECT_EQ(shapes.at("model.layers.0.self_attn.k_proj.weight"), (std::vector<int64_t>{1024, 1024}));
  EXPECT_EQ(shapes.at("model.layers.0.self_attn.o_proj.weight"), (std::vector<int64_t>{1024, 2048}));
  EXPECT_EQ(shapes.at("model.layers.27.self_attn.q_norm.weight"), (std::vector<int64_t>{128}));
  EXPECT_EQ(shapes.at("model.layers.27.self_attn.k_norm.weight"), (std::vector<int64_t>{128}));
  EXPECT_EQ(shapes.count("model.layers.0.self_attn.q_proj.bias"), 0u);
  EXPECT_EQ(c.num_parameters(), 596049920);  // Qwen3-0.6B's count (tied lm_head not counted twice)

  // Qwen3Config's head_dim default is 128 whatever the hidden size.
  EXPECT_EQ(ModelConfig::from_json(without(kQwen3_06B, "head_dim"), "q").head_dim, 128);
  const ModelConfig biased = ModelConfig::from_json(with(kQwen3_06B, "attention_bias", true), "q");
  EXPECT_EQ(shape_map(biased).at("model.layers.0.self_attn.o_proj.bias"), std::vector<int64_t>{1024});
}

TEST(ModelConfig, TransformersDefaults) {
  const json minimal = {{"model_type", "llama"},    {"vocab_size", 1000},     {"hidden_size", 256},
                        {"intermediate_size", 512}, {"num_hidden_layers", 2}, {"num_attention_heads", 8}};
  const ModelConfig c = ModelConfig::from_json(minimal, "minimal");
  EXPECT_EQ(c.architecture, "LlamaForCausalLM");
  EXPECT_EQ(c.num_key_value_heads, 8);
  EXPECT_EQ(c.head_dim, 32);
  EXPECT_EQ(c.max_position_embeddings, 2048);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_EQ(c.torch_dtype, "");
  EXPECT_EQ(shape_map(c).at("lm_head.weight"), (std::vector<int64_t>{1000, 256}));

  // The class name alone is enough, and null means unset as in transformers.
  json by_class = with(without(minimal, "model_type"), "architectures", {"Qwen2ForCausalLM"});
  by_class["num_key_value_heads"] = nullptr;
  by_class["dtype"] = "bfloat16";  // the key's newer name
  const ModelConfig q = ModelConfig::from_json(by_class, "by_class");
  EXPECT_EQ(q.arch, Arch::Qwen2);
  EXPECT_EQ(q.max_position_embeddings, 32768);
  EXPECT_EQ(q.num_key_value_heads, 8);
  EXPECT_EQ(q.torch_dtype, "bfloat16");
  EXPECT_EQ(shape_map(q).at("model.layers.1.self_attn.v_proj.bias"), std::vector<int64_t>{256});
  EXPECT_EQ(shape_map(q).count("model.layers.1.self_attn.o_proj.bias"), 0u);
}

TEST(ModelConfig, Errors) {
  const std::vector<std::string> supported{"Qwen2ForCausalLM", "LlamaForCausalLM", "Qwen3ForCausalLM"};
  auto plus = [](std::vector<std::string> a, const std::vector<std::string>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  expect_config_error(with(with(kLlama32_1B, "model_type", "mistral"), "architectures", {"MistralForCausalLM"}),
                      plus(supported, {"'model_type'", "mistral"}));
  expect_config_error(with(kQwen3_06B, "architectures", {"Qwen3ForSequenceClassification"}),
                      plus(supported, {"'architectures'", "Qwen3ForSequenceClassification"}));
  expect_config_error(without(without(kQwen3_06B, "model_type"), "architectures"), {"'model_type'", "missing"});
  expect_config_error(without(kQwen3_06B, "hidden_size"), {"'hidden_size'", "missing"});
  expect_config_error(with(kQwen3_06B, "hidden_size", nullptr), {"'hidden_size'", "missing"});
  expect_config_error(with(kQwen3_06B, "hidden_size", "1024"), {"'hidden_size'", "integer", "string"});
  expect_config_error(with(kQwen3_06B, "vocab_size", 0), {"'vocab_size'", "positive"});
  expect_config_error(with(kQwen3_06B, "rope_theta", "big"), {"'rope_theta'", "number"});
  expect_config_error(with(kQwen3_06B, "tie_word_embeddings", "yes"), {"'tie_word_embeddings'", "true or false"});
  expect_config_error(with(kQwen3_06B, "num_key_value_heads", 3),
                      {"'num_key_value_heads'", "not divisible", "16", "3"});
  expect_config_error(with(without(kLlama32_1B, "head_dim"), "num_attention_heads", 24),
                      {"'hidden_size'", "2048", "not divisible", "24", "head_dim"});
  expect_config_error(with(kQwen3_06B, "head_dim", 127), {"'head_dim'", "even"});
  expect_config_error(with(kQwen3_06B, "eos_token_id", "</s>"), {"'eos_token_id'", "integer"});
  expect_config_error(with(kLlama32_1B, "mlp_bias", true), {"'mlp_bias'"});
  expect_config_error(with(kQwen3_06B, "rope_scaling", {{"rope_type", "yarn"}, {"factor", 4.0}}),
                      {"'rope_scaling.rope_type'", "yarn", "llama3"});
  json no_factor = kLlama32_1B;
  no_factor["rope_scaling"].erase("factor");
  expect_config_error(no_factor, {"'rope_scaling.factor'", "missing"});
  expect_config_error(json::array(), {"not a JSON object"});

  const fs::path dir = fresh_dir("load_errors");
  EXPECT_THROW(ModelConfig::load((dir / "absent.json").string()), ModelConfigError);
  std::ofstream(dir / "bad.json") << "{\"vocab_size\": ";
  try {
    ModelConfig::load((dir / "bad.json").string());
    ADD_FAILURE() << "no error";
  } catch (const ModelConfigError& e) {
    EXPECT_NE(std::string(e.what()).find((dir / "bad.json").string()), std::string::npos) << e.what();
  }
}

TEST(ModelConfig, ToJsonWritesBackRawWithUpdates) {
  ModelConfig c = ModelConfig::from_json(kLlama32_1B, "llama");
  EXPECT_EQ(c.to_json(), kLlama32_1B);  // nothing changed, nothing rewritten
  c.vocab_size = 128300;
  c.eos_token_ids = {1, 2};
  c.rope_scaling->factor = 8;
  const json out = c.to_json();
  EXPECT_EQ(out.at("vocab_size"), 128300);
  EXPECT_EQ(out.at("eos_token_id"), json({1, 2}));
  EXPECT_EQ(out.at("rope_scaling").at("factor"), 8.0);
  EXPECT_EQ(out.at("transformers_version"), "4.45.0.dev0");  // keys we do not model survive
  const ModelConfig again = ModelConfig::from_json(out, "again");
  EXPECT_EQ(again.vocab_size, 128300);
  EXPECT_EQ(again.parameter_shapes(), c.parameter_shapes());

  // The fixture keeps its nulls and gains no head_dim.
  const ModelConfig q = ModelConfig::load(kTinyQwen2 + "/config.json");
  const json raw_out = q.to_json();
  EXPECT_FALSE(raw_out.contains("head_dim"));
  EXPECT_TRUE(raw_out.at("rope_scaling").is_null());
  EXPECT_TRUE(raw_out.at("eos_token_id").is_null());
  EXPECT_EQ(raw_out, q.raw);
  EXPECT_EQ(ModelConfig::from_json(kQwen3_06B, "q3").to_json(), kQwen3_06B);
}

// transformers 5 saves RoPE settings only inside rope_parameters: read from there (its rope_theta
// before a top-level one, as transformers reads them) and written back there, not beside it.
TEST(ModelConfig, Transformers5RopeParametersReadAndWrittenInPlace) {
  json llama = kLlama32_1B;  // as transformers 5 saves Llama-3.2-1B
  llama.erase("rope_scaling");
  llama.erase("rope_theta");
  llama["rope_parameters"] = {{"factor", 32.0}, {"high_freq_factor", 4.0}, {"low_freq_factor", 1.0},
                              {"original_max_position_embeddings", 8192}, {"rope_theta", 500000.0},
                              {"rope_type", "llama3"}};
  ModelConfig c = ModelConfig::from_json(llama, "llama5");
  EXPECT_EQ(c.rope_theta, 500000.0);
  ASSERT_TRUE(c.rope_scaling.has_value());
  EXPECT_EQ(c.rope_scaling->type, "llama3");
  EXPECT_EQ(c.rope_scaling->factor, 32.0);
  EXPECT_EQ(c.to_json(), llama);
  c.rope_theta = 1e6;
  c.rope_scaling.reset();
  const json out = c.to_json();
  EXPECT_EQ(out.at("rope_parameters"), json({{"rope_theta", 1e6}, {"rope_type", "default"}}));
  EXPECT_FALSE(out.contains("rope_theta"));
  EXPECT_FALSE(out.contains("rope_scaling"));
  llama["rope_theta"] = 10000.0;  // stale beside it: rope_parameters wins
  EXPECT_EQ(ModelConfig::from_json(llama, "llama5").rope_theta, 500000.0);

  json qwen = kQwen3_06B;  // rope_scaling null: rope_parameters holds the settings, its type defaulted
  qwen.erase("rope_theta");
  qwen["rope_parameters"] = {{"rope_theta", 5e6}};
  const ModelConfig q = ModelConfig::from_json(qwen, "qwen5");
  EXPECT_EQ(q.rope_theta, 5e6);
  EXPECT_FALSE(q.rope_scaling.has_value());
  qwen["rope_parameters"] = {{"full_attention", {{"rope_theta", 5e6}, {"rope_type", "default"}}}};
  expect_config_error(qwen, {"'rope_parameters.full_attention'", "per layer type"});
}

// The fixture's tensors, rewritten into `dir` after `edit`.
CheckpointFiles edited_fixture(const std::string& name, const std::function<void(std::vector<TensorView>&)>& edit) {
  const auto source = SafetensorsFile::open(kTinyQwen2 + "/model.safetensors");
  std::vector<TensorView> tensors = source->tensors();
  edit(tensors);
  const fs::path dir = fresh_dir(name);
  write_sharded(dir.string(), tensors, 200 * 1000);  // two shards
  return CheckpointFiles::open(dir.string());
}

std::string check_error(const ModelConfig& config, const CheckpointFiles& files) {
  try {
    check_tensors(config, files);
  } catch (const CheckpointError& e) {
    return e.what();
  }
  ADD_FAILURE() << "check_tensors accepted " << files.dir();
  return "";
}

TEST(CheckTensors, ReportsMissingAndMisshapenTensors) {
  const ModelConfig config = ModelConfig::load(kTinyQwen2 + "/config.json");
  const CheckpointFiles reshaped = edited_fixture("reshaped", [](std::vector<TensorView>& tensors) {
    for (TensorView& t : tensors) {
      if (t.name == "model.layers.1.self_attn.q_proj.weight") t.shape = {32, 128};  // same bytes
    }
    tensors.erase(std::remove_if(tensors.begin(), tensors.end(),
                                 [](const TensorView& t) { return t.name == "model.norm.weight"; }),
                  tensors.end());
  });
  const std::string message = check_error(config, reshaped);
  EXPECT_NE(message.find(reshaped.dir()), std::string::npos) << message;
  EXPECT_NE(message.find("2 problems"), std::string::npos) << message;
  EXPECT_NE(message.find("missing tensor 'model.norm.weight' of shape [64]"), std::string::npos) << message;
  const std::string file = reshaped.file_of("model.layers.1.self_attn.q_proj.weight");
  EXPECT_NE(message.find("tensor 'model.layers.1.self_attn.q_proj.weight' in " + file +
                         " has shape [32, 128], expected [64, 64]"),
            std::string::npos)
      << message;

  // Untied, the config wants an lm_head the checkpoint lacks.
  ModelConfig untied = config;
  untied.tie_word_embeddings = false;
  EXPECT_NE(check_error(untied, CheckpointFiles::open(kTinyQwen2)).find("'lm_head.weight'"), std::string::npos);

  // A config for fewer layers than the checkpoint holds belongs to another model.
  ModelConfig shallow = config;
  shallow.num_hidden_layers = 1;
  EXPECT_NE(check_error(shallow, CheckpointFiles::open(kTinyQwen2)).find("num_hidden_layers 1"), std::string::npos);
}

TEST(CheckTensors, AcceptsLmHeadWhenTiedAndRejectsIntegerWeights) {
  const ModelConfig config = ModelConfig::load(kTinyQwen2 + "/config.json");
  const CheckpointFiles with_head = edited_fixture("with_head", [](std::vector<TensorView>& tensors) {
    TensorView head = tensors.front();  // model.embed_tokens.weight
    head.name = "lm_head.weight";
    tensors.push_back(head);
  });
  EXPECT_GT(with_head.files().size(), 1u);
  EXPECT_NO_THROW(check_tensors(config, with_head));

  const CheckpointFiles integer = edited_fixture("integer", [](std::vector<TensorView>& tensors) {
    for (TensorView& t : tensors) {
      if (t.name == "model.norm.weight") t.dtype = DType::I32;
    }
  });
  const std::string message = check_error(config, integer);
  EXPECT_NE(message.find("'model.norm.weight'"), std::string::npos) << message;
  EXPECT_NE(message.find("I32"), std::string::npos) << message;
}

}  // namespace
