// Encoding and decoding; loading lives in loader.cpp.
#include "tokenizer/tokenizer.h"

#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/utf8.h"

namespace grpo::tok {
namespace {

// Encodes text between added tokens that is already normalized.
void encode_pieces(const Tokenizer::Impl& impl, std::string_view text, std::vector<int32_t>* ids) {
  const BpeModel& model = *impl.model;
  impl.pre_tokenizer.split(text, [&model, ids](std::string_view piece) { model.encode(piece, ids); });
}

// Encodes raw text between the raw-matched added tokens.
void encode_plain(const Tokenizer::Impl& impl, std::string_view text, std::vector<int32_t>* ids) {
  std::string normalized;
  if (impl.normalizer.apply(text, &normalized)) text = normalized;
  if (impl.normalized_matcher.empty()) {
    encode_pieces(impl, text, ids);
    return;
  }
  std::vector<Segment> segments;
  impl.normalized_matcher.split(text, &segments);
  for (const Segment& s : segments) {
    if (s.id >= 0) {
      ids->push_back(s.id);
    } else {
      encode_pieces(impl, text.substr(s.begin, s.end - s.begin), ids);
    }
  }
}

}  // namespace

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  const Impl& impl = *impl_;
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 8);
  if (add_special_tokens) {
    if (impl.has_template) {
      ids = impl.template_prefix;
    } else if (impl.add_bos && impl.bos) {
      ids.push_back(*impl.bos);
    }
  }
  if (impl.raw_matcher.empty()) {
    encode_plain(impl, text, &ids);
  } else {
    std::vector<Segment> segments;
    impl.raw_matcher.split(text, &segments);
    for (const Segment& s : segments) {
      if (s.id >= 0) {
        ids.push_back(s.id);
      } else {
        encode_plain(impl, text.substr(s.begin, s.end - s.begin), &ids);
      }
    }
  }
  if (add_special_tokens) {
    if (impl.has_template) {
      ids.insert(ids.end(), impl.template_suffix.begin(), impl.template_suffix.end());
    } else if (impl.add_eos && impl.eos) {
      ids.push_back(*impl.eos);
    }
  }
  return ids;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const {
  const Impl& impl = *impl_;
  std::string raw;
  raw.reserve(ids.size() * 4);
  for (const int32_t id : ids) {
    if (!impl.valid_id(id)) {
      throw TokenizerError("cannot decode token id " + std::to_string(id) + ": not a token of " + impl.source +
                           " (vocabulary size " + std::to_string(impl.present.size()) + ")");
    }
    if (skip_special_tokens && impl.special[static_cast<size_t>(id)]) continue;
    raw += impl.bytes[static_cast<size_t>(id)];
  }
  // Tokens may end inside a multi-byte character; only the joined bytes can
  // tell, so validity is restored once, at the end.
  return utf8::to_valid_lossy(raw);
}

std::string Tokenizer::decode_sampled(const std::vector<int32_t>& ids, bool skip_special_tokens) const {
  if (count_non_tokens(ids) == 0) return decode(ids, skip_special_tokens);
  std::vector<int32_t> tokens;
  tokens.reserve(ids.size());
  for (const int32_t id : ids)
    if (impl_->valid_id(id)) tokens.push_back(id);
  return decode(tokens, skip_special_tokens);
}

size_t Tokenizer::count_non_tokens(const std::vector<int32_t>& ids) const {
  size_t n = 0;
  for (const int32_t id : ids) n += impl_->valid_id(id) ? 0 : 1;
  return n;
}

int32_t Tokenizer::token_to_id(std::string_view token) const {
  const auto added = impl_->added_ids.find(std::string(token));
  if (added != impl_->added_ids.end()) return added->second;
  return impl_->model->token_to_id(token);
}

std::string Tokenizer::id_to_token(int32_t id) const {
  if (!impl_->valid_id(id)) {
    throw TokenizerError("token id " + std::to_string(id) + " is not a token of " + impl_->source);
  }
  return impl_->tokens[static_cast<size_t>(id)];
}

size_t Tokenizer::vocab_size() const { return impl_->present.size(); }
std::optional<int32_t> Tokenizer::bos_id() const { return impl_->bos; }
std::optional<int32_t> Tokenizer::eos_id() const { return impl_->eos; }
std::optional<int32_t> Tokenizer::pad_id() const { return impl_->pad; }
std::optional<int32_t> Tokenizer::unk_id() const { return impl_->unk; }

bool Tokenizer::is_special(int32_t id) const { return impl_->valid_id(id) && impl_->special[static_cast<size_t>(id)]; }

const std::string& Tokenizer::chat_template() const { return impl_->chat_template; }

bool Tokenizer::clean_up_tokenization_spaces() const { return impl_->clean_up_spaces; }

std::string Tokenizer::clean_up_tokenization(std::string_view text) {
  // transformers applies these replacements one after another, each over the
  // whole text; that order is kept so overlapping patterns resolve the same.
  static const std::pair<std::string_view, std::string_view> kRules[] = {
      {" .", "."},     {" ?", "?"},   {" !", "!"},   {" ,", ","},     {" ' ", "'"},
      {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  std::string current(text);
  std::string next;
  for (const auto& [from, to] : kRules) {
    if (current.find(from) == std::string::npos) continue;
    next.clear();
    size_t pos = 0;
    for (size_t hit = current.find(from); hit != std::string::npos; hit = current.find(from, pos)) {
      next.append(current, pos, hit - pos);
      next.append(to);
      pos = hit + from.size();
    }
    next.append(current, pos, std::string::npos);
    current.swap(next);
  }
  return current;
}

CacheStats Tokenizer::cache_stats() const {
  CacheStats stats;
  impl_->model->add_cache_stats(&stats);
  return stats;
}

}  // namespace grpo::tok
