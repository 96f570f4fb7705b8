#include "tokenizer/pretokenizer.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <utility>

#include "tokenizer/tokenizer.h"

namespace grpo::tok {
namespace {

// The pattern ByteLevel uses when "use_regex" is true (GPT-2's).
constexpr const char* kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

constexpr const char* kSupported = "; grpo supports byte-level BPE (Qwen2/2.5/3, Llama 3)";

PreTokenizer::Behavior parse_behavior(const nlohmann::json& value, const std::string& source) {
  const std::string name = value.is_string() ? value.get<std::string>() : std::string();
  if (name == "Removed") return PreTokenizer::Behavior::kRemoved;
  if (name == "Isolated") return PreTokenizer::Behavior::kIsolated;
  if (name == "MergedWithPrevious") return PreTokenizer::Behavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return PreTokenizer::Behavior::kMergedWithNext;
  if (name == "Contiguous") return PreTokenizer::Behavior::kContiguous;
  throw TokenizerError(source + ": unknown Split behavior " + value.dump());
}

bool flag(const nlohmann::json& object, const char* key, bool fallback) {
  const auto it = object.find(key);
  return it != object.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

}  // namespace

PreTokenizer PreTokenizer::from_json(const nlohmann::json& value, const std::string& source) {
  PreTokenizer result;
  result.parse_step(value, source);
  return result;
}

void PreTokenizer::parse_step(const nlohmann::json& value, const std::string& source) {
  if (value.is_null()) return;
  if (!value.is_object() || !value.contains("type") || !value["type"].is_string()) {
    throw TokenizerError(source + ": \"pre_tokenizer\" must be null or an object with a \"type\"");
  }
  const std::string type = value["type"].get<std::string>();
  if (type == "Sequence") {
    const auto it = value.find("pretokenizers");
    if (it == value.end() || !it->is_array()) {
      throw TokenizerError(source + ": Sequence pre-tokenizer without a \"pretokenizers\" array");
    }
    for (const auto& child : *it) parse_step(child, source);
  } else if (type == "Split") {
    const auto pattern = value.find("pattern");
    Step step;
    if (pattern != value.end() && pattern->is_object() && pattern->contains("Regex") &&
        (*pattern)["Regex"].is_string()) {
      step.regex = std::make_shared<Regex>((*pattern)["Regex"].get<std::string>(), false, source);
    } else if (pattern != value.end() && pattern->is_object() && pattern->contains("String") &&
               (*pattern)["String"].is_string()) {
      step.regex = std::make_shared<Regex>((*pattern)["String"].get<std::string>(), true, source);
    } else {
      throw TokenizerError(source + ": Split pre-tokenizer needs \"pattern\": {\"Regex\": ...} or {\"String\": ...}");
    }
    step.behavior = parse_behavior(value.value("behavior", nlohmann::json("Isolated")), source);
    step.invert = flag(value, "invert", false);
    steps_.push_back(std::move(step));
  } else if (type == "ByteLevel") {
    // Byte-to-alphabet mapping itself happens inside BPE, which works on raw
    // bytes; here only the optional prefix space and GPT-2 split remain.
    has_byte_level_ = true;
    Step step;
    step.add_prefix_space = flag(value, "add_prefix_space", false);
    if (flag(value, "use_regex", true)) step.regex = std::make_shared<Regex>(kGpt2Pattern, false, source);
    if (step.add_prefix_space || step.regex) steps_.push_back(std::move(step));
  } else if (type == "Digits") {
    Step step;
    step.regex = std::make_shared<Regex>(flag(value, "individual_digits", false) ? "\\p{N}" : "\\p{N}+", false, source);
    steps_.push_back(std::move(step));
  } else {
    throw TokenizerError("unsupported pre-tokenizer '" + type + "' in " + source + kSupported);
  }
}

void PreTokenizer::split(std::string_view text, const PieceSink& on_piece) const {
  if (!text.empty()) run(0, text, on_piece);
}

void PreTokenizer::run(size_t step_index, std::string_view piece, const PieceSink& on_piece) const {
  if (step_index == steps_.size()) {
    on_piece(piece);
    return;
  }
  const Step& step = steps_[step_index];
  std::string prefixed;
  if (step.add_prefix_space && piece.front() != ' ') {
    prefixed.reserve(piece.size() + 1);
    prefixed.push_back(' ');
    prefixed.append(piece);
    piece = prefixed;
  }
  if (!step.regex) {
    run(step_index + 1, piece, on_piece);
    return;
  }
  if (step.behavior != Behavior::kIsolated || step.invert) {
    split_by_behavior(step_index, piece, on_piece);
    return;
  }
  // The common case (every Qwen and Llama 3 file): each match and each gap
  // between matches is a piece, streamed as found.
  size_t prev = 0;
  step.regex->for_each_match(piece, [&](size_t begin, size_t end) {
    if (begin > prev) run(step_index + 1, piece.substr(prev, begin - prev), on_piece);
    run(step_index + 1, piece.substr(begin, end - begin), on_piece);
    prev = end;
  });
  if (prev < piece.size()) run(step_index + 1, piece.substr(prev), on_piece);
}

void PreTokenizer::split_by_behavior(size_t step_index, std::string_view piece, const PieceSink& on_piece) const {
  const Step& step = steps_[step_index];
  // List the alternating (range, is_match) parts, then combine them the way
  // the behavior prescribes.
  struct Part {
    size_t begin, end;
    bool is_match;
  };
  std::vector<Part> parts;
  size_t prev = 0;
  step.regex->for_each_match(piece, [&](size_t begin, size_t end) {
    if (begin > prev) parts.push_back({prev, begin, step.invert});
    parts.push_back({begin, end, !step.invert});
    prev = end;
  });
  if (prev < piece.size()) parts.push_back({prev, piece.size(), step.invert});

  std::vector<std::pair<size_t, size_t>> merged;
  bool previous_match = false;
  switch (step.behavior) {
    case Behavior::kRemoved:
      for (const Part& p : parts) {
        if (!p.is_match) merged.emplace_back(p.begin, p.end);
      }
      break;
    case Behavior::kIsolated:
      for (const Part& p : parts) merged.emplace_back(p.begin, p.end);
      break;
    case Behavior::kMergedWithPrevious:
      for (const Part& p : parts) {
        if (p.is_match && !previous_match && !merged.empty()) {
          merged.back().second = p.end;
        } else {
          merged.emplace_back(p.begin, p.end);
        }
        previous_match = p.is_match;
      }
      break;
    case Behavior::kMergedWithNext:
      // Mirror image of MergedWithPrevious: walk right to left.
      for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
        if (it->is_match && !previous_match && !merged.empty()) {
          merged.back().first = it->begin;
        } else {
          merged.emplace_back(it->begin, it->end);
        }
        previous_match = it->is_match;
      }
      std::reverse(merged.begin(), merged.end());
      break;
    case Behavior::kContiguous:
      for (size_t i = 0; i < parts.size(); ++i) {
        if (i > 0 && parts[i].is_match == previous_match) {
          merged.back().second = parts[i].end;
        } else {
          merged.emplace_back(parts[i].begin, parts[i].end);
        }
        previous_match = parts[i].is_match;
      }
      break;
  }
  for (const auto& [begin, end] : merged) {
    if (end > begin) run(step_index + 1, piece.substr(begin, end - begin), on_piece);
  }
}

}  // namespace grpo::tok
