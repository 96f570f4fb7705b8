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

PromptSource::PromptSource(std::vector<data::Row> rows, const PromptFormat& format, bool shuffle, uint64_t seed,
                           data::BadRows* bad, const std::string& what)
    : shuffle_(shuffle), rng_(seed) {
  data::BadRows strict;
  if (!bad) bad = &strict;
  for (const data::Row& row : rows) {
    nlohmann::json messages;
    Prompt p;
    tok::ChatOptions chat;
    chat.tools_json = format.tools_json;
    try {
      messages = data::prompt_messages(row, format.system);
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
