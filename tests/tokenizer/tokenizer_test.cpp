// Tokenizer tests: the reference cases of Qwen3's tokenizer, behaviour that
// users of Hugging Face tokenizers rely on, and malformed-input errors.
#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace fs = std::filesystem;
using grpo::tok::Tokenizer;
using grpo::tok::TokenizerError;
using nlohmann::json;

namespace {

const std::string kDataDir = GRPO_TEST_DATA_DIR;

json read_json(const std::string& path) {
  std::ifstream in(path);
  return json::parse(in);
}

void write_file(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

// A scratch directory removed at the end of the test binary.
const fs::path& temp_dir() {
  static const fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / ("grpo_tokenizer_test_" + std::to_string(::getpid()));
    fs::create_directories(d);
    std::atexit([] {
      std::error_code ec;
      fs::remove_all(fs::temp_directory_path() / ("grpo_tokenizer_test_" + std::to_string(::getpid())), ec);
    });
    return d;
  }();
  return dir;
}

// Qwen3's tokenizer is 11 MB of JSON: load it once for the whole binary, as
// a model directory (tokenizer.json + tokenizer_config.json).
class Qwen3 : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (tokenizer_ != nullptr) return;
    const fs::path dir = temp_dir() / "qwen3";
    fs::create_directories(dir);
    fs::create_symlink(kDataDir + "/qwen3-tokenizer.json", dir / "tokenizer.json");
    fs::create_symlink(kDataDir + "/qwen3-tokenizer_config.json", dir / "tokenizer_config.json");
    tokenizer_ = new Tokenizer(Tokenizer::from_dir(dir.string()));
  }
  // A tokenizer that did not load fails every test of the suite, never skips it.
  void SetUp() override { ASSERT_NE(tokenizer_, nullptr) << "the Qwen3 tokenizer in " << kDataDir << " did not load"; }
  static const Tokenizer& tok() { return *tokenizer_; }

 private:
  static inline Tokenizer* tokenizer_ = nullptr;
};

// JSON-escaped, so that failures show control characters and stray bytes.
std::string show(const std::string& text) { return json(text).dump(-1, ' ', true, json::error_handler_t::replace); }

TEST_F(Qwen3, EncodeCases) {
  const json cases = read_json(kDataDir + "/tokenizer_cases.json");
  size_t passed = 0;
  for (const json& c : cases.at("encode")) {
    const std::string text = c.at("text");
    const auto expected = c.at("ids").get<std::vector<int32_t>>();
    const std::vector<int32_t> ids = tok().encode(text);
    const std::string decoded = tok().decode(ids);
    EXPECT_EQ(ids, expected) << "text " << show(text);
    EXPECT_EQ(decoded, c.at("decoded").get<std::string>()) << "text " << show(text);
    if (ids == expected && decoded == c.at("decoded").get<std::string>()) ++passed;
  }
  std::printf("encode cases passed: %zu/%zu\n", passed, cases.at("encode").size());
  EXPECT_EQ(passed, cases.at("encode").size());
}

TEST_F(Qwen3, DecodeCases) {
  const json cases = read_json(kDataDir + "/tokenizer_cases.json");
  size_t passed = 0;
  for (const json& c : cases.at("decode")) {
    const auto ids = c.at("ids").get<std::vector<int32_t>>();
    const std::string decoded = tok().decode(ids);
    EXPECT_EQ(decoded, c.at("decoded").get<std::string>()) << "ids " << c.at("ids").dump();
    if (decoded == c.at("decoded").get<std::string>()) ++passed;
  }
  std::printf("decode cases passed: %zu/%zu\n", passed, cases.at("decode").size());
  EXPECT_EQ(passed, cases.at("decode").size());
}

TEST_F(Qwen3, SpecialTokensAreMatchedBeforeBpe) {
  const std::vector<int32_t> expected{151644, 872, 198, 6023, 151645};
  EXPECT_EQ(tok().encode("<|im_start|>user\nhi<|im_end|>"), expected);
  // add_special_tokens adds nothing for Qwen (no bos, ByteLevel post-processor).
  EXPECT_EQ(tok().encode("<|im_start|>user\nhi<|im_end|>", true), expected);
  // Longest match wins where tokens overlap, and a near miss is plain text.
  EXPECT_EQ(tok().encode("<|im_start|><|im_start|>"), (std::vector<int32_t>{151644, 151644}));
  const auto near_miss = tok().encode("<|im_star");
  for (int32_t id : near_miss) EXPECT_LT(id, 151643);
}

TEST_F(Qwen3, SkipSpecialTokens) {
  const std::vector<int32_t> ids{151644, 872, 198, 6023, 151645};
  EXPECT_EQ(tok().decode(ids, false), "<|im_start|>user\nhi<|im_end|>");
  EXPECT_EQ(tok().decode(ids, true), "user\nhi");
  // <think> is an added token but not a special one: it stays.
  EXPECT_EQ(tok().decode({151667, 198, 151668}, true), "<think>\n</think>");
  EXPECT_TRUE(tok().is_special(151643));
  EXPECT_FALSE(tok().is_special(151667));
  EXPECT_FALSE(tok().is_special(9707));
}

TEST_F(Qwen3, VocabularyAccessors) {
  EXPECT_EQ(tok().vocab_size(), 151669u);
  EXPECT_EQ(tok().token_to_id("Hello"), 9707);
  EXPECT_EQ(tok().token_to_id("Ġworld"), 1879);
  EXPECT_EQ(tok().token_to_id("<|im_end|>"), 151645);
  EXPECT_EQ(tok().token_to_id("no such token"), -1);
  EXPECT_EQ(tok().id_to_token(1879), "Ġworld");
  EXPECT_EQ(tok().id_to_token(151644), "<|im_start|>");
  EXPECT_THROW(tok().id_to_token(151669), TokenizerError);
  EXPECT_THROW(tok().id_to_token(-1), TokenizerError);
}

TEST_F(Qwen3, TokenizerConfig) {
  EXPECT_FALSE(tok().bos_id().has_value());  // bos_token is null
  EXPECT_EQ(tok().eos_id(), std::optional<int32_t>(151645));
  EXPECT_EQ(tok().pad_id(), std::optional<int32_t>(151643));
  EXPECT_EQ(tok().chat_template().rfind("{%- if tools %}", 0), 0u);
  EXPECT_FALSE(tok().clean_up_tokenization_spaces());
}

TEST(CleanUpTokenization, MatchesTransformers) {
  EXPECT_EQ(Tokenizer::clean_up_tokenization("Hello , world ! I 'm sure it 's fine . Don n't ?"),
            "Hello, world! I'm sure it's fine. Donn't?");
  EXPECT_EQ(Tokenizer::clean_up_tokenization("a ' b"), "a'b");
  EXPECT_EQ(Tokenizer::clean_up_tokenization("no change"), "no change");
}

TEST_F(Qwen3, DecodingAnUnknownIdNamesIt) {
  for (int32_t bad : {151669, 200000, -5}) {
    try {
      tok().decode({9707, bad});
      FAIL() << "no error for id " << bad;
    } catch (const TokenizerError& e) {
      EXPECT_NE(std::string(e.what()).find(std::to_string(bad)), std::string::npos) << e.what();
    }
  }
}

// A model's embedding can have more rows than its tokenizer has tokens
// (Qwen2.5: 151,936 rows, 151,665 tokens): what it samples in the gap
// decodes to nothing, as in Hugging Face, and is counted.
TEST_F(Qwen3, SampledIdsThatAreNoTokenDecodeToNothing) {
  const std::vector<int32_t> sampled = {9707, 151850, 1879, 151935};
  EXPECT_EQ(tok().decode_sampled(sampled), tok().decode({9707, 1879}));
  EXPECT_EQ(tok().decode_sampled(sampled, /*skip_special_tokens=*/true), "Hello world");
  EXPECT_EQ(tok().count_non_tokens(sampled), 2u);
  EXPECT_EQ(tok().count_non_tokens({9707, 1879}), 0u);
  EXPECT_EQ(tok().decode_sampled({151850}), "");
}

// Random text from ranges that NFC leaves alone, so decode(encode(s)) == s.
std::string random_text(std::mt19937& rng, size_t chars) {
  static const std::vector<std::pair<char32_t, char32_t>> ranges = {
      {0x20, 0x7E},       {0x20, 0x7E},     {0x20, 0x7E},    {'\n', '\n'},     {'\t', '\r'},
      {0xA0, 0xFF},       {0x391, 0x3A9},   {0x410, 0x44F},  {0x4E00, 0x9FFF}, {0xAC00, 0xD7A3},
      {0x1F600, 0x1F64F}, {0x2002, 0x200D}, {0x3000, 0x3003}};
  static const std::vector<std::string> inserts = {"<|im_start|>", "<|endoftext|>", "<think>", " ", "  ", "\n\n", "'s"};
  std::string out;
  std::uniform_int_distribution<size_t> pick_range(0, ranges.size() + 1);
  for (size_t i = 0; i < chars; ++i) {
    const size_t r = pick_range(rng);
    if (r >= ranges.size()) {
      out += inserts[rng() % inserts.size()];
      continue;
    }
    std::uniform_int_distribution<uint32_t> cp(ranges[r].first, ranges[r].second);
    const char32_t c = cp(rng);
    if (c < 0x80) {
      out.push_back(static_cast<char>(c));
    } else if (c < 0x800) {
      out.push_back(static_cast<char>(0xC0 | (c >> 6)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else if (c < 0x10000) {
      out.push_back(static_cast<char>(0xE0 | (c >> 12)));
      out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else {
      out.push_back(static_cast<char>(0xF0 | (c >> 18)));
      out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    }
  }
  return out;
}

TEST_F(Qwen3, RoundTripsRandomUtf8) {
  std::mt19937 rng(1234);
  for (int i = 0; i < 300; ++i) {
    const std::string text = random_text(rng, 1 + rng() % 200);
    EXPECT_EQ(tok().decode(tok().encode(text)), text) << show(text);
  }
  // Long pieces take the heap-based merge path; they must round trip too.
  const std::string long_word(500, 'x');
  EXPECT_EQ(tok().decode(tok().encode(long_word)), long_word);
  std::string long_cjk;
  for (int i = 0; i < 6; ++i) long_cjk += "我爱自然语言处理";
  EXPECT_EQ(tok().decode(tok().encode(long_cjk)), long_cjk);
}

TEST_F(Qwen3, InvalidUtf8IsEncodedAsBytes) {
  // Input -> decoded text: each maximal invalid subpart becomes one U+FFFD,
  // as Rust's from_utf8_lossy and browsers do.
  const std::string fffd = "\xEF\xBF\xBD";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"abc\xff\xfe def", "abc" + fffd + fffd + " def"},
      {"\xe4\xbd", fffd},  // a 3-byte sequence cut short
      {"\x80", fffd},
      {"x\xed\xa0\x80y", "x" + fffd + fffd + fffd + "y"},  // an encoded surrogate
      {"\xf0\x9f\x98", fffd},
      {"caf\xc3 <|im_end|>\xc3", "caf" + fffd + " <|im_end|>" + fffd},
  };
  for (const auto& [text, expected] : cases) {
    std::vector<int32_t> ids;
    ASSERT_NO_THROW(ids = tok().encode(text)) << show(text);
    EXPECT_EQ(tok().decode(ids), expected) << show(text);
  }
  EXPECT_EQ(tok().encode("\xff"), (std::vector<int32_t>{tok().token_to_id("ÿ")}));
  const auto with_special = tok().encode("caf\xc3 <|im_end|>\xc3");
  EXPECT_EQ(std::count(with_special.begin(), with_special.end(), 151645), 1);
}

bool is_valid_utf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += n;
  }
  return true;
}

TEST_F(Qwen3, RandomBytesNeverCrash) {
  std::mt19937 rng(4321);
  const std::string fragments[] = {"<|im_start|>", "<|im_", "\xcc\x81", "\xe4\xbd\xa0", " ", "\n", "a"};
  for (int i = 0; i < 300; ++i) {
    std::string text;
    const size_t length = rng() % 64;
    for (size_t k = 0; k < length; ++k) {
      if (rng() % 4 == 0) {
        text += fragments[rng() % 7];
      } else {
        text.push_back(static_cast<char>(rng() % 256));
      }
    }
    std::vector<int32_t> ids;
    ASSERT_NO_THROW(ids = tok().encode(text));
    std::string decoded;
    ASSERT_NO_THROW(decoded = tok().decode(ids));
    EXPECT_TRUE(is_valid_utf8(decoded));
  }
}

TEST_F(Qwen3, ConcurrentEncodeMatchesSerial) {
  std::mt19937 rng(99);
  std::vector<std::string> texts;
  for (int i = 0; i < 64; ++i) texts.push_back(random_text(rng, 300));
  std::vector<std::vector<int32_t>> expected;
  for (const auto& t : texts) expected.push_back(tok().encode(t));
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 5; ++round) {
        for (size_t i = 0; i < texts.size(); ++i) {
          const size_t k = (i + static_cast<size_t>(t) * 7) % texts.size();
          if (tok().encode(texts[k]) != expected[k]) ++mismatches;
          if (tok().decode(expected[k]) != texts[k]) ++mismatches;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
}

TEST_F(Qwen3, HugeWhitespaceRunDoesNotCrash) {
  const std::string spaces(1 << 20, ' ');
  const std::vector<int32_t> ids = tok().encode(spaces + "x");
  EXPECT_EQ(tok().decode(ids), spaces + "x");
}

// --- A tiny byte-level BPE written by the tests, for options Qwen3 lacks --

std::string byte_char(int b) {
  // The GPT-2 byte alphabet, spelled out independently of the library.
  int n = 0;
  for (int x = 0; x < b; ++x) {
    if (!((x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE && x <= 0xFF))) ++n;
  }
  const bool itself = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
  const char32_t cp = itself ? static_cast<char32_t>(b) : static_cast<char32_t>(0x100 + n);
  std::string out;
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
  return out;
}

// 256 byte tokens (id == byte), then he=256 ll=257 hell=258 hello=259 Ġw=260
// 12=261 lo=262 (reachable by no merge), added tokens from 300.
json tiny_tokenizer(bool pair_merges) {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_char(b)] = b;
  const std::vector<std::pair<std::string, std::string>> merges = {{"h", "e"},    {"l", "l"}, {"he", "ll"},
                                                                   {"hell", "o"}, {"Ġ", "w"}, {"1", "2"}};
  int next = 256;
  json merge_list = json::array();
  for (const auto& [a, b] : merges) {
    vocab[a + b] = next++;
    merge_list.push_back(pair_merges ? json::array({a, b}) : json(a + " " + b));
  }
  vocab["lo"] = next++;
  json root;
  root["version"] = "1.0";
  root["normalizer"] = nullptr;
  root["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers",
       {{{"type", "Split"},
         {"pattern",
          {{"Regex",
            "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
            "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}}},
         {"behavior", "Isolated"},
         {"invert", false}},
        {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", false}}}}};
  root["decoder"] = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}};
  root["post_processor"] = {
      {"type", "Sequence"},
      {"processors",
       {{{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", false}, {"use_regex", true}},
        {{"type", "TemplateProcessing"},
         {"single",
          {{{"SpecialToken", {{"id", "<bos>"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
         {"pair", json::array()},
         {"special_tokens", {{"<bos>", {{"id", "<bos>"}, {"ids", {300}}, {"tokens", {"<bos>"}}}}}}}}}};
  const auto added = [](int id, const std::string& content, bool special, bool lstrip, bool rstrip, bool single_word) {
    return json{{"id", id},         {"content", content},  {"single_word", single_word}, {"lstrip", lstrip},
                {"rstrip", rstrip}, {"normalized", false}, {"special", special}};
  };
  root["added_tokens"] = {added(300, "<bos>", true, false, false, false),
                          added(301, "<eot>", true, false, false, false), added(302, "[L]", false, true, false, false),
                          added(303, "[R]", false, false, true, false), added(304, "word", false, false, false, true)};
  root["model"] = {{"type", "BPE"},           {"dropout", nullptr},     {"unk_token", nullptr},
                   {"fuse_unk", false},       {"byte_fallback", false}, {"ignore_merges", false},
                   {"vocab", vocab},          {"merges", merge_list},   {"continuing_subword_prefix", ""},
                   {"end_of_word_suffix", ""}};
  return root;
}

Tokenizer load_json(const json& root, const std::string& name) {
  const fs::path path = temp_dir() / name;
  write_file(path, root.dump());
  return Tokenizer::from_file(path.string());
}

std::vector<int32_t> bytes_of(const std::string& s) {
  std::vector<int32_t> ids;
  for (unsigned char c : s) ids.push_back(c);
  return ids;
}

TEST(TinyBpe, BothMergeSerialisationsAgree) {
  const Tokenizer strings = load_json(tiny_tokenizer(false), "tiny_strings.json");
  const Tokenizer pairs = load_json(tiny_tokenizer(true), "tiny_pairs.json");
  const std::string text = "hello world hell he 1212 lo";
  // hello | Ġw o r l d | Ġ hell | Ġ he | 121 | 2 | Ġ l o
  // hello | Ġworld | Ġhell | Ġhe | Ġ | 121 | 2 | Ġlo, ids equal to bytes below 256.
  const std::vector<int32_t> expected{259, 260, 'o', 'r', 'l', 'd', ' ', 258, ' ',
                                      256, ' ', 261, '1', '2', ' ', 'l', 'o'};
  const auto ids = strings.encode(text);
  EXPECT_EQ(ids, expected);
  EXPECT_EQ(pairs.encode(text), expected);
  EXPECT_EQ(strings.decode(ids), text);
  // Llama 3's \p{N}{1,3} keeps three digits together: "121" then "2".
  const auto digits = strings.encode("1212");
  EXPECT_EQ(digits, (std::vector<int32_t>{261, '1', '2'}));
}

TEST(TinyBpe, IgnoreMergesUsesWholeWordTokens) {
  json root = tiny_tokenizer(true);
  const Tokenizer merging = load_json(root, "tiny_merging.json");
  EXPECT_EQ(merging.encode("lo"), bytes_of("lo"));  // no merge makes "lo"
  root["model"]["ignore_merges"] = true;
  const Tokenizer ignoring = load_json(root, "tiny_ignoring.json");
  EXPECT_EQ(ignoring.encode("lo"), (std::vector<int32_t>{262}));
  EXPECT_EQ(ignoring.encode("hello"), (std::vector<int32_t>{259}));
}

TEST(TinyBpe, AddedTokenFlags) {
  const Tokenizer tok = load_json(tiny_tokenizer(true), "tiny_flags.json");
  // lstrip: "[L]" swallows the spaces before it.
  EXPECT_EQ(tok.encode("a  [L]b"), (std::vector<int32_t>{'a', 302, 'b'}));
  // rstrip: "[R]" swallows the spaces after it.
  EXPECT_EQ(tok.encode("a[R]  b"), (std::vector<int32_t>{'a', 303, 'b'}));
  // single_word: only a standalone "word" is the added token.
  EXPECT_EQ(tok.encode("word"), (std::vector<int32_t>{304}));
  EXPECT_EQ(tok.encode("a word."), (std::vector<int32_t>{'a', ' ', 304, '.'}));
  const auto inside = tok.encode("swords");
  EXPECT_EQ(std::count(inside.begin(), inside.end(), 304), 0);
}

TEST(TinyBpe, TemplateAddsSpecialTokens) {
  const Tokenizer tok = load_json(tiny_tokenizer(true), "tiny_template.json");
  EXPECT_EQ(tok.encode("hello", true), (std::vector<int32_t>{300, 259}));
  EXPECT_EQ(tok.encode("hello", false), (std::vector<int32_t>{259}));
  EXPECT_EQ(tok.encode("<bos>hello<eot>"), (std::vector<int32_t>{300, 259, 301}));
  EXPECT_EQ(tok.decode({300, 259, 301}, true), "hello");
  EXPECT_EQ(tok.vocab_size(), 305u);
}

TEST(TinyBpe, ConfigTokensAndBosFlag) {
  const fs::path dir = temp_dir() / "tiny_dir";
  fs::create_directories(dir);
  json root = tiny_tokenizer(true);
  root["post_processor"] = nullptr;
  write_file(dir / "tokenizer.json", root.dump());
  write_file(
      dir / "tokenizer_config.json",
      json{{"bos_token", {{"content", "<bos>"}, {"lstrip", false}}},
           {"eos_token", "<eot>"},
           {"pad_token", nullptr},
           {"add_bos_token", true},
           {"chat_template", {{{"name", "tool_use"}, {"template", "T"}}, {{"name", "default"}, {"template", "D"}}}}}
          .dump());
  const Tokenizer tok = Tokenizer::from_dir(dir.string());
  EXPECT_EQ(tok.bos_id(), std::optional<int32_t>(300));
  EXPECT_EQ(tok.eos_id(), std::optional<int32_t>(301));
  EXPECT_FALSE(tok.pad_id().has_value());
  EXPECT_EQ(tok.chat_template(), "D");
  EXPECT_EQ(tok.encode("hello", true), (std::vector<int32_t>{300, 259}));
}

// --- Malformed input ------------------------------------------------------

std::string load_error(const std::string& name, const std::string& content) {
  const fs::path path = temp_dir() / name;
  write_file(path, content);
  try {
    Tokenizer::from_file(path.string());
  } catch (const TokenizerError& e) {
    return e.what();
  }
  return "(no error)";
}

void expect_contains(const std::string& message, const std::string& part) {
  EXPECT_NE(message.find(part), std::string::npos) << "message: " << message << "\nexpected to contain: " << part;
}

TEST(MalformedTokenizer, MissingFile) {
  try {
    Tokenizer::from_file("/nonexistent/tokenizer.json");
    FAIL();
  } catch (const TokenizerError& e) {
    expect_contains(e.what(), "/nonexistent/tokenizer.json");
  }
  EXPECT_THROW(Tokenizer::from_dir("/nonexistent"), TokenizerError);
}

TEST(MalformedTokenizer, TruncatedJson) {
  const std::string full = tiny_tokenizer(true).dump();
  const std::string message = load_error("truncated.json", full.substr(0, full.size() / 2));
  expect_contains(message, "truncated.json");
  expect_contains(message, "not valid JSON");
  expect_contains(load_error("empty.json", ""), "not valid JSON");
  expect_contains(load_error("array.json", "[1, 2]"), "not a JSON object");
}

TEST(MalformedTokenizer, MissingModel) {
  json root = tiny_tokenizer(true);
  root.erase("model");
  expect_contains(load_error("no_model.json", root.dump()), "no \"model\"");
}

TEST(MalformedTokenizer, UnsupportedModel) {
  json root = tiny_tokenizer(true);
  root["model"] = {{"type", "WordPiece"}, {"unk_token", "[UNK]"}, {"vocab", {{"[UNK]", 0}}}};
  const std::string message = load_error("wordpiece.json", root.dump());
  expect_contains(message, "unsupported tokenizer model 'WordPiece' in ");
  expect_contains(message, "wordpiece.json; grpo supports byte-level BPE (Qwen2/2.5/3, Llama 3)");
}

TEST(MalformedTokenizer, MergeWithUnknownToken) {
  json root = tiny_tokenizer(false);
  root["model"]["merges"].push_back("h zzz");
  const std::string message = load_error("bad_merge.json", root.dump());
  expect_contains(message, "bad_merge.json");
  expect_contains(message, "unknown token 'zzz'");
  root = tiny_tokenizer(true);
  root["model"]["merges"].push_back(json::array({"h", "o"}));  // "ho" is not in the vocabulary
  expect_contains(load_error("bad_merge_result.json", root.dump()), "unknown token 'ho'");
  root = tiny_tokenizer(true);
  root["model"]["merges"].push_back(42);
  expect_contains(load_error("bad_merge_type.json", root.dump()), "merge #6");
}

TEST(MalformedTokenizer, InvalidRegex) {
  json root = tiny_tokenizer(true);
  root["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(\\p{L}+";
  const std::string message = load_error("bad_regex.json", root.dump());
  expect_contains(message, "bad_regex.json");
  expect_contains(message, "invalid pre-tokenizer regex");
}

TEST(MalformedTokenizer, WrongTypesAreErrorsNotCrashes) {
  json root = tiny_tokenizer(true);
  root["model"]["vocab"]["h"] = "seven";
  expect_contains(load_error("bad_vocab.json", root.dump()), "bad_vocab.json");
  root = tiny_tokenizer(true);
  root["added_tokens"][0]["id"] = -3;
  expect_contains(load_error("bad_added.json", root.dump()), "bad_added.json");
  root = tiny_tokenizer(true);
  root["normalizer"] = {{"type", "Precompiled"}};
  expect_contains(load_error("bad_normalizer.json", root.dump()), "unsupported normalizer 'Precompiled'");
  root = tiny_tokenizer(true);
  root["pre_tokenizer"] = {{"type", "Metaspace"}};
  expect_contains(load_error("metaspace.json", root.dump()), "unsupported pre-tokenizer 'Metaspace'");
}

TEST(MalformedTokenizer, BadConfig) {
  const fs::path dir = temp_dir() / "bad_config_dir";
  fs::create_directories(dir);
  write_file(dir / "tokenizer.json", tiny_tokenizer(true).dump());
  write_file(dir / "tokenizer_config.json", "{\"eos_token\": ");
  EXPECT_THROW(Tokenizer::from_dir(dir.string()), TokenizerError);
  write_file(dir / "tokenizer_config.json", "{\"eos_token\": \"<missing>\"}");
  try {
    Tokenizer::from_dir(dir.string());
    FAIL();
  } catch (const TokenizerError& e) {
    expect_contains(e.what(), "<missing>");
  }
}

}  // namespace
