#include "trainer/prompt_source.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <sstream>

namespace grpo::trainer {

std::vector<data::Row> load_dataset_rows(const std::vector<data::DatasetSource>& datasets, data::BadRows* bad) {
  std::vector<data::Row> rows;
  for (const data::DatasetSource& source : datasets)
    for (data::Row& row : data::load_rows(source, bad)) rows.push_back(std::move(row));
  return rows;
}

namespace {

// The most input bytes one token can stand for, bounded from above by its
// vocabulary spelling: byte-level BPE spells each byte as one or two UTF-8
// bytes, SentencePiece a space as '▁' (three) and a raw byte as <0xNN>.
size_t longest_token_bytes(const tok::Tokenizer& tokenizer) {
  size_t longest = 1;
  for (size_t id = 0; id < tokenizer.vocab_size(); ++id) {
    try {
      longest = std::max(longest, tokenizer.id_to_token(static_cast<int32_t>(id)).size());
    } catch (const tok::TokenizerError&) {  // an unused id between the vocabulary and the added tokens
    }
  }
  return longest;
}

// Cuts every text of `messages` to `cap` bytes, keeping its end or its start
// (at a UTF-8 boundary). `cap` is over twice the bytes of the prompt limit's
// worth of tokens, so what truncation keeps afterwards is what it would keep
// from the whole text.
void cut_texts(nlohmann::json& messages, size_t cap, bool keep_end) {
  auto cut = [&](nlohmann::json& text) {
    if (!text.is_string() || text.get_ref<const std::string&>().size() <= cap) return;
    const std::string& whole = text.get_ref<const std::string&>();
    size_t begin = 0, end = whole.size();
    if (keep_end) {
      begin = whole.size() - cap;
      while (begin < end && (static_cast<unsigned char>(whole[begin]) & 0xC0) == 0x80) ++begin;
    } else {
      end = cap;
      while (end > 0 && (static_cast<unsigned char>(whole[end]) & 0xC0) == 0x80) --end;
    }
    text = whole.substr(begin, end - begin);
  };
  for (auto& message : messages) {
    if (!message.is_object() || !message.contains("content")) continue;
    nlohmann::json& content = message["content"];
    if (content.is_array()) {
      for (auto& part : content)
        if (part.is_object() && part.contains("text")) cut(part["text"]);
    } else {
      cut(content);
    }
  }
}

}  // namespace

PromptSource::PromptSource(std::vector<data::Row> rows, const PromptFormat& format, bool shuffle, uint64_t seed,
                           data::BadRows* bad, const std::string& what)
    : shuffle_(shuffle), rng_(seed) {
  data::BadRows strict;
  if (!bad) bad = &strict;
  // Texts longer than any prompt can be are cut before they are tokenized:
  // tokenizing a 100 MB line whole took minutes and gigabytes to keep a few
  // thousand tokens of it. Rows within the limit are untouched.
  const size_t text_cap =
      format.max_prompt_tokens > 0
          ? 2 * (static_cast<size_t>(format.max_prompt_tokens) + 64) * longest_token_bytes(*format.tokenizer)
          : 0;
  for (const data::Row& row : rows) {
    nlohmann::json messages;
    Prompt p;
    tok::ChatOptions chat;
    chat.tools_json = format.tools_json;
    try {
      messages = data::prompt_messages(row, format.system);
      if (text_cap > 0) cut_texts(messages, text_cap, format.truncation != Truncation::Right);
      p.ids = tok::encode_chat_prompt(*format.tokenizer, format.family, tok::messages_from_json(messages), chat);
    } catch (const data::DataError& e) {
      bad->handle(e.what());
      continue;
    } catch (const tok::ChatTemplateError& e) {  // the row's messages, as the template takes them
      bad->handle(fmt::format("{}: {}", row.source, e.what()));
      continue;
    }
    const auto limit = static_cast<size_t>(format.max_prompt_tokens);
    if (format.max_prompt_tokens > 0 && p.ids.size() > limit) {
      if (format.truncation == Truncation::Delete) {
        ++dropped_;
        continue;
      }
      ++truncated_;
      if (format.truncation == Truncation::Right) p.ids.resize(limit);
      else p.ids.erase(p.ids.begin(), p.ids.end() - static_cast<std::ptrdiff_t>(limit));  // left: keep the end
    }
    p.text = format.tokenizer->decode(p.ids);  // once here, not at every generation
    p.messages_json = messages.dump();
    nlohmann::json columns = row.columns;
    columns.erase("messages");
    p.columns = plugins::RowColumns::from_json(columns);
    prompts_.push_back(std::move(p));
  }
  if (prompts_.empty())
    throw data::DataError(dropped_ ? "every " + what + " prompt is longer than max_length allows and "
                                     "truncation_strategy is delete"
                                   : "the " + what + " dataset has no usable rows");
  order_.resize(prompts_.size());
  std::iota(order_.begin(), order_.end(), 0);
  if (shuffle_) std::shuffle(order_.begin(), order_.end(), rng_);
}

std::vector<const Prompt*> PromptSource::next(size_t n) {
  std::vector<const Prompt*> out;
  while (out.size() < n) {
    if (cursor_ == order_.size()) {
      cursor_ = 0;
      ++epochs_done_;
      if (shuffle_) std::shuffle(order_.begin(), order_.end(), rng_);
    }
    out.push_back(&prompts_[order_[cursor_++]]);
  }
  return out;
}

nlohmann::json PromptSource::state() const {
  std::ostringstream rng;
  rng << rng_;
  return {{"order", order_}, {"cursor", cursor_}, {"epochs_done", epochs_done_}, {"rng", rng.str()}};
}

void PromptSource::restore(const nlohmann::json& state) {
  std::vector<size_t> order = state.at("order").get<std::vector<size_t>>();
  if (order.size() != prompts_.size())
    throw data::DataError("the checkpoint was made with a dataset of " + std::to_string(order.size()) +
                          " prompts, this one has " + std::to_string(prompts_.size()) + ": resume with the same data");
  std::vector<bool> seen(order.size());
  for (size_t index : order) {
    if (index >= order.size() || seen[index])
      throw data::DataError("its prompt order is not a permutation of the " + std::to_string(order.size()) +
                            " prompts (" + std::to_string(index) + " is out of range or repeated)");
    seen[index] = true;
  }
  const size_t cursor = state.at("cursor").get<size_t>();
  if (cursor > order.size())
    throw data::DataError("its prompt cursor " + std::to_string(cursor) + " is past the " +
                          std::to_string(order.size()) + " prompts");
  std::mt19937_64 rng;
  std::istringstream rng_text(state.at("rng").get<std::string>());
  if (!(rng_text >> rng)) throw data::DataError("its shuffling state \"rng\" is not a generator's state");
  order_ = std::move(order);
  cursor_ = cursor;
  epochs_done_ = state.at("epochs_done").get<size_t>();
  rng_ = rng;
}

double PromptSource::epoch() const {
  return static_cast<double>(epochs_done_) + static_cast<double>(cursor_) / static_cast<double>(order_.size());
}

}  // namespace grpo::trainer
