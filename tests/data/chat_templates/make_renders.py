#!/usr/bin/python3
"""Writes renders.json: every chat template beside this script rendered over a
set of conversations by Python's jinja2 (Debian's python3-jinja2), configured
exactly as Hugging Face transformers' apply_chat_template configures it, plus
small engine snippets rendered the same way. tests/tokenizer/jinja_test.cpp
checks the C++ engine against every case byte for byte.

    apt-get install python3-jinja2
    /usr/bin/python3 tests/data/chat_templates/make_renders.py

transformers renders with
    ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                  extensions=[AssistantTracker, jinja2.ext.loopcontrols])
    filters["tojson"] = json.dumps(x, ensure_ascii=False, indent=indent, separators=separators, sort_keys=sort_keys)
    globals: raise_exception(message), strftime_now(format)
    render(messages=..., tools=tools or None, documents=documents or None,
           add_generation_prompt=..., **special_tokens, **extra_kwargs)
strftime_now reads a fixed clock here (FIXED_NOW) so that the renders are
reproducible; the C++ test injects the same time.
"""
import datetime
import json
import os

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))
FIXED_NOW = datetime.datetime(2024, 7, 26, 10, 30, 5)


class TemplateRaised(jinja2.exceptions.TemplateError):
    """What raise_exception() raises, told apart from jinja's own errors."""


class GenerationBlock(Extension):
    """{% generation %}...{% endgeneration %}: renders its body (transformers
    also records where the assistant's text lies, which does not change the text)."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def raise_exception(message):
    raise TemplateRaised(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(format):
    return FIXED_NOW.strftime(format)


def environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationBlock, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


# --- Conversations -------------------------------------------------------------------

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city — temperature in °C.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. Zürich"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "days": {"type": "integer", "minimum": 1, "maximum": 7.5},
            },
            "required": ["city"],
        },
    },
}
SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Search the web.\nReturns \"snippets\".",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
        "return": {"type": "array"},
    },
}
TOOLS = [WEATHER_TOOL, SEARCH_TOOL]

# Command R's own tool format (parameter_definitions), which its tool_use template reads.
COHERE_TOOLS = [
    {"name": "internet_search", "description": "Returns a list of relevant document snippets for a textual query.",
     "parameter_definitions": {"query": {"description": "Query to search the internet with", "type": "str",
                                         "required": True}}},
    {"name": "directly_answer", "description": "Calls a standard (un-augmented) AI chatbot to generate a response.",
     "parameter_definitions": {}},
    {"name": "lookup", "description": "Looks a key up.",
     "parameter_definitions": {"key": {"description": "The key", "type": "str", "required": True},
                               "limit": {"description": "At most this many", "type": "int", "required": False}}},
]
DOCUMENTS = [
    {"title": "Tall penguins", "text": "Emperor penguins are the tallest growing up to 122 cm in height."},
    {"title": "Penguin habitats", "text": "Emperor penguins only live in Antarctica."},
]

CALL_WEATHER = {"id": "call00001", "type": "function",
                "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}}
CALL_SEARCH = {"id": "call00002", "type": "function",
               "function": {"name": "search", "arguments": {"query": "Paris events «today»"}}}

CONVERSATIONS = {
    "single_user": [{"role": "user", "content": "Hello, how are you?"}],
    "system_user": [{"role": "system", "content": "You are a concise assistant."},
                    {"role": "user", "content": "What is 2+2?"}],
    "multi_turn": [{"role": "system", "content": "You are a helpful assistant."},
                   {"role": "user", "content": "Name a prime number."},
                   {"role": "assistant", "content": "7 is a prime number."},
                   {"role": "user", "content": "And an even one?"}],
    "ends_with_assistant": [{"role": "user", "content": "Say hi."},
                            {"role": "assistant", "content": "Hi!"},
                            {"role": "user", "content": "Again."},
                            {"role": "assistant", "content": "Hi again!"}],
    "non_ascii": [{"role": "user", "content": "Café — naïve 日本語 🙂 «quotes» \"double\" 'single' \\back\\slash"},
                  {"role": "assistant", "content": "Ça va ! 你好 🎉"},
                  {"role": "user", "content": "Tab\tand\nnewline\r\nand\u00a0nbsp\u2028sep"}],
    "whitespace": [{"role": "system", "content": "  padded system  \n"},
                   {"role": "user", "content": "\n\n  leading and trailing  \n\n"},
                   {"role": "assistant", "content": "  answer with spaces \n"},
                   {"role": "user", "content": "last"}],
    "content_parts": [{"role": "system", "content": [{"type": "text", "text": "System as parts."}]},
                      {"role": "user", "content": [{"type": "text", "text": "First part."},
                                                   {"type": "text", "text": " Second part."}]}],
    "roles_not_alternating": [{"role": "user", "content": "one"}, {"role": "user", "content": "two"}],
    "empty": [],
    "tool_call": [{"role": "system", "content": "Use tools when helpful."},
                  {"role": "user", "content": "What's the weather in Paris?"},
                  {"role": "assistant", "content": "", "tool_calls": [CALL_WEATHER]},
                  {"role": "tool", "name": "get_weather", "tool_call_id": "call00001",
                   "content": "{\"temperature\": 21.5, \"condition\": \"sunny\"}"},
                  {"role": "assistant", "content": "It is sunny and 21.5 °C in Paris."}],
    "parallel_tool_calls": [{"role": "user", "content": "Weather and events in Paris?"},
                            {"role": "assistant", "content": "Let me check.", "tool_calls": [CALL_WEATHER, CALL_SEARCH]},
                            {"role": "tool", "name": "get_weather", "tool_call_id": "call00001", "content": "21.5 °C"},
                            {"role": "tool", "name": "search", "tool_call_id": "call00002", "content": "A concert."}],
    "tool_call_no_content": [{"role": "user", "content": "Weather in Paris?"},
                             {"role": "assistant", "content": None, "tool_calls": [
                                 {"type": "function", "function": {"name": "get_weather",
                                                                   "arguments": "{\"city\": \"Paris\"}"}}]},
                             {"role": "tool", "content": "21 °C"}],
    "reasoning_in_content": [{"role": "user", "content": "What is 3*4?"},
                             {"role": "assistant", "content": "<think>\n3*4 is 12.\n</think>\n\n12"},
                             {"role": "user", "content": "And 5*6?"}],
    "reasoning_field": [{"role": "user", "content": "What is 3*4?"},
                        {"role": "assistant", "content": "12", "reasoning_content": "Multiply: 12."},
                        {"role": "user", "content": "And 5*6?"},
                        {"role": "assistant", "content": "<think>\nMultiply again.\n</think>\n\n30"}],
}

# Conversations that carry tools (transformers' tools=), and the templates' own tool formats.
TOOL_CONVERSATIONS = {"tool_call", "parallel_tool_calls", "tool_call_no_content"}


def uses(source, word):
    return word in source


def cases_for(template_id, source, tokens):
    """(name, context) pairs for one template."""
    base = dict(tokens)
    out = []

    def add(name, messages, add_generation_prompt, tools=None, documents=None, **extra):
        context = {"messages": messages, "tools": tools, "documents": documents,
                   "add_generation_prompt": add_generation_prompt}
        context.update(base)
        context.update(extra)
        out.append((name, context))

    if template_id.endswith("/tool_use"):
        # transformers picks a tokenizer's "tool_use" template only when tools are passed.
        for conv in ("system_user", "multi_turn", "ends_with_assistant"):
            add(conv + "/tools", CONVERSATIONS[conv], True, tools=COHERE_TOOLS)
        add("multi_turn/tools/no_generation_prompt", CONVERSATIONS["multi_turn"], False, tools=COHERE_TOOLS)
        return out
    if template_id.endswith("/rag"):
        # ... and its "rag" template only when documents are passed.
        for conv in ("system_user", "multi_turn", "non_ascii"):
            add(conv + "/documents", CONVERSATIONS[conv], True, documents=DOCUMENTS)
        add("single_user/documents/accurate", CONVERSATIONS["single_user"], True, documents=DOCUMENTS,
            citation_mode="accurate")
        return out
    for conv, messages in CONVERSATIONS.items():
        if conv in TOOL_CONVERSATIONS:
            continue
        add(conv, messages, True)
    for conv in ("single_user", "multi_turn", "ends_with_assistant"):
        add(conv + "/no_generation_prompt", CONVERSATIONS[conv], False)
    if uses(source, "tools"):
        tools = TOOLS
        add("system_user/tools", CONVERSATIONS["system_user"], True, tools=tools)
        add("single_user/tools", CONVERSATIONS["single_user"], True, tools=tools)
        for conv in sorted(TOOL_CONVERSATIONS):
            add(conv + "/tools", CONVERSATIONS[conv], True, tools=tools)
        add("tool_call/tools/no_generation_prompt", CONVERSATIONS["tool_call"], False, tools=tools)
    for conv in sorted(TOOL_CONVERSATIONS):
        add(conv, CONVERSATIONS[conv], True)
    if uses(source, "enable_thinking"):
        for conv in ("single_user", "reasoning_in_content", "multi_turn"):
            add(conv + "/thinking_off", CONVERSATIONS[conv], True, enable_thinking=False)
            add(conv + "/thinking_on", CONVERSATIONS[conv], True, enable_thinking=True)
    if uses(source, "date_string"):
        add("system_user/date_string", CONVERSATIONS["system_user"], True, date_string="01 Jan 2025")
    if uses(source, "tools_in_user_message"):
        add("tool_call/tools/tools_in_system", CONVERSATIONS["tool_call"], True, tools=TOOLS,
            tools_in_user_message=False)
    return out


# --- Engine snippets: small templates exercising one behaviour each ------------------------

# One conversation with content parts, a tool call with nested arguments and a dict tool result.
MIXED = {
    "messages": [{"role": "system", "content": "Sys"},
                 {"role": "user", "content": [{"type": "text", "text": "Hi"}, {"type": "image"},
                                              {"type": "text", "text": "there"}]},
                 {"role": "assistant", "content": "Yo", "tool_calls": [
                     {"type": "function", "function": {"name": "f", "arguments": {"x": [1, {"y": "é"}]}}}]},
                 {"role": "tool", "content": {"result": 1}},
                 {"role": "user", "content": "Last \"q\""}],
    "tools": [{"type": "function", "function": {
        "name": "get", "description": "d",
        "parameters": {"type": "object", "properties": {"b": {"type": "string"},
                                                        "a": {"type": "array", "items": {"type": "integer"}}},
                       "required": ["b"]}}}],
}

SNIPPETS = [
    ("{{ a.b }}", {"a": {"b": 1}}),
    ("{{ a.c }}|{{ a.c is defined }}|{{ a['c'] is undefined }}", {"a": {"b": 1}}),
    ("{{ missing }}|{{ missing is defined }}|{{ missing|default('d') }}|{{ ''|default('e', true) }}", {}),
    ("{{ missing.attr }}", {}),
    ("{{ x }}", {"x": [1.0, "a'b", "c\"d", None, True, {"k": 1e-05}, 1e16, 123456789.123, -0.0, 0.1]}),
    ("{{ x }}", {"x": {"nested": {"list": [1, 2, [3]], "s": "\u200b\xa0\x7f\u00e9\n\t\\"}}}),
    ("{{ (1, 2) }} {{ () }} {{ (1,) }} {{ [] }} {{ {} }}", {}),
    ("{{ 2**3**2 }} {{ 7//2 }} {{ -7//2 }} {{ -7 % 3 }} {{ 7/2 }} {{ 6/2 }} {{ 2**-1 }} {{ 7.0 // 2 }} {{ -7.5 % 2 }}", {}),
    ("{{ 0.1+0.2 }} {{ 1e100 }} {{ 1.5e-7 }} {{ 100.0 }} {{ 1e15 }} {{ 12345678901234567.0 }} {{ 1/3 }}", {}),
    ("{{ 'x' * 3 }} {{ [1] * 2 }} {{ 'a' ~ 1 ~ none ~ true }} {{ 1 + True }} {{ 1 == 1.0 }} {{ [1] == (1,) }}", {}),
    ("{{ xs[::-1] }} {{ xs[1:] }} {{ xs[:-1] }} {{ xs[-2:] }} {{ xs[::2] }} {{ xs[5] }} {{ xs[-1] }}", {"xs": [1, 2, 3, 4]}),
    ("{{ s[::-1] }} {{ s[1:3] }} {{ s[-1] }} {{ s|length }} {{ s[10] }}", {"s": "héllo 🙂"}),
    ("{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 'a' in 'cat' }} {{ 2 not in [1, 3] }} {{ 'k' in d }}", {"d": {"k": 0}}),
    ("{{ 'x' if false }}|{{ 'y' if true }}|{{ ('x' if false) is defined }}|{{ 1 if 0 else 2 }}", {}),
    ("{{ none and 1 }} {{ 0 or 'b' }} {{ not [] }} {{ 1 and 2 }} {{ '' or none }}", {}),
    ("  {% if true %}\n  x\n  {% endif %}\n  y", {}),
    ("  {{- 'a' }}  \n  {#- c #}  \n  {%+ if true %}z{% endif %}", {}),
    ("a  {%- if true -%}  b  {%- endif -%}  c\n", {}),
    ("{% for i in [1, 2] %}\n    {{ i }}\n{% endfor %}\n", {}),
    ("line\n    {# comment #}\n    {% set x = 1 %}\n{{ x }}\n\n", {}),
    ("{% raw %}{{ not parsed }} {% if %}{% endraw %}\n", {}),
    ("  {% raw %}\n  keep {{ this }}\n  {% endraw %}\nafter", {}),
    ("{{ 'a\\tb\\n\\x41\\u00e9' }}|{{ \"it's\" }}|{{ 'single \\'quoted\\'' }}|{{ 'adjacent' ' strings' }}", {}),
    ("windows\r\nline\rendings {{ 1 }}\r\n", {}),
    ("{% for a, b in [(1, 2), (3, 4)] %}{{ a }}{{ b }}{{ loop.index }}{{ loop.revindex }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{% endfor %}", {}),
    ("{% for x in xs if x > 1 %}{{ loop.index }}/{{ loop.length }}{% else %}none{% endfor %}|{% for x in [] %}{{ x }}{% else %}empty{% endfor %}", {"xs": [1, 2, 3]}),
    ("{% for x in [1, 2, 3, 4] %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}{% endif %}{{ x }}{{ loop.cycle('a', 'b') }}{% endfor %}", {}),
    ("{% for x in [1, 2, 3] %}{{ loop.previtem|default('-') }}{{ x }}{{ loop.nextitem|default('-') }} {% endfor %}", {}),
    ("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for k in d %}{{ k }}{% endfor %}", {"d": {"z": 1, "a": 2, "m": [3]}}),
    ("{% set x = 1 %}{% for i in [1, 2] %}{{ x }}{% set x = 2 %}{{ x }}{% endfor %}{{ x }}", {}),
    ("{% set ns = namespace(a=1, b='x') %}{% for i in [1, 2] %}{% set ns.a = ns.a + i %}{% endfor %}{{ ns.a }} {{ ns.b }} {{ ns }}", {}),
    ("{% set x %}  abc {{ 1 }} {% endset %}[{{ x }}]{% set y | upper | trim %} q {% endset %}[{{ y }}]", {}),
    ("{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set t = 1, 'x' %}{{ t }}", {}),
    ("{% macro m(a, b=2) %}{{ a }}-{{ b }}{% endmacro %}{{ m(1) }}|{{ m(1, 3) }}|{{ m(b=5, a=0) }}|{{ m() }}", {}),
    ("{% macro m(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, k=3) }}", {}),
    ("{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, 2) }}", {}),
    ("{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}{% call wrap('b') %}bold {{ 1 }}{% endcall %}", {}),
    ("{% filter upper %}hi {{ 'x' }}{% endfilter %}|{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}|{{ a }}", {}),
    ("{% generation %}gen {{ 1 }}{% endgeneration %}", {}),
    ("{{ x|tojson }}|{{ x|tojson(indent=2) }}|{{ x|tojson(sort_keys=true) }}", {"x": {"b": [1, 2.0, "é\n\"<>&'"], "a": None, "c": True, "d": {}, "e": []}}),
    ("{{ x|tojson(ensure_ascii=true) }}|{{ x|tojson(indent='\\t') }}|{{ x|tojson(separators=(',', ':')) }}", {"x": {"k": ["é🙂", 1.5]}}),
    ("{{ 'hello world'|title }} {{ \"they're bill's\"|title }} {{ \"they're\".title() }} {{ 'hELLO'|capitalize }} {{ 'Ab'|upper }}{{ 'Ab'|lower }}", {}),
    ("{{ '  x  '|trim }}|{{ 'xxaxx'|trim('x') }}|{{ '  x  '.strip() }}|{{ 'a\\n'.rstrip() }}|{{ '\\n\\na'.lstrip('\\n') }}|{{ 'ab'.rstrip('b') }}", {}),
    ("{{ 'a b  c'.split() }} {{ 'a,b,c'.split(',', 1) }} {{ 'a,b,c'.rsplit(',', 1) }} {{ '  a b '.split(None, 1) }} {{ ''.split(',') }}", {}),
    ("{{ 'Hello'.startswith(('He', 'x')) }} {{ 'Hello'.endswith('lo') }} {{ 'abc'.find('c') }} {{ 'abc'.find('z') }} {{ 'aaa'.count('a') }} {{ 'a-b'.replace('-', '+') }}", {}),
    ("{{ '-'.join(['a', 'b']) }} {{ 'x{}y{}'.format(1, 'z') }} {{ '{name}!'.format(name='n') }} {{ '%s and %d' % ('a', 3) }} {{ '%.2f'|format(3.14159) }}", {}),
    ("{{ xs|length }} {{ xs|count }} {{ xs|first }} {{ xs|last }} {{ xs|join(', ') }} {{ xs|reverse|list }} {{ xs|sort }} {{ xs|unique|list }} {{ xs|sum }} {{ xs|max }} {{ xs|min }}", {"xs": [3, 1, 2, 3]}),
    ("{{ ws|sort }} {{ ws|sort(reverse=true, case_sensitive=true) }} {{ ws|unique|list }} {{ d|dictsort }} {{ d|items|list }}", {"ws": ["b", "A", "a", "B"], "d": {"b": 1, "A": 2}}),
    ("{{ ms|selectattr('role', 'equalto', 'user')|map(attribute='content')|list }} {{ ms|rejectattr('role', 'eq', 'user')|list|length }} {{ ms|map(attribute='missing', default='q')|list }}", {"ms": [{"role": "user", "content": "u1"}, {"role": "assistant", "content": "a1"}, {"role": "user", "content": "u2"}]}),
    ("{{ xs|select('odd')|list }} {{ xs|select|list }} {{ xs|reject('odd')|list }} {{ xs|map('string')|join }} {% if [] | select('odd') %}gen-true{% endif %}", {"xs": [0, 1, 2, 3]}),
    ("{{ ms|selectattr('tool_calls', 'undefined')|list|length }} {{ ms|selectattr('tool_calls', 'defined')|list|length }}", {"ms": [{"role": "user"}, {"role": "assistant", "tool_calls": []}]}),
    ("{{ 3|abs }}{{ -3.5|abs }} {{ 3.7|int }} {{ '42'|int }} {{ 'x'|int }} {{ '3.5'|float }} {{ 2.5|round }} {{ 3.14159|round(2) }} {{ 3|round }} {{ 1.5|round(0, 'floor') }}", {}),
    ("{{ 'ab\\ncd'|indent(2) }}|{{ 'ab\\n\\ncd'|indent(2, true, true) }}|{{ 'x'|center(5) }}|{{ 'hello world foo'|truncate(9) }}|{{ 'a b c'|wordcount }}", {}),
    ("{{ '<a href=\"x\">&</a>'|e }} {{ 3|string }} {{ [1]|string }} {{ x|safe }} {{ 'a-b'|replace('-', '+') }}", {"x": [1]}),
    ("{{ 1 is odd }}{{ 2 is even }}{{ 9 is divisibleby 3 }}{{ 'a' is string }}{{ 1 is number }}{{ true is number }}{{ 1 is integer }}{{ true is integer }}{{ 1.0 is float }}{{ none is none }}{{ true is true }}{{ 1 is true }}{{ false is false }}{{ true is boolean }}", {}),
    ("{{ {} is mapping }}{{ [] is mapping }}{{ 'a' is iterable }}{{ 1 is iterable }}{{ missing is iterable }}{{ [] is sequence }}{{ 'a' is sequence }}{{ 'abc' is lower }}{{ 'ABC' is upper }}{{ 'x' is in 'xyz' }}{{ 1 is eq 1 }}{{ 2 is gt 1 }}{{ 'upper' is filter }}{{ 'odd' is test }}", {}),
    ("{{ range(3)|list }} {{ range(1, 10, 3)|list }} {{ range(5, 0, -2)|list }} {{ dict(a=1, b=[2]) }} {{ namespace(d).x }}", {"d": {"x": 5}}),
    ("{{ d.get('a') }} {{ d.get('z') }} {{ d.get('z', 5) }} {{ d.keys()|list }} {{ d.values()|list }} {{ d.items()|list }} {{ d.items() }}", {"d": {"a": 1, "b": 2}}),
    ("{{ raise_exception('Stop: ' ~ reason) }}", {"reason": "bad roles"}),
    ("{{ strftime_now('%d %b %Y') }}|{{ strftime_now('%Y-%m-%d %H:%M:%S %A %B %j') }}", {}),
    ("{{ 'a' + 1 }}", {}),
    ("{{ missing + 'x' }}", {}),
    ("{{ 5 // 0 }}", {}),
    ("{{ xs.append(1) }}", {"xs": []}),
    ("{% for x in none %}{% endfor %}", {}),
    # Idioms of chat templates, over one conversation with parts, tool calls and a dict tool result.
    ("{%- for m in messages %}{%- if m['content'] is not string %}{{ m.content | selectattr('type', 'equalto', 'text') | map(attribute='text') | join('\\n') }}{% else %}{{ m.content }}{% endif %}|{% endfor %}", MIXED),
    ("{%- for key, value in tools[0].function.parameters.properties | dictsort %}{{ key }}: {{ value.type }}{{ '\\n' if not loop.last }}{% endfor %}", MIXED),
    ("{%- macro render(v, depth) -%}{%- if v is mapping -%}{ {%- for k, x in v.items() -%}{{ k }}: {{ render(x, depth + 1) }}{{ ', ' if not loop.last }}{%- endfor -%} }{%- elif v is sequence and v is not string -%}[{%- for x in v -%}{{ render(x, depth + 1) }}{{ ', ' if not loop.last }}{%- endfor -%}]{%- else -%}{{ v }}@{{ depth }}{%- endif -%}{%- endmacro -%}{{ render(tools[0].function.parameters, 0) }}", MIXED),
    ("{% set ns = namespace(found=false, n=0) %}{% for m in messages %}{% for k in m %}{% if k == 'tool_calls' %}{% set ns.found = true %}{% set ns.n = ns.n + 1 %}{% endif %}{% endfor %}{% endfor %}{{ ns.found }} {{ ns.n }}", MIXED),
    ("{% for m in messages %}{% if not loop.first %}{{ loop.previtem.role }}>{% endif %}{{ m.role }} {% endfor %}", MIXED),
    ("{% for m in messages %}{% if m.content is mapping %}{{ m.content|tojson }}{% elif m.content is iterable and m.content is not string %}{{ m.content|length }}{% else %}{{ m.content }}{% endif %};{% endfor %}", MIXED),
    ("{% for m in messages if m.tool_calls is defined %}{% for tc in m.tool_calls %}{{ tc.function.name }}({{ tc.function.arguments|tojson }}){% endfor %}{% endfor %}", MIXED),
    ("{{ messages }}|{{ tools|tojson(indent=4) }}|{{ tools[0]|tojson(separators=(',', ':'), sort_keys=true) }}", MIXED),
    ("{%- for message in messages -%}\n    {%- if message.role == 'user' -%}\n        {{- 'U: ' ~ (message.content if message.content is string else message.content|map(attribute='text')|select|join(' ')) }}\n    {% elif message.role == 'assistant' %}\n        {{- 'A: ' ~ message.content }}\n    {% endif -%}\n{%- endfor %}", MIXED),
    ("{% for m in messages[::-1] %}{{ m.role[0] }}{% endfor %}|{% for m in messages|reverse %}{{ m.role[0] }}{% endfor %}|{{ (messages|last).content }}", MIXED),
    ("{{ messages[2].tool_calls[0].function.arguments.x[1].y }} {{ messages[3].content.result + 1 }} {{ messages[9] is defined }}", MIXED),
    ("{{ messages[9].role }}", MIXED),
    # Python's str methods and formatting.
    ("{{ 'Ab Cd'.swapcase() }} {{ 'ÀÉ'.lower() }} {{ 'straße'.upper() }} {{ '1'.isdigit() }} {{ 'a1'.isalnum() }} {{ ''.isdigit() }} {{ 'Ab'.islower() }} {{ 'AB1'.isupper() }}", {}),
    ("{{ 'a,b,c'.partition(',') }} {{ 'a,b,c'.rpartition(',') }} {{ 'prefix_x'.removeprefix('prefix_') }} {{ '-42'.zfill(5) }} {{ 'a\\nb\\r\\nc'.splitlines() }}", {}),
    ("{{ 'abcabc'.rfind('b') }} {{ 'abcabc'.find('b', 2) }} {{ 'abcabc'.find('b', -2) }} {{ 'hello'.startswith('ell', 1) }} {{ 'aXbXc'.replace('X', '-', 1) }} {{ '\\u3000a\\u00a0'.strip() }}", {}),
    ("{{ '%-5s|%5s|%05d|%+d|%x|%X|%o|%e|%g|%c' % ('a', 'b', 42, 3, 255, 255, 8, 12345.678, 0.00001234, 65) }}", {}),
    ("{{ '{:>8}|{:<8}|{:^8}|{:*^9}|{:08.3f}|{:+d}|{:x}|{:e}|{:%}'.format('r', 'l', 'c', 'f', 3.14159, 5, 255, 1234.5, 0.25) }} {{ '{0[k]}'.format({'k': 'v'}) }}", {}),
    ("{{ '{0}-{name}-{}'.format(1, name='n') }}", {}),
    ("{{ 2.675|round(2) }} {{ 0.125|round(2) }} {{ -2.5|round }} {{ 2.5|round(0, 'ceil') }} {{ 'x-y(z'|title }} {{ 'hello world'|truncate(7, true) }} {{ 'a\\nb'|indent('> ') }}", {}),
    ("{{ x|tojson }}|{{ x|tojson(indent=0) }}|{{ {1: 2, none: 3, true: 4, 1.5: 5}|tojson }}", {"x": {"a": [1e100, -0.0, "\U0001F600\u0001\u2028"]}}),
    ("{{ xs[1:-1] }} {{ xs[-100:100] }} {{ xs[::-2] }} {{ xs[3:1:-1] }} {{ xs[none:2] }}", {"xs": [0, 1, 2, 3, 4]}),
    ("{{ xs['a':] }}", {"xs": [1]}),
    ("{{ n[1:] }}", {"n": None}),
    ("{% for x in [1, 2, 3] %}{{ loop.changed(x // 2) }}{% endfor %} {% for a in [1, 2] %}{% for b in [3, 4] %}{{ loop.index }}{{ a }}{{ b }}{% if b == 3 %}{% break %}{% endif %}{% endfor %}{{ loop.index }}{% endfor %}", {}),
    ("{% macro m(a, b=a) %}{{ b }}{% endmacro %}{{ m(7) }} {% macro c() %}{{ caller(3) }}{% endmacro %}{% call(n) c() %}got {{ n }}{% endcall %}", {}),
    ("{% macro m(a, b) %}{{ a }}{{ b }}{% endmacro %}{{ m(1, a=2) }}", {}),
    ("{{ dict(a=1, **{'b': 2}) }} {{ dict([('k', 'v')]) }} {{ '{}-{}'.format(*[1, 2]) }} {{ [1, 2, 3][1:] + [4] }} {{ (1, 2) + (3,) }}", {}),
    ("{{ [1] + (2,) }}", {}),
    ("{{ range(100001)|length }}", {}),
    ("{{ x.y }}|{{ x[0] }}|{{ x.y is defined }}", {"x": None}),
    ("{{ 'a' in ['a'] }} {{ 1 in 'a' }}", {}),
    ("{{ 1 < 'a' }}", {}),
    ("{{ 0x1F }} {{ 0o17 }} {{ 0b101 }} {{ 1_000 }} {{ 1e3 }} {{ 1.5e-3 }} {{ '\\101\\x41\\u0041\\U0001F600\\z' }} {{ 'a\\\nb' }}", {}),
    ("{% filter trim %}  padded  {% endfilter %}|{% filter replace('a', 'b')|upper %}aaa{% endfilter %}|{% with %}{% set q = 1 %}{{ q }}{% endwith %}{{ q }}", {}),
    ("{% raw %}a{% endraw %}{%- raw -%}  b  {%- endraw -%}  c", {}),
    ("x\n  {% if true %}y{% endif %}  \n  z|{# a\nb #}\n  c\n", {}),
]


def render(env, source, context):
    try:
        return {"expected": env.from_string(source).render(**context)}
    except TemplateRaised as e:
        return {"error": str(e), "raised_by_template": True}
    except Exception as e:  # jinja's own errors and Python's (TypeError...) alike
        return {"error": f"{type(e).__name__}: {e}", "raised_by_template": False}


def main():
    env = environment()
    templates = {}
    for name in sorted(os.listdir(HERE)):
        if not name.endswith(".json") or name == "renders.json":
            continue
        with open(os.path.join(HERE, name), encoding="utf-8") as f:
            data = json.load(f)
        model = name[:-5]
        tokens = {k: data[k] for k in ("bos_token", "eos_token", "pad_token", "unk_token") if k in data}
        if isinstance(data["chat_template"], str):
            templates[model] = (data["chat_template"], tokens)
        else:
            for t in data["chat_template"]:
                templates[model + "/" + t["name"]] = (t["template"], tokens)

    cases = []
    for template_id, (source, tokens) in templates.items():
        for case_name, context in cases_for(template_id, source, tokens):
            case = {"template": template_id, "name": case_name, "context": context}
            case.update(render(env, source, context))
            cases.append(case)
    snippets = []
    for source, context in SNIPPETS:
        snippet = {"source": source, "context": context}
        snippet.update(render(env, source, context))
        snippets.append(snippet)

    out = {
        "generator": f"make_renders.py, jinja2 {jinja2.__version__}",
        "now": FIXED_NOW.isoformat(),
        "cases": cases,
        "snippets": snippets,
    }
    with open(os.path.join(HERE, "renders.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")
    errors = sum("error" in c for c in cases)
    print(f"{len(cases)} cases ({errors} expected errors) over {len(templates)} templates, {len(snippets)} snippets")


if __name__ == "__main__":
    main()
