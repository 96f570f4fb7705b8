#include "tokenizer/byte_tokenizer.h"

#include <filesystem>
#include <fstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "tokenizer/byte_level.h"

namespace grpo::tok {

namespace {

// Qwen's pre-tokenizer split: letters, single digits, punctuation runs,
// newlines and spaces; bytes are then mapped to the byte-level alphabet.
constexpr const char* kSplitRegex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
    "\\s+(?!\\S)|\\s+";

// ChatML without a default system prompt.
constexpr const char* kChatTemplate =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + "
    "'\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

const char* const kSpecial[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};

void write_json(const std::filesystem::path& path, const nlohmann::json& j) {
  std::ofstream out(path);
  if (!out) throw std::runtime_error("cannot write " + path.string());
  out << j.dump(2) << "\n";
}

nlohmann::json pre_tokenizer_json() {
  return {{"type", "Sequence"},
          {"pretokenizers",
           {{{"type", "Split"}, {"pattern", {{"Regex", kSplitRegex}}}, {"behavior", "Isolated"}, {"invert", false}},
            {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}}}}};
}

}  // namespace

PreTokenizer byte_level_pre_tokenizer() { return PreTokenizer::from_json(pre_tokenizer_json(), "the byte-level tokenizer"); }

void write_byte_level_tokenizer(const std::string& dir, const std::vector<Merge>& merges) {
  std::filesystem::create_directories(dir);
  const ByteLevel& bl = ByteLevel::instance();
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) vocab[bl.utf8_of(static_cast<uint8_t>(b))] = b;
  nlohmann::json added = nlohmann::json::array();
  for (int i = 0; i < 3; ++i)
    added.push_back({{"id", 256 + i}, {"content", kSpecial[i]}, {"single_word", false}, {"lstrip", false},
                     {"rstrip", false}, {"normalized", false}, {"special", true}});
  nlohmann::json merge_list = nlohmann::json::array();
  int next_id = kByteTokenizerVocabSize;
  for (const Merge& merge : merges) {
    merge_list.push_back({merge.first, merge.second});
    const std::string token = merge.first + merge.second;
    if (!vocab.contains(token)) vocab[token] = next_id++;  // two merges can spell the same token
  }
  nlohmann::json tokenizer = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer", {{"type", "NFC"}}},
      {"pre_tokenizer", pre_tokenizer_json()},
      {"post_processor", nullptr},
      {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}}},
      {"model",
       {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", ""},
        {"end_of_word_suffix", ""}, {"fuse_unk", false}, {"byte_fallback", false}, {"ignore_merges", false},
        {"vocab", vocab}, {"merges", merge_list}}}};
  write_json(std::filesystem::path(dir) / "tokenizer.json", tokenizer);

  nlohmann::json config = {{"add_bos_token", false},       {"bos_token", nullptr},
                           {"eos_token", "<|im_end|>"},    {"pad_token", "<|endoftext|>"},
                           {"chat_template", kChatTemplate}, {"model_max_length", 32768},
                           {"tokenizer_class", "Qwen2Tokenizer"}};
  write_json(std::filesystem::path(dir) / "tokenizer_config.json", config);
}

}  // namespace grpo::tok
