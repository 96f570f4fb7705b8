// Reading tokenizer.json and tokenizer_config.json into a Tokenizer.
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_impl.h"
#include "util/dangling_link.h"
#include "util/json_input.h"

namespace grpo::tok {
namespace {

using nlohmann::json;

constexpr const char* kSupported = "; grpo supports byte-level BPE (Qwen2/2.5/3, Llama 3)";

std::string read_file(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw TokenizerError(std::string("cannot open ") + what + " '" + path + "': " + std::strerror(errno));
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) throw TokenizerError(std::string("cannot read ") + what + " '" + path + "'");
  return buffer.str();
}

json parse_json(const std::string& path, const char* what) {
  const std::string text = read_file(path, what);
  try {
    return util::parse_json(text, path, /*is_file=*/true);
  } catch (const util::JsonInputError& e) {
    throw TokenizerError(std::string(what) + " " + e.what());
  }
}

bool flag(const json& object, const char* key, bool fallback) {
  const auto it = object.find(key);
  return it != object.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

int32_t checked_id(const json& value, const std::string& source, const std::string& what) {
  if (!value.is_number_integer() || value.get<int64_t>() < 0 || value.get<int64_t>() >= INT32_MAX) {
    throw TokenizerError(source + ": " + what + " has id " + value.dump() + ", not an integer in [0, 2^31-1)");
  }
  return static_cast<int32_t>(value.get<int64_t>());
}

std::unique_ptr<BpeModel> load_model(const json& model, const std::string& source) {
  std::string type;
  if (model.contains("type") && model["type"].is_string()) {
    type = model["type"].get<std::string>();
  } else if (model.contains("merges")) {
    type = "BPE";  // files written by old versions of tokenizers omit the tag
  } else if (model.contains("vocab")) {
    type = model["vocab"].is_array() ? "Unigram" : "WordPiece";
  }
  if (type != "BPE") {
    throw TokenizerError("unsupported tokenizer model '" + type + "' in " + source + kSupported);
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const auto it = model.find(key);
    if (it != model.end() && it->is_string() && !it->get<std::string>().empty()) {
      throw TokenizerError("unsupported BPE option " + std::string(key) + " in " + source + kSupported);
    }
  }
  const auto vocab_it = model.find("vocab");
  if (vocab_it == model.end() || !vocab_it->is_object()) {
    throw TokenizerError(source + ": the BPE model has no \"vocab\" object");
  }
  std::unordered_map<std::string, int32_t> vocab;
  vocab.reserve(vocab_it->size());
  for (const auto& [token, id] : vocab_it->items())
    vocab.emplace(token, checked_id(id, source, "token '" + token + "'"));

  BpeOptions options;
  options.ignore_merges = flag(model, "ignore_merges", false);
  options.fuse_unk = flag(model, "fuse_unk", false);
  const auto unk = model.find("unk_token");
  if (unk != model.end() && unk->is_string()) {
    const auto it = vocab.find(unk->get<std::string>());
    if (it == vocab.end()) {
      throw TokenizerError(source + ": unk_token '" + unk->get<std::string>() + "' is not in the vocabulary");
    }
    options.unk_id = it->second;
  }
  auto bpe = std::make_unique<BpeModel>(std::move(vocab), options, source);

  const auto merges = model.find("merges");
  if (merges == model.end() || !merges->is_array()) {
    throw TokenizerError(source + ": the BPE model has no \"merges\" array");
  }
  size_t rank = 0;
  for (const json& merge : *merges) {
    // Older files write "left right"; newer ones ["left", "right"].
    if (merge.is_string()) {
      const std::string& text = merge.get_ref<const std::string&>();
      const size_t space = text.find(' ');
      if (space == std::string::npos || space == 0 || space + 1 == text.size() ||
          text.find(' ', space + 1) != std::string::npos) {
        throw TokenizerError(source + ": merge #" + std::to_string(rank) + " '" + text +
                             "' is not two tokens separated by one space");
      }
      bpe->add_merge(text.substr(0, space), text.substr(space + 1), rank);
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
      bpe->add_merge(merge[0].get<std::string>(), merge[1].get<std::string>(), rank);
    } else {
      throw TokenizerError(source + ": merge #" + std::to_string(rank) + " " + merge.dump() +
                           " is neither \"left right\" nor [\"left\", \"right\"]");
    }
    ++rank;
  }
  return bpe;
}

void check_decoder(const json& decoder, const std::string& source) {
  if (decoder.is_null()) return;
  const std::string type = decoder.is_object() ? decoder.value("type", std::string()) : std::string();
  if (type == "ByteLevel") return;
  if (type == "Sequence" && decoder.contains("decoders") && decoder["decoders"].is_array()) {
    for (const json& child : decoder["decoders"]) check_decoder(child, source);
    return;
  }
  throw TokenizerError("unsupported decoder '" + (type.empty() ? decoder.dump() : type) + "' in " + source +
                       kSupported);
}

std::vector<AddedToken> load_added_tokens(const json& root, const std::string& source) {
  std::vector<AddedToken> result;
  const auto list = root.find("added_tokens");
  if (list == root.end() || list->is_null()) return result;
  if (!list->is_array()) throw TokenizerError(source + ": \"added_tokens\" is not an array");
  for (const json& entry : *list) {
    if (!entry.is_object() || !entry.contains("content") || !entry["content"].is_string() || !entry.contains("id")) {
      throw TokenizerError(source + ": added token " + entry.dump() + " needs a string \"content\" and an \"id\"");
    }
    AddedToken token;
    token.content = entry["content"].get<std::string>();
    token.id = checked_id(entry["id"], source, "added token '" + token.content + "'");
    token.special = flag(entry, "special", false);
    token.lstrip = flag(entry, "lstrip", false);
    token.rstrip = flag(entry, "rstrip", false);
    token.normalized = flag(entry, "normalized", !token.special);
    token.single_word = flag(entry, "single_word", false);
    result.push_back(std::move(token));
  }
  return result;
}

std::vector<int32_t> special_ids(const json& processor, const std::string& name, const std::string& source) {
  const json& specials = processor.at("special_tokens");
  const auto it = specials.find(name);
  if (it == specials.end() || !it->contains("ids") || !(*it)["ids"].is_array()) {
    throw TokenizerError(source + ": post-processor template uses '" + name + "', which its special_tokens lack");
  }
  std::vector<int32_t> ids;
  for (const json& id : (*it)["ids"]) ids.push_back(checked_id(id, source, "template token '" + name + "'"));
  return ids;
}

// Fills the ids that add_special_tokens puts around a single sequence.
void load_post_processor(const json& processor, const std::string& source, Tokenizer::Impl* impl) {
  if (!processor.is_object()) return;
  const std::string type = processor.value("type", std::string());
  if (type == "Sequence" && processor.contains("processors") && processor["processors"].is_array()) {
    for (const json& child : processor["processors"]) load_post_processor(child, source, impl);
  } else if (type == "TemplateProcessing") {
    const auto single = processor.find("single");
    if (single == processor.end() || !single->is_array()) {
      throw TokenizerError(source + ": TemplateProcessing without a \"single\" template list");
    }
    bool after_sequence = false;
    for (const json& piece : *single) {
      if (piece.contains("Sequence")) {
        after_sequence = true;
      } else if (piece.contains("SpecialToken") && piece["SpecialToken"].contains("id")) {
        const auto ids = special_ids(processor, piece["SpecialToken"]["id"].get<std::string>(), source);
        auto& target = after_sequence ? impl->template_suffix : impl->template_prefix;
        target.insert(target.end(), ids.begin(), ids.end());
      } else {
        throw TokenizerError(source + ": unrecognised post-processor template piece " + piece.dump());
      }
    }
    impl->has_template = true;
  } else if (type == "RobertaProcessing" || type == "BertProcessing") {
    // Both store [token, id] pairs for the tokens around a single sequence.
    impl->template_prefix = {checked_id(processor.at("cls").at(1), source, "cls token")};
    impl->template_suffix = {checked_id(processor.at("sep").at(1), source, "sep token")};
    impl->has_template = true;
  }
}

void build_id_tables(const std::vector<AddedToken>& added, Tokenizer::Impl* impl) {
  size_t size = 0;
  for (const auto& [token, id] : impl->model->vocab()) size = std::max(size, static_cast<size_t>(id) + 1);
  for (const AddedToken& token : added) size = std::max(size, static_cast<size_t>(token.id) + 1);
  impl->tokens.assign(size, std::string());
  impl->bytes.assign(size, std::string());
  impl->present.assign(size, 0);
  impl->special.assign(size, 0);
  const ByteLevel& byte_level = ByteLevel::instance();
  // The ByteLevel decoder maps a token through the byte alphabet only when
  // all of its characters belong to it, and keeps the text as is otherwise.
  const auto set = [&](int32_t id, const std::string& text) {
    const auto i = static_cast<size_t>(id);
    impl->tokens[i] = text;
    impl->bytes[i].clear();
    if (!byte_level.decode(text, &impl->bytes[i])) impl->bytes[i] = text;
    impl->present[i] = 1;
  };
  for (const auto& [token, id] : impl->model->vocab()) set(id, token);
  for (const AddedToken& token : added) {
    set(token.id, token.content);
    impl->special[static_cast<size_t>(token.id)] = token.special ? 1 : 0;
  }
}

// bos_token and friends are a string, {"content": ...}, or null.
std::optional<std::string> token_text(const json& config, const char* key) {
  const auto it = config.find(key);
  if (it == config.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
    return (*it)["content"].get<std::string>();
  }
  return std::nullopt;
}

std::shared_ptr<Tokenizer::Impl> load_tokenizer_json(const std::string& path) {
  const json root = parse_json(path, "tokenizer file");
  auto impl = std::make_shared<Tokenizer::Impl>();
  impl->source = path;
  try {
    if (!root.is_object()) throw TokenizerError("tokenizer file '" + path + "' is not a JSON object");
    const auto model = root.find("model");
    if (model == root.end() || !model->is_object()) {
      throw TokenizerError("tokenizer file '" + path + "' has no \"model\" object");
    }
    impl->model = load_model(*model, path);
    impl->normalizer = Normalizer::from_json(root.value("normalizer", json()), path);
    impl->pre_tokenizer = PreTokenizer::from_json(root.value("pre_tokenizer", json()), path);
    if (!impl->pre_tokenizer.has_byte_level()) {
      throw TokenizerError("tokenizer in " + path + " is BPE but not byte-level (no ByteLevel pre-tokenizer)" +
                           kSupported);
    }
    check_decoder(root.value("decoder", json()), path);
    load_post_processor(root.value("post_processor", json()), path, impl.get());

    const std::vector<AddedToken> added = load_added_tokens(root, path);
    build_id_tables(added, impl.get());
    for (const AddedToken& token : added) {
      impl->added_ids[token.content] = token.id;
      if (!token.normalized) {
        impl->raw_matcher.add(token, token.content);
        continue;
      }
      // Normalized tokens are looked for in normalized text, so their
      // pattern must be normalized the same way.
      std::string pattern;
      if (!impl->normalizer.apply(token.content, &pattern)) pattern = token.content;
      impl->normalized_matcher.add(token, pattern);
    }
  } catch (const json::exception& e) {
    throw TokenizerError("malformed tokenizer file '" + path + "': " + e.what());
  }
  return impl;
}

int32_t lookup_id(const Tokenizer::Impl& impl, const std::string& text) {
  const auto added = impl.added_ids.find(text);
  return added != impl.added_ids.end() ? added->second : impl.model->token_to_id(text);
}

// Applies tokenizer_config.json: the special tokens transformers resolves,
// the add_*_token flags and the chat template.
void apply_config(const json& config, const std::string& source, Tokenizer::Impl* impl) {
  if (!config.is_object()) throw TokenizerError("tokenizer config '" + source + "' is not a JSON object");
  const auto resolve = [&](const char* key) -> std::optional<int32_t> {
    const auto text = token_text(config, key);
    if (!text) return std::nullopt;
    const int32_t id = lookup_id(*impl, *text);
    if (id < 0) throw TokenizerError(source + ": " + key + " '" + *text + "' is not a token of " + impl->source);
    // transformers counts these among the special tokens that
    // skip_special_tokens drops.
    impl->special[static_cast<size_t>(id)] = 1;
    return id;
  };
  impl->bos = resolve("bos_token");
  impl->eos = resolve("eos_token");
  impl->pad = resolve("pad_token");
  // Only chat templates read unk_token; a byte-level vocabulary may well lack it.
  if (const auto unk = token_text(config, "unk_token"); unk && lookup_id(*impl, *unk) >= 0)
    impl->unk = lookup_id(*impl, *unk);
  impl->add_bos = flag(config, "add_bos_token", false);
  impl->add_eos = flag(config, "add_eos_token", false);
  impl->clean_up_spaces = flag(config, "clean_up_tokenization_spaces", false);
  const auto extra = config.find("additional_special_tokens");
  if (extra != config.end() && extra->is_array()) {
    for (const json& entry : *extra) {
      std::string text;
      if (entry.is_string()) text = entry.get<std::string>();
      if (entry.is_object() && entry.contains("content") && entry["content"].is_string()) {
        text = entry["content"].get<std::string>();
      }
      const int32_t id = lookup_id(*impl, text);
      if (id >= 0) impl->special[static_cast<size_t>(id)] = 1;
    }
  }
  const auto templ = config.find("chat_template");
  if (templ != config.end() && templ->is_string()) {
    impl->chat_template = templ->get<std::string>();
  } else if (templ != config.end() && templ->is_array()) {
    // Several named templates: the one called "default", else the first.
    bool found_default = false;
    for (const json& entry : *templ) {
      if (!entry.is_object() || !entry.contains("template") || !entry["template"].is_string()) continue;
      const bool is_default = entry.value("name", json()) == json("default");
      if (found_default || (!is_default && !impl->chat_template.empty())) continue;
      impl->chat_template = entry["template"].get<std::string>();
      found_default = is_default;
    }
  }
}

}  // namespace

Tokenizer Tokenizer::from_file(const std::string& path) { return Tokenizer(load_tokenizer_json(path)); }

Tokenizer Tokenizer::from_dir(const std::string& model_dir) {
  namespace fs = std::filesystem;
  const fs::path dir(model_dir);
  const fs::path tokenizer_path = dir / "tokenizer.json";
  std::error_code ec;
  for (const char* name : {"tokenizer.json", "tokenizer_config.json", "chat_template.jinja"})
    if (const std::string dangling = util::dangling_link_problem(dir / name); !dangling.empty())
      throw TokenizerError(dangling);
  if (!fs::is_regular_file(tokenizer_path, ec)) {
    throw TokenizerError("no tokenizer.json in '" + model_dir + "' (grpo reads Hugging Face fast-tokenizer files)");
  }
  const std::shared_ptr<Tokenizer::Impl> impl = load_tokenizer_json(tokenizer_path.string());

  const fs::path config_path = dir / "tokenizer_config.json";
  if (fs::is_regular_file(config_path, ec)) {
    const json config = parse_json(config_path.string(), "tokenizer config");
    try {
      apply_config(config, config_path.string(), impl.get());
    } catch (const json::exception& e) {
      throw TokenizerError("malformed tokenizer config '" + config_path.string() + "': " + e.what());
    }
  }
  const fs::path jinja_path = dir / "chat_template.jinja";
  if (impl->chat_template.empty() && fs::is_regular_file(jinja_path, ec)) {
    impl->chat_template = read_file(jinja_path.string(), "chat template");
  }
  return Tokenizer(impl);
}

}  // namespace grpo::tok
