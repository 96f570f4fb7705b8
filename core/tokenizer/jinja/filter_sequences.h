// Filters over sequences (filter_sequences.cpp), for filters.cpp's table.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tokenizer/jinja/builtins.h"

namespace grpo::tok::jinja::sequences {

inline std::string what(const char* name) { return std::string("filter '") + name + "'"; }

// jinja's make_attrgetter: "a.b.0" looks up a, then b, then item 0.
std::vector<Value> attribute_path(const Value& attribute);
Value lookup_path(Value item, const std::vector<Value>& path, const std::optional<Value>& fallback = std::nullopt);
Value lowered(const Value& v, bool case_sensitive);  // the key of a case-insensitive comparison
Value iterator(ValueList items);                     // what select, map, unique return: a generator

Value select_or_reject(const char* name, const Value& seq, const CallArgs& args, bool by_attribute, bool select);
ValueList sorted(const Value& seq, bool reverse, bool case_sensitive, const std::optional<Value>& attribute);
Value map_filter(const Value& seq, const CallArgs& args);
Value groupby(const Value& seq, const CallArgs& args);
Value min_max(const Value& seq, const CallArgs& args, bool want_max, const char* name);
Value unique(const Value& seq, const CallArgs& args);
Value reverse(const Value& v);

}  // namespace grpo::tok::jinja::sequences
