// The Jinja engine against Python's jinja2. Every case of
// tests/data/chat_templates/renders.json — real models' chat templates over
// many conversations, and small snippets exercising one behaviour each — was
// rendered by jinja2 configured as transformers configures it
// (make_renders.py beside the data); the engine must reproduce each output
// byte for byte, and fail where Python failed. The unit tests below check
// what renders.json cannot: error messages, the injected clock, the API.
#include "tokenizer/jinja/template.h"
#include "tokenizer/jinja/value.h"

#include <gtest/gtest.h>

#include <cctype>
#include <ctime>
#include <fstream>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

namespace {

using grpo::tok::jinja::JinjaError;
using grpo::tok::jinja::render_chat_template;
using grpo::tok::jinja::RenderOptions;
using grpo::tok::jinja::Template;
using grpo::tok::jinja::Value;
using nlohmann::ordered_json;

const std::string kDataDir = std::string(GRPO_TEST_DATA_DIR) + "/chat_templates/";

ordered_json read_json(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw std::runtime_error("cannot open " + path);
  return ordered_json::parse(f);
}

// Loaded once; an empty object when the file is missing (DataIsPresent then fails).
const ordered_json& renders() {
  static const ordered_json data = [] {
    try {
      return read_json(kDataDir + "renders.json");
    } catch (const std::exception&) {
      return ordered_json::object();
    }
  }();
  return data;
}

size_t count_of(const char* key) {
  const auto& r = renders();
  return r.contains(key) ? r[key].size() : 0;
}

// The fixed clock the reference renders used for strftime_now ("2024-07-26T10:30:05").
std::tm reference_now() {
  std::tm tm{};
  std::istringstream in(renders().value("now", std::string("2024-07-26T10:30:05")));
  in >> std::get_time(&tm, "%Y-%m-%dT%H:%M:%S");
  time_t t = timegm(&tm);  // fills in the weekday and the day of the year
  gmtime_r(&t, &tm);
  return tm;
}

RenderOptions reference_options() {
  RenderOptions o;
  o.now = reference_now;
  return o;
}

// "qwen3" or "command_r_plus/tool_use" -> the template text in <model>.json.
std::string template_source(const std::string& id) {
  size_t slash = id.find('/');
  ordered_json data = read_json(kDataDir + id.substr(0, slash) + ".json");
  const auto& t = data.at("chat_template");
  if (t.is_string()) return t.get<std::string>();
  for (const auto& named : t)
    if (named.at("name") == id.substr(slash + 1)) return named.at("template").get<std::string>();
  throw std::runtime_error("no template named " + id);
}

// Renders one case and compares it with Python's result.
void check_case(const std::string& source, const ordered_json& c) {
  std::string out;
  try {
    out = Template(source).render(c.at("context"), reference_options());
  } catch (const JinjaError& e) {
    ASSERT_TRUE(c.contains("error")) << "unexpected error: " << e.what();
    if (c.at("raised_by_template").get<bool>()) {
      EXPECT_TRUE(e.raised_by_template()) << e.what();
      EXPECT_EQ(std::string(e.what()), c.at("error").get<std::string>());
    } else {
      EXPECT_FALSE(e.raised_by_template()) << e.what();
    }
    return;
  }
  ASSERT_FALSE(c.contains("error")) << "Python raised \"" << c.at("error").get<std::string>()
                                     << "\" but the engine rendered:\n" << out;
  EXPECT_EQ(out, c.at("expected").get<std::string>());
}

std::string test_name(std::string s) {
  for (char& ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

TEST(JinjaRenders, DataIsPresent) {
  EXPECT_GE(count_of("cases"), 200u) << "missing or truncated " << kDataDir << "renders.json";
  EXPECT_GE(count_of("snippets"), 50u);
  // The Qwen3 template the other tests ship is among those checked here.
  EXPECT_EQ(read_json(std::string(GRPO_TEST_DATA_DIR) + "/qwen3-tokenizer_config.json").at("chat_template"),
            read_json(kDataDir + "qwen3.json").at("chat_template"));
}

class TemplateCase : public ::testing::TestWithParam<size_t> {};

TEST_P(TemplateCase, MatchesPython) {
  const auto& c = renders().at("cases").at(GetParam());
  SCOPED_TRACE(c.at("template").get<std::string>() + " / " + c.at("name").get<std::string>());
  check_case(template_source(c.at("template").get<std::string>()), c);
}

INSTANTIATE_TEST_SUITE_P(ChatTemplates, TemplateCase, ::testing::Range<size_t>(0, count_of("cases")),
                         [](const ::testing::TestParamInfo<size_t>& param) {
                           const auto& c = renders().at("cases").at(param.param);
                           return test_name(c.at("template").get<std::string>() + "__" + c.at("name").get<std::string>());
                         });

class SnippetCase : public ::testing::TestWithParam<size_t> {};

TEST_P(SnippetCase, MatchesPython) {
  const auto& s = renders().at("snippets").at(GetParam());
  SCOPED_TRACE(s.at("source").get<std::string>());
  check_case(s.at("source").get<std::string>(), s);
}

INSTANTIATE_TEST_SUITE_P(Engine, SnippetCase, ::testing::Range<size_t>(0, count_of("snippets")),
                         [](const ::testing::TestParamInfo<size_t>& param) { return "snippet_" + std::to_string(param.param); });

// --- Unit tests -----------------------------------------------------------------------

std::string render(const std::string& source, const ordered_json& context = ordered_json::object()) {
  return Template(source).render(context);
}

// The message of the JinjaError that rendering (or parsing) raises; "" if none.
std::string error_of(const std::string& source, const ordered_json& context = ordered_json::object()) {
  try {
    render(source, context);
  } catch (const JinjaError& e) {
    return e.what();
  }
  return "";
}

TEST(Jinja, WhitespaceControl) {
  EXPECT_EQ(render("a  {{- 'b' -}}  c"), "abc");
  EXPECT_EQ(render("a\n  {%- if true %}b{% endif -%}\n  c"), "abc");
  EXPECT_EQ(render("{{ 'x' }}\n"), "x");  // one trailing newline of the template is dropped
  EXPECT_EQ(render("{{ 'x' }}\n\n"), "x\n");
}

// An attribute path's digits past 64 bits index nothing (jinja2: undefined);
// before, they overflowed std::stoll, an exception no caller expects.
TEST(Jinja, AnIndexPastSixtyFourBitsIsUndefinedNotAnOverflow) {
  EXPECT_EQ(render("{{ [[1]] | map(attribute='99999999999999999999') | list | length }}"), "1");
  EXPECT_EQ(render("{{ [[1]] | map(attribute='0') | list }}"), "[1]");
}

// jinja's select, reject, selectattr, rejectattr and map test `if value:` first:
// None (a message's absent tool_calls) yields nothing instead of "not iterable".
TEST(Jinja, SelectAndMapOnNoneYieldNothing) {
  EXPECT_EQ(render("{{ x|select|list }}{{ x|reject('none')|list }}{{ x|selectattr('a')|list }}"
                   "{{ x|rejectattr('a', 'eq', 1)|list }}{{ x|map(attribute='a')|list }}{{ nothing|map('upper')|list }}"
                   "{{ ''|select|list }}",
                   {{"x", nullptr}}),
            "[][][][][][][]");
}

// markupsafe's Markup: a plain string added to a safe one is escaped; `~`
// joins plainly (autoescape is off, as in transformers). Expected strings
// are Python jinja2 3.1's.
TEST(Jinja, SafeStringsEscapeWhatIsAddedToThem) {
  EXPECT_EQ(render("{{ '<a>'|safe + '<b>' }}|{{ '<b>' + '<a>'|safe }}|{{ '<a>'|safe ~ '<b>' }}|{{ '<a>'|escape + '&' }}"
                   "|{{ '<a>'|escape|escape }}|{{ ('x'|safe + '<')|string + '<' }}|{{ '<'|forceescape|forceescape }}"),
            "<a>&lt;b&gt;|&lt;b&gt;<a>|<a><b>|&lt;a&gt;&amp;|&lt;a&gt;|x&lt;&lt;|&amp;lt;");
}

// Python's ints are unbounded: a tool schema's uint64 bound and `2 ** 64`
// print exactly (held to 128 bits; past them is an error, never a wrap).
TEST(Jinja, IntegersPastSixtyFourBitsAreExact) {
  ordered_json big = ordered_json::parse(R"({"maximum": 18446744073709551615, "minimum": -9223372036854775808})");
  EXPECT_EQ(render("{{ big|tojson }}|{{ big.maximum }}|{{ 2 ** 64 }}|{{ big.maximum + 1 }}|{{ 18446744073709551616 - 1 }}"
                   "|{{ -(2 ** 70) }}|{{ (2**64) // 3 }}|{{ 2**64 > big.maximum }}|{{ '18446744073709551616'|int }}"
                   "|{{ [2**64] }}",
                   {{"big", big}}),
            "{\"maximum\": 18446744073709551615, \"minimum\": -9223372036854775808}|18446744073709551615"
            "|18446744073709551616|18446744073709551616|18446744073709551615|-1180591620717411303424"
            "|6148914691236517205|True|18446744073709551616|[18446744073709551616]");
  EXPECT_EQ(Value::from_json(big).to_json().dump(), big.dump());
  EXPECT_NE(error_of("{{ 2 ** 200 }}").find("integer overflow"), std::string::npos);
}

TEST(Jinja, GroupbyGroupsSortedItems) {
  ordered_json ms = ordered_json::parse(
      R"([{"role": "user", "n": "B"}, {"role": "tool", "n": "a"}, {"role": "User", "n": "c"}, {"role": "assistant"}])");
  EXPECT_EQ(render("{% for g in ms|groupby('role') %}{{ g.grouper }}:{{ g.list|map(attribute='n', default='-')|join(',') }};"
                   "{% endfor %}|{% for k, v in ms|groupby('role', case_sensitive=true) %}{{ k }}={{ v|length }};{% endfor %}"
                   "|{{ ms|groupby('n', default='z')|map(attribute='grouper')|list }}",
                   {{"ms", ms}}),
            "assistant:-;tool:a;user:B,c;|User=1;assistant=1;tool=1;user=1;|['a', 'B', 'c', 'z']");
}

TEST(Jinja, TrimAndLstripBlocks) {
  // trim_blocks drops the newline after a block tag; lstrip_blocks the indent before it.
  EXPECT_EQ(render("<\n  {% if true %}\n  body\n  {% endif %}\n>"), "<\n  body\n>");
  EXPECT_EQ(render("  {# comment #}\nx"), "x");
  // {{ }} tags are neither trimmed nor stripped; `+` keeps the indent.
  EXPECT_EQ(render("  {{ 1 }}\n  {%+ if true %}y{% endif %}"), "  1\n  y");
}

TEST(Jinja, LoopsAndNamespace) {
  EXPECT_EQ(render("{% for m in ms %}{{ loop.index0 }}{{ m.role[0] }}{% if not loop.last %},{% endif %}{% endfor %}",
                   {{"ms", {{{"role", "user"}}, {{"role", "assistant"}}}}}),
            "0u,1a");
  EXPECT_EQ(render("{% set ns = namespace(n=0) %}{% for i in range(4) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}"), "6");
  EXPECT_EQ(render("{% set x = 'outer' %}{% for i in [1] %}{% set x = 'inner' %}{% endfor %}{{ x }}"), "outer");
}

TEST(Jinja, PythonReprOfValues) {
  EXPECT_EQ(render("{{ [1, 'a', none, true, 1.0, {'k': \"it's\"}] }}"), "[1, 'a', None, True, 1.0, {'k': \"it's\"}]");
  EXPECT_EQ(render("{{ 1e-5 }} {{ 0.1 }} {{ 1e16 }} {{ 2.5e15 }}"), "1e-05 0.1 1e+16 2500000000000000.0");
}

TEST(Jinja, SlicingAndFilters) {
  ordered_json ctx = {{"xs", {1, 2, 3}}};
  EXPECT_EQ(render("{{ xs[::-1] }} {{ xs[1:] }} {{ 'abc'[::-1] }}", ctx), "[3, 2, 1] [2, 3] cba");
  EXPECT_EQ(render("{{ {'b': 1, 'a': 'é'}|tojson }}"), "{\"b\": 1, \"a\": \"é\"}");
  EXPECT_EQ(render("{{ x|tojson(indent=2) }}", {{"x", {{"a", {1}}}}}), "{\n  \"a\": [\n    1\n  ]\n}");
}

TEST(Jinja, ErrorsNameTheLineAndTheConstruct) {
  EXPECT_EQ(error_of("line one\n\n{{ 'text'|wordwrap(5) }}"), "chat template line 3: the filter 'wordwrap' is not supported");
  EXPECT_EQ(error_of("{{ x|frobnicate }}"), "chat template line 1: no filter named 'frobnicate'");
  EXPECT_EQ(error_of("a\n{% include 'other.jinja' %}"), "chat template line 2: the tag 'include' is not supported");
  EXPECT_EQ(error_of("{% frob %}"), "chat template line 1: unknown tag 'frob'");
  EXPECT_NE(error_of("{% if x %}\nno end").find("was never closed"), std::string::npos);
  EXPECT_EQ(error_of("\n{{ 'a' + 1 }}"), "chat template line 2: can only concatenate str (not \"int\") to str");
  EXPECT_EQ(error_of("{{ missing.attr }}"), "chat template line 1: 'missing' is undefined");
  EXPECT_EQ(error_of("{% break %}"), "chat template line 1: 'break' outside of a loop");
  EXPECT_NE(error_of("{{ 1 +"), "");
}

TEST(Jinja, WhatPythonPrintsByAddressIsAnError) {
  // Python prints "<generator object ... at 0x...>"; nothing can match that, so it is refused.
  EXPECT_NE(error_of("{{ xs|select('odd') }}", {{"xs", {1}}}).find("apply |list first"), std::string::npos);
  EXPECT_EQ(render("{{ xs|select('odd')|list }}", {{"xs", {1, 2, 3}}}), "[1, 3]");
  // Python's ints are unbounded; these are 128-bit and say so rather than wrap.
  EXPECT_NE(error_of("{{ 2 ** 128 }}").find("integer overflow"), std::string::npos);
  // Runaway recursion is an error, as Python's RecursionError is, not a crash.
  EXPECT_NE(error_of("{% macro m(n) %}{{ m(n + 1) }}{% endmacro %}{{ m(0) }}").find("maximum recursion depth"),
            std::string::npos);
}

// Found by chat_template_fuzz: 2,000 minus signs overflowed the renderer's
// stack. Parsing bounds every kind of nesting, and deep trees are freed
// without recursion.
TEST(Jinja, NestingPastTheLimitIsAnErrorNotAStackOverflow) {
  auto repeat = [](const std::string& piece, int n) {
    std::string out;
    for (int i = 0; i < n; ++i) out += piece;
    return out;
  };
  const std::string deep = "nests expressions or blocks more than 256 levels deep";
  for (const std::string& source :
       {"{{ " + repeat("-", 100000) + "1 }}", "{{ " + repeat("not ", 5000) + "x }}", "{{ 1" + repeat(" + 1", 50000) + " }}",
        "{{ " + repeat("(", 5000) + "1" + repeat(")", 5000) + " }}", "{{ x" + repeat("|trim", 20000) + " }}",
        "{{ x" + repeat(".a", 20000) + " }}", repeat("{% if x %}", 3000) + repeat("{% endif %}", 3000)})
    EXPECT_NE(error_of(source).find(deep), std::string::npos) << source.substr(0, 40) << ": " << error_of(source);
  EXPECT_EQ(render("{{ " + repeat("-", 100) + "1 }}", ordered_json::object()), "1");
}

TEST(Jinja, RaiseExceptionKeepsTheTemplatesMessage) {
  const std::string source = "{% if messages|length > 1 %}\n{{ raise_exception('Only one message, please.') }}\n{% endif %}";
  try {
    Template(source).render({{"messages", {1, 2}}});
    FAIL() << "expected raise_exception to throw";
  } catch (const JinjaError& e) {
    EXPECT_STREQ(e.what(), "Only one message, please.");
    EXPECT_TRUE(e.raised_by_template());
    EXPECT_EQ(e.line(), 2);
  }
  // A JinjaError is a user error: the host reports it as a problem with the user's model.
  EXPECT_THROW(Template(source).render({{"messages", {1, 2}}}), grpo::UserError);
}

TEST(Jinja, StrftimeNowUsesTheInjectedClock) {
  Template t("{{ strftime_now('%d %b %Y') }}");
  RenderOptions options;
  options.now = [] {
    std::tm tm{};
    tm.tm_year = 125;  // 2025
    tm.tm_mon = 0;
    tm.tm_mday = 9;
    return tm;
  };
  EXPECT_EQ(t.render(ordered_json::object(), options), "09 Jan 2025");
  // Without a clock it is today: at least the year matches the system clock's.
  std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  EXPECT_EQ(Template("{{ strftime_now('%Y') }}").render(ordered_json::object()), std::to_string(1900 + local.tm_year));
}

TEST(Jinja, ParsesOnceRendersMany) {
  Template t("{{ bos_token }}{% for m in messages %}[{{ m.content }}]{% endfor %}");
  EXPECT_EQ(t.render({{"bos_token", "<s>"}, {"messages", {{{"content", "a"}}}}}), "<s>[a]");
  Template copy = t;
  EXPECT_EQ(copy.render({{"messages", ordered_json::array()}}), "");
  EXPECT_EQ(render_chat_template("{{ x }}", {{"x", 3}}), "3");
}

TEST(Jinja, ValuesConvertToAndFromJsonInOrder) {
  ordered_json j = ordered_json::parse(R"({"z": 1, "a": [true, null, 2.5, "s"], "m": {"y": {}, "b": []}})");
  Value v = Value::from_json(j);
  EXPECT_EQ(v.repr(), "{'z': 1, 'a': [True, None, 2.5, 's'], 'm': {'y': {}, 'b': []}}");
  EXPECT_EQ(v.to_json().dump(), j.dump());
  EXPECT_THROW(Value().to_json(), JinjaError);
}

}  // namespace
