#include "app/model_commands.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <torch/types.h>

#include "config/config.h"
#include "data/dataset.h"
#include "model/device.h"
#include "model/dtype.h"
#include "model/engine.h"
#include "model/presets.h"
#include "model/stop_ids.h"
#include "model/threads.h"
#include "model/lora_files.h"
#include "model/weights.h"
#include "tokenizer/byte_tokenizer.h"
#include "tokenizer/chat_prompt.h"
#include "tokenizer/tokenizer.h"
#include "trainer/settings.h"

namespace grpo::app {

namespace fs = std::filesystem;

namespace {

std::string one(const config::ParseResult& parsed, const std::string& name, const std::string& fallback = "") {
  auto it = parsed.extras.find(name);
  if (it == parsed.extras.end()) return fallback;
  if (it->second.size() != 1) throw config::ConfigError(fmt::format("--{} takes one value", name));
  return it->second[0];
}

// `text` as a whole number, or nullopt when it is not one or does not fit in 64 bits.
std::optional<int64_t> whole_number(const std::string& text) {
  try {
    size_t used = 0;
    const long long n = std::stoll(text, &used);
    if (used == text.size()) return n;
  } catch (const std::exception&) {  // invalid_argument, out_of_range
  }
  return std::nullopt;
}

// Copies tokenizer files from a tokenizer.json path or a directory holding one.
void copy_tokenizer(const std::string& source, const fs::path& out) {
  fs::path dir = fs::is_directory(source) ? fs::path(source) : fs::path(source).parent_path();
  fs::path json = fs::is_directory(source) ? dir / "tokenizer.json" : fs::path(source);
  if (!fs::exists(json)) throw config::ConfigError(fmt::format("--tokenizer: no tokenizer.json at '{}'", source));
  fs::copy_file(json, out / "tokenizer.json", fs::copy_options::overwrite_existing);
  for (const char* extra : {"tokenizer_config.json", "chat_template.jinja"})
    if (fs::exists(dir / extra)) fs::copy_file(dir / extra, out / extra, fs::copy_options::overwrite_existing);
}

// Every string of a row (message contents, roles, problem, solution...): the
// text the tokenizer will meet.
void collect_strings(const nlohmann::json& value, std::vector<std::string>* out) {
  if (value.is_string()) out->push_back(value.get<std::string>());
  else if (value.is_structured())
    for (const auto& item : value) collect_strings(item, out);
}

// --train_tokenizer DATASET [...] --vocab_size N: merges learned from the
// datasets' strings, up to N tokens in all.
std::vector<tok::Merge> learn_merges(const config::ParseResult& parsed) {
  const auto files = parsed.extras.find("train_tokenizer");
  const std::string size_text = one(parsed, "vocab_size");
  if (files == parsed.extras.end()) {
    if (!size_text.empty()) throw config::ConfigError("--vocab_size sizes a trained tokenizer: give --train_tokenizer DATASET too");
    return {};
  }
  if (files->second.empty()) throw config::ConfigError("--train_tokenizer needs a dataset (e.g. rows.jsonl)");
  size_t vocab_size = 512;
  if (!size_text.empty()) {
    const int64_t n = whole_number(size_text).value_or(-1);
    if (n <= tok::kByteTokenizerVocabSize)
      throw config::ConfigError(fmt::format("--vocab_size '{}': expected a whole number above {} (the bytes and the "
                                            "chat tokens)", size_text, tok::kByteTokenizerVocabSize));
    vocab_size = static_cast<size_t>(n);
  }
  std::vector<std::string> texts;
  size_t bytes = 0;
  for (const std::string& spec : files->second)
    for (const data::Row& row : data::load_rows(spec)) collect_strings(row.columns, &texts);
  for (const std::string& t : texts) bytes += t.size();
  if (bytes == 0)
    throw config::ConfigError(fmt::format("--train_tokenizer {}: the rows hold no text to learn merges from (a "
                                          "tokenizer is learned from every string of every row)",
                                          fmt::join(files->second, " ")));
  const size_t asked = vocab_size - tok::kByteTokenizerVocabSize;
  spdlog::info("tokenizer: learning up to {} merges from {} strings ({} bytes)", asked, texts.size(), bytes);
  std::vector<tok::Merge> merges = tok::train_bpe_merges(texts, tok::byte_level_pre_tokenizer(), asked);
  if (merges.size() < asked)
    spdlog::warn("tokenizer: learned {} merges where --vocab_size {} asks for {}: no pair of tokens occurs twice "
                 "more in the rows, so the vocabulary has {} tokens",
                 merges.size(), vocab_size, asked, merges.size() + tok::kByteTokenizerVocabSize);
  return merges;
}

}  // namespace

int run_init_model_command(const std::vector<std::string>& args) {
  config::ParseResult parsed =
      config::parse(args, config::ParseOptions{{"arch", "preset", "out", "tokenizer", "train_tokenizer", "vocab_size", "device"},
                                               0, false});
  const std::string out = one(parsed, "out");
  if (out.empty()) throw config::ConfigError("init-model needs --out DIR (where the new model is written)");
  // The CPU by default: the same --seed gives the same weights on every machine. On a GPU (--device
  // cuda) the draws take a second where the CPU's, serial, take about a minute at 7B; they differ.
  at::Device device = at::kCPU;
  at::ScalarType dtype = at::kFloat;
  try {
    device = model::parse_device(one(parsed, "device", "cpu"), "--device");
    const std::string dtype_name = parsed.config.get_string("torch_dtype");
    if (!dtype_name.empty()) dtype = model::weight_dtype_from_name(dtype_name, "--torch_dtype");
  } catch (const std::invalid_argument& e) {
    throw config::ConfigError(e.what());
  }
  const fs::path dir(out);
  fs::create_directories(dir);
  const std::string tokenizer_source = one(parsed, "tokenizer");
  std::vector<tok::Merge> merges = learn_merges(parsed);
  if (!tokenizer_source.empty() && !merges.empty())
    throw config::ConfigError("--tokenizer copies a tokenizer and --train_tokenizer makes one: give one of them");
  if (tokenizer_source.empty()) tok::write_byte_level_tokenizer(dir.string(), merges);
  else copy_tokenizer(tokenizer_source, dir);
  tok::Tokenizer tokenizer = tok::Tokenizer::from_dir(dir.string());

  nlohmann::json json;
  try {
    json = model::preset_config(one(parsed, "arch", "qwen2"), one(parsed, "preset", "small"),
                                static_cast<int64_t>(tokenizer.vocab_size()));
  } catch (const std::invalid_argument& e) {
    throw config::ConfigError(e.what());
  }
  if (auto eos = tokenizer.eos_id()) json["eos_token_id"] = *eos;
  if (auto bos = tokenizer.bos_id()) json["bos_token_id"] = *bos;
  model::CausalLM lm =  // init_weights draws every weight: nothing is drawn before it
      model::build_empty(model::ModelConfig::from_json(json, (dir / "config.json").string()), device, dtype);
  model::init_weights(*lm, static_cast<uint64_t>(parsed.config.get_int("seed")));
  model::save_model(*lm, dir.string());
  int64_t params = 0;
  for (const auto& p : lm->parameters()) params += p.numel();
  std::printf("wrote %s: %s, %lld parameters, vocab %zu\n", dir.c_str(), lm->config().architecture.c_str(),
              static_cast<long long>(params), tokenizer.vocab_size());
  return 0;
}

int run_generate_command(const std::vector<std::string>& args) {
  config::ParseResult parsed = config::parse(args, config::ParseOptions{{"prompt", "n", "raw"}, 0, false});
  const trainer::EvaluateSettings s = trainer::EvaluateSettings::from(parsed.config, /*needs_data=*/false);
  const std::string& dir = s.model_dir;
  const std::string prompt = one(parsed, "prompt");
  if (prompt.empty()) throw config::ConfigError("generate needs --prompt TEXT");

  model::configure_cpu_threads(s.num_threads);
  tok::Tokenizer tokenizer = tok::Tokenizer::from_dir(dir);
  model::Engine engine(model::load_model_or_adapter(dir, s.dtype, s.device), &tokenizer);  // a LoRA checkpoint too
  model::GenerateRequest request;
  if (parsed.extras.count("raw")) {
    request.prompt_ids = tokenizer.encode(prompt, /*add_special_tokens=*/true);
  } else {  // as a user turn in the model's chat format, after --system if given
    tok::ChatFamily family = tok::chat_family_for(tokenizer, s.prompts.template_name);
    std::vector<tok::ChatMessage> messages;
    if (!s.prompts.system.empty()) messages.push_back({"system", s.prompts.system});
    messages.push_back({"user", prompt});
    request.prompt_ids = tok::encode_chat_prompt(tokenizer, family, messages);
  }
  const std::string n_text = one(parsed, "n", "1");
  const std::optional<int64_t> n = whole_number(n_text);
  if (!n || *n < 1 || *n > 1024)
    throw config::ConfigError(fmt::format("--n '{}': expected a whole number of completions from 1 to 1024", n_text));
  request.n = *n;
  request.seed = s.seed;
  request.stop_ids = model::stop_token_ids(tokenizer, engine.model()->config(), dir);
  model::SamplingParams params;
  params.temperature = s.sampling.temperature;
  params.top_p = s.sampling.top_p;
  params.top_k = s.sampling.top_k;
  params.min_p = s.sampling.min_p;
  params.repetition_penalty = s.sampling.repetition_penalty;
  params.max_new_tokens = s.sampling.max_new_tokens;
  params.stop_strings = s.sampling.stop_strings;

  auto t0 = std::chrono::steady_clock::now();
  std::vector<model::Completion> out = engine.generate({request}, params);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  size_t tokens = 0;
  for (const auto& c : out) {
    tokens += c.ids.size();
    std::printf("--- completion %lld (%zu tokens, %s)\n%s\n", static_cast<long long>(c.index), c.ids.size(),
                c.finish == model::FinishReason::Stop ? "stop" : "length",
                tokenizer.decode_sampled(c.ids, /*skip_special_tokens=*/true).c_str());
  }
  // The weights' own dtype, as loaded: what --torch_dtype asked for, if it was honoured.
  std::fprintf(stderr, "%zu tokens in %.2f s (%.1f tokens/s, %s)\n", tokens, seconds, tokens / seconds,
               model::weight_dtype_name(engine.model()->parameters().front().scalar_type()).c_str());
  return 0;
}

}  // namespace grpo::app
