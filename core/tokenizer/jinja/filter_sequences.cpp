// The filters over sequences and attributes: select/reject(attr), sort, map,
// min/max, unique, reverse, and jinja's dotted attribute paths they share.
#include "tokenizer/jinja/filter_sequences.h"

#include <algorithm>

#include "tokenizer/jinja/error.h"
#include "tokenizer/jinja/pystr.h"

namespace grpo::tok::jinja::sequences {

// jinja's make_attrgetter: "a.b.0" looks up a, then b, then item 0.
std::vector<Value> attribute_path(const Value& attribute) {
  std::vector<Value> parts;
  if (!attribute.is_string()) {
    parts.push_back(attribute);
    return parts;
  }
  for (const auto& part : py::split(attribute.as_string(), std::string("."), -1)) {
    // Past 18 digits no list is that long: kept as a key (nothing found), never a stoll overflow.
    bool digits = !part.empty() && part.size() <= 18 && part.find_first_not_of("0123456789") == std::string::npos;
    parts.push_back(digits ? Value(static_cast<int64_t>(std::stoll(part))) : Value(part));
  }
  return parts;
}

Value lookup_path(Value item, const std::vector<Value>& path, const std::optional<Value>& fallback) {
  for (const auto& part : path) {
    item = get_item(item, part);
    if (fallback && item.is_undefined()) return *fallback;
  }
  return item;
}

Value lowered(const Value& v, bool case_sensitive) {
  return (!case_sensitive && v.is_string()) ? Value(py::lower(v.as_string())) : v;
}

Value iterator(ValueList items) { return Value::sequence(std::move(items), Value::Seq::Iterator); }

Value select_or_reject(const char* name, const Value& seq, const CallArgs& args, bool by_attribute, bool select) {
  // jinja tests `if value:` before anything else, so None, 0 or "" yield nothing (and
  // their arguments are never checked): `messages|selectattr(...)` on an absent field.
  if (!seq.truthy()) return iterator({});
  size_t next = 0;
  std::vector<Value> path;
  if (by_attribute) {
    if (args.positional.empty()) throw JinjaError(what(name) + " needs an attribute name");
    path = attribute_path(args.positional[next++]);
  }
  std::optional<std::string> test;
  CallArgs test_args;
  if (next < args.positional.size()) {
    if (!args.positional[next].is_string()) throw JinjaError(what(name) + ": the test name must be a string");
    test = args.positional[next++].as_string();
    test_args.positional.assign(args.positional.begin() + static_cast<long>(next), args.positional.end());
    test_args.keyword = args.keyword;
  }
  ValueList out;
  for (const auto& item : iterate(seq)) {
    Value subject = by_attribute ? lookup_path(item, path) : item;
    bool passed = test ? apply_test(*test, subject, test_args) : subject.truthy();
    if (passed == select) out.push_back(item);
  }
  return iterator(std::move(out));
}

ValueList sorted(const Value& seq, bool reverse, bool case_sensitive, const std::optional<Value>& attribute) {
  ValueList items = iterate(seq);
  std::vector<std::vector<Value>> paths;
  if (attribute && !attribute->is_none()) {
    if (attribute->is_string()) {
      for (const auto& part : py::split(attribute->as_string(), std::string(","), -1)) paths.push_back(attribute_path(Value(part)));
    } else {
      paths.push_back(attribute_path(*attribute));
    }
  }
  std::vector<std::pair<ValueList, size_t>> keyed;
  for (size_t i = 0; i < items.size(); ++i) {
    ValueList key;
    if (paths.empty()) key.push_back(lowered(items[i], case_sensitive));
    for (const auto& p : paths) key.push_back(lowered(lookup_path(items[i], p), case_sensitive));
    keyed.emplace_back(std::move(key), i);
  }
  auto less = [](const ValueList& a, const ValueList& b) {
    for (size_t i = 0; i < a.size(); ++i) {
      if (py_less(a[i], b[i])) return true;
      if (py_less(b[i], a[i])) return false;
    }
    return false;
  };
  std::stable_sort(keyed.begin(), keyed.end(),
                   [&](const auto& x, const auto& y) { return reverse ? less(y.first, x.first) : less(x.first, y.first); });
  ValueList out;
  for (const auto& k : keyed) out.push_back(items[k.second]);
  return out;
}

Value map_filter(const Value& seq, const CallArgs& args) {
  if (!seq.truthy()) return iterator({});  // as select: jinja's `if value:`
  ValueList out;
  ValueList items = iterate(seq);
  if (args.positional.empty()) {
    auto p = Params(what("map"), args, {"attribute", "default"});
    std::vector<Value> path = attribute_path(p.get(0));
    std::optional<Value> fallback;
    if (p.has(1) && !p.get(1).is_none()) fallback = p.get(1);
    for (const auto& item : items) out.push_back(lookup_path(item, path, fallback));
    return iterator(std::move(out));
  }
  if (!args.positional[0].is_string()) throw JinjaError("filter 'map': the filter name must be a string");
  std::string filter = args.positional[0].as_string();
  CallArgs rest;
  rest.positional.assign(args.positional.begin() + 1, args.positional.end());
  rest.keyword = args.keyword;
  for (const auto& item : items) out.push_back(apply_filter(filter, item, rest));
  return iterator(std::move(out));
}

Value groupby(const Value& seq, const CallArgs& args) {
  Params p(what("groupby"), args, {"attribute", "default", "case_sensitive"});
  std::vector<Value> path = attribute_path(p.get(0));
  std::optional<Value> fallback;
  if (p.has(1) && !p.get(1).is_none()) fallback = p.get(1);
  bool case_sensitive = p.has(2) && p.get(2).truthy();
  ValueList items = iterate(seq);
  std::vector<std::pair<Value, size_t>> keyed;
  for (size_t i = 0; i < items.size(); ++i)
    keyed.emplace_back(lowered(lookup_path(items[i], path, fallback), case_sensitive), i);
  std::stable_sort(keyed.begin(), keyed.end(), [](const auto& x, const auto& y) { return py_less(x.first, y.first); });
  // itertools.groupby over the sorted items: runs of equal keys. A case-insensitive
  // group is named by its first item's own (unlowered) key, as jinja does.
  ValueList out;
  for (size_t start = 0; start < keyed.size();) {
    size_t end = start + 1;
    while (end < keyed.size() && py_equal(keyed[end].first, keyed[start].first)) ++end;
    ValueList group;
    for (size_t k = start; k < end; ++k) group.push_back(items[keyed[k].second]);
    Value grouper = case_sensitive ? keyed[start].first : lookup_path(group[0], path, fallback);
    out.push_back(Value::group_tuple(std::move(grouper), std::move(group)));
    start = end;
  }
  return Value::sequence(std::move(out));
}

Value min_max(const Value& seq, const CallArgs& args, bool want_max, const char* name) {
  Params p(what(name), args, {"case_sensitive", "attribute"});
  bool case_sensitive = p.has(0) && p.get(0).truthy();
  std::vector<Value> path;
  if (p.has(1) && !p.get(1).is_none()) path = attribute_path(p.get(1));
  ValueList items = iterate(seq);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  size_t best = 0;
  Value best_key = lowered(lookup_path(items[0], path), case_sensitive);
  for (size_t i = 1; i < items.size(); ++i) {
    Value key = lowered(lookup_path(items[i], path), case_sensitive);
    if (want_max ? py_less(best_key, key) : py_less(key, best_key)) best = i, best_key = key;
  }
  return items[best];
}

Value unique(const Value& seq, const CallArgs& args) {
  Params p(what("unique"), args, {"case_sensitive", "attribute"});
  bool case_sensitive = p.has(0) && p.get(0).truthy();
  std::vector<Value> path;
  if (p.has(1) && !p.get(1).is_none()) path = attribute_path(p.get(1));
  ValueList out, seen;
  for (const auto& item : iterate(seq)) {
    Value key = lowered(lookup_path(item, path), case_sensitive);
    if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return py_equal(s, key); })) continue;
    seen.push_back(key);
    out.push_back(item);
  }
  return iterator(std::move(out));
}

Value reverse(const Value& v) {
  if (v.is_string()) {
    std::u32string s = py::decode(v.as_string());
    std::reverse(s.begin(), s.end());
    return Value(py::encode(s));
  }
  bool generator = v.is_sequence() && v.seq() == Value::Seq::Iterator;
  ValueList items = iterate(v);
  std::reverse(items.begin(), items.end());
  // reversed() of a list or dict is an iterator; a generator is listed and reversed instead.
  return Value::sequence(std::move(items), generator ? Value::Seq::List : Value::Seq::Iterator);
}

}  // namespace grpo::tok::jinja::sequences
