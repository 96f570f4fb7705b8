#include "tokenizer/jinja/render.h"

#include <memory>

#include "tokenizer/jinja/ast_queries.h"
#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/error.h"
#include "tokenizer/jinja/globals.h"
#include "tokenizer/jinja/scope.h"

namespace grpo::tok::jinja {

namespace {

enum class Flow { Normal, Break, Continue };

class Renderer : public std::enable_shared_from_this<Renderer> {
 public:
  explicit Renderer(const RenderOptions& options) : options_(options) {}

  std::string run(const Body& body, const nlohmann::ordered_json& context) {
    auto globals = std::make_shared<Scope>();
    for (auto& [name, function] : global_functions(options_)) globals->set(name, std::move(function));
    auto root = std::make_shared<Scope>(globals);
    if (!context.is_null()) {
      if (!context.is_object()) throw JinjaError("the template context must be a JSON object");
      for (auto it = context.begin(); it != context.end(); ++it) root->set(it.key(), Value::from_json(it.value()));
    }
    std::string out;
    exec_body(body, root, out);
    return out;
  }

 private:
  // --- Globals ----------------------------------------------------------------------

  // --- Statements -------------------------------------------------------------------

  Flow exec_body(const Body& body, const ScopePtr& scope, std::string& out) {
    for (const auto& stmt : body) {
      Flow f;
      try {
        f = exec(*stmt, scope, out);
      } catch (const JinjaError& e) {
        if (e.line() > 0) throw;
        throw e.at_line(stmt->line);
      }
      if (f != Flow::Normal) return f;
    }
    return Flow::Normal;
  }

  std::string render_to_string(const Body& body, const ScopePtr& scope) {
    std::string out;
    exec_body(body, scope, out);
    return out;
  }

  Flow exec(const Stmt& s, const ScopePtr& scope, std::string& out) {
    switch (s.kind) {
      case Stmt::Kind::Text: out += s.text; return Flow::Normal;
      case Stmt::Kind::Output: out += eval(*s.expr, scope).str(); return Flow::Normal;
      case Stmt::Kind::If:
        for (const auto& [cond, body] : s.branches)
          if (eval(*cond, scope).truthy()) return exec_body(body, scope, out);
        return exec_body(s.else_body, scope, out);
      case Stmt::Kind::For: exec_for(s, scope, out); return Flow::Normal;
      case Stmt::Kind::Set: assign(s.target, eval(*s.expr, scope), *scope); return Flow::Normal;
      case Stmt::Kind::SetBlock: {
        Value v(render_to_string(s.body, std::make_shared<Scope>(scope)));
        for (const auto& f : s.filters) v = apply_filter_expr(*f, v, scope);
        assign(s.target, v, *scope);
        return Flow::Normal;
      }
      case Stmt::Kind::Macro: scope->set(s.text, make_macro(s, scope, s.text)); return Flow::Normal;
      case Stmt::Kind::CallBlock: {
        Value caller = make_macro(s, scope, "caller");
        out += eval_call(*s.expr, scope, &caller).str();
        return Flow::Normal;
      }
      case Stmt::Kind::FilterBlock: {
        Value v(render_to_string(s.body, std::make_shared<Scope>(scope)));
        for (const auto& f : s.filters) v = apply_filter_expr(*f, v, scope);
        out += v.str();
        return Flow::Normal;
      }
      case Stmt::Kind::With: {
        std::vector<Value> values;
        for (const auto& a : s.assignments) values.push_back(eval(*a.second, scope));
        auto inner = std::make_shared<Scope>(scope);
        for (size_t i = 0; i < values.size(); ++i) assign(s.assignments[i].first, values[i], *inner);
        return exec_body(s.body, inner, out);
      }
      case Stmt::Kind::Generation: return exec_body(s.body, scope, out);
      case Stmt::Kind::Break: return Flow::Break;
      case Stmt::Kind::Continue: return Flow::Continue;
    }
    return Flow::Normal;
  }

  void assign(const Target& t, const Value& v, Scope& scope) {
    if (!t.attribute.empty()) {
      const Value* ns = scope.find(t.names[0]);
      if (!ns || !ns->is_namespace()) throw JinjaError("cannot assign attribute on non-namespace object");
      ns->namespace_attrs().set(Value(t.attribute), v);
      return;
    }
    if (!t.unpack) {
      scope.set(t.names[0], v);
      return;
    }
    ValueList items = iterate(v);
    if (items.size() < t.names.size())
      throw JinjaError("not enough values to unpack (expected " + std::to_string(t.names.size()) + ", got " +
                       std::to_string(items.size()) + ")");
    if (items.size() > t.names.size())
      throw JinjaError("too many values to unpack (expected " + std::to_string(t.names.size()) + ")");
    for (size_t i = 0; i < items.size(); ++i) scope.set(t.names[i], items[i]);
  }

  void exec_for(const Stmt& s, const ScopePtr& scope, std::string& out) {
    ValueList items = iterate(eval(*s.expr, scope));
    if (s.cond) {
      ValueList kept;
      for (auto& item : items) {
        auto probe = std::make_shared<Scope>(scope);
        assign(s.target, item, *probe);
        if (eval(*s.cond, probe).truthy()) kept.push_back(std::move(item));
      }
      items = std::move(kept);
    }
    if (items.empty()) {
      exec_body(s.else_body, std::make_shared<Scope>(scope), out);
      return;
    }
    const auto n = static_cast<int64_t>(items.size());
    auto last_changed = std::make_shared<std::optional<ValueList>>();
    for (int64_t i = 0; i < n; ++i) {
      auto iteration = std::make_shared<Scope>(scope);
      assign(s.target, items[i], *iteration);
      Dict loop;
      loop.set(Value("index"), Value(i + 1));
      loop.set(Value("index0"), Value(i));
      loop.set(Value("revindex"), Value(n - i));
      loop.set(Value("revindex0"), Value(n - i - 1));
      loop.set(Value("first"), Value(i == 0));
      loop.set(Value("last"), Value(i == n - 1));
      loop.set(Value("length"), Value(n));
      loop.set(Value("depth"), Value(1));
      loop.set(Value("depth0"), Value(0));
      loop.set(Value("previtem"), i > 0 ? items[i - 1] : Value::undefined("there is no previous item"));
      loop.set(Value("nextitem"), i + 1 < n ? items[i + 1] : Value::undefined("there is no next item"));
      loop.set(Value("cycle"), Value::function("loop.cycle", [i](const CallArgs& a) {
        if (a.positional.empty()) throw JinjaError("no items for cycling given");
        return a.positional[static_cast<size_t>(i) % a.positional.size()];
      }));
      loop.set(Value("changed"), Value::function("loop.changed", [last_changed](const CallArgs& a) {
        bool changed = !*last_changed || a.positional.size() != (*last_changed)->size() ||
                       !std::equal(a.positional.begin(), a.positional.end(), (*last_changed)->begin(), py_equal);
        *last_changed = a.positional;
        return Value(changed);
      }));
      iteration->set("loop", Value::dict(std::move(loop)));
      if (exec_body(s.body, iteration, out) == Flow::Break) break;
    }
  }

  // A macro (or a call block's caller) as a callable value.
  Value make_macro(const Stmt& s, const ScopePtr& scope, const std::string& name) {
    std::weak_ptr<Scope> defining = scope;
    std::weak_ptr<Renderer> self = shared_from_this();
    bool varargs = mentions(s.body, "varargs"), kwargs = mentions(s.body, "kwargs");
    const Stmt* stmt = &s;
    return Value::function(name, [self, defining, stmt, name, varargs, kwargs](const CallArgs& args) {
      auto renderer = self.lock();
      auto parent = defining.lock();
      if (!renderer || !parent) throw JinjaError("the macro '" + name + "' was called after its scope ended");
      return renderer->call_macro(*stmt, name, parent, args, varargs, kwargs);
    });
  }

  Value call_macro(const Stmt& s, const std::string& name, const ScopePtr& parent, const CallArgs& args, bool catch_varargs,
                   bool catch_kwargs) {
    // Python stops runaway recursion with RecursionError; a bound keeps the C++ stack safe too.
    if (macro_depth_ >= kMaxMacroDepth) throw JinjaError("maximum recursion depth exceeded in macro '" + name + "'");
    struct Depth {
      int& d;
      explicit Depth(int& depth) : d(depth) { ++d; }
      ~Depth() { --d; }
    } depth(macro_depth_);
    auto scope = std::make_shared<Scope>(parent);
    const auto& params = s.params;
    std::vector<bool> bound(params.size(), false);
    ValueList extra;
    for (size_t i = 0; i < args.positional.size(); ++i) {
      if (i < params.size()) {
        scope->set(params[i].name, args.positional[i]);
        bound[i] = true;
      } else if (catch_varargs) {
        extra.push_back(args.positional[i]);
      } else {
        throw JinjaError("macro '" + name + "' takes not more than " + std::to_string(params.size()) + " argument(s)");
      }
    }
    Dict extra_kw;
    for (const auto& [key, value] : args.keyword) {
      if (key == "caller") {
        scope->set("caller", value);
        continue;
      }
      auto it = std::find_if(params.begin(), params.end(), [&wanted = key](const MacroParam& p) { return p.name == wanted; });
      if (it != params.end()) {
        size_t i = static_cast<size_t>(it - params.begin());
        if (bound[i]) throw JinjaError("macro '" + name + "' got multiple values for argument '" + key + "'");
        scope->set(key, value);
        bound[i] = true;
      } else if (catch_kwargs) {
        extra_kw.set(Value(key), value);
      } else {
        throw JinjaError("macro '" + name + "' takes no keyword argument '" + key + "'");
      }
    }
    for (size_t i = 0; i < params.size(); ++i) {
      if (bound[i]) continue;
      scope->set(params[i].name, params[i].default_value ? eval(*params[i].default_value, scope)
                                                         : Value::undefined("parameter '" + params[i].name + "' was not provided"));
    }
    if (catch_varargs) scope->set("varargs", Value::tuple(std::move(extra)));
    if (catch_kwargs) scope->set("kwargs", Value::dict(std::move(extra_kw)));
    return Value(render_to_string(s.body, scope));
  }

  // --- Expressions ------------------------------------------------------------------

  Value eval(const Expr& e, const ScopePtr& scope) {
    try {
      return eval_inner(e, scope);
    } catch (const JinjaError& err) {
      if (err.line() > 0) throw;
      throw err.at_line(e.line);
    }
  }

  CallArgs eval_args(const ArgList& a, const ScopePtr& scope) {
    CallArgs out;
    for (const auto& p : a.positional) out.positional.push_back(eval(*p, scope));
    if (a.star)
      for (auto& v : iterate(eval(*a.star, scope))) out.positional.push_back(std::move(v));
    for (const auto& [k, v] : a.keyword) out.keyword.emplace_back(k, eval(*v, scope));
    if (a.star_star) {
      Value d = eval(*a.star_star, scope);
      if (!d.is_dict()) throw JinjaError("argument after ** must be a mapping, not " + d.type_name());
      for (const auto& [k, v] : d.as_dict().entries()) {
        if (!k.is_string()) throw JinjaError("keywords must be strings");
        out.keyword.emplace_back(k.as_string(), v);
      }
    }
    return out;
  }

  static Value call_value(const Value& f, const CallArgs& args) {
    if (f.is_function()) return f.call(args);
    if (f.is_undefined()) fail_undefined(f);
    throw JinjaError("'" + f.type_name() + "' object is not callable");
  }

  Value eval_call(const Expr& e, const ScopePtr& scope, const Value* caller = nullptr) {
    auto with_caller = [&](CallArgs args) {
      if (caller) args.keyword.emplace_back("caller", *caller);
      return args;
    };
    if (e.a->kind == Expr::Kind::GetAttr) {
      Value obj = eval(*e.a->a, scope);
      if (has_method(obj, e.a->name)) return call_method(obj, e.a->name, with_caller(eval_args(e.args, scope)));
      Value f = get_attr(obj, e.a->name);
      return call_value(f, with_caller(eval_args(e.args, scope)));
    }
    Value f = eval(*e.a, scope);
    return call_value(f, with_caller(eval_args(e.args, scope)));
  }

  Value apply_filter_expr(const Expr& f, const Value& subject, const ScopePtr& scope) {
    return apply_filter(f.name, subject, eval_args(f.args, scope));
  }

  static bool compare(const std::string& op, const Value& a, const Value& b) {
    if (op == "==") return py_equal(a, b);
    if (op == "!=") return !py_equal(a, b);
    if (op == "<") return py_less(a, b);
    if (op == ">") return py_less(b, a);
    if (op == "<=") return py_less(a, b) || py_equal(a, b);
    if (op == ">=") return py_less(b, a) || py_equal(a, b);
    if (op == "in") return py_contains(b, a);
    return !py_contains(b, a);  // not in
  }

  Value eval_inner(const Expr& e, const ScopePtr& scope) {
    using K = Expr::Kind;
    switch (e.kind) {
      case K::Constant: return e.value;
      case K::Name: {
        const Value* v = scope->find(e.name);
        return v ? *v : Value::undefined("'" + e.name + "' is undefined");
      }
      case K::List:
      case K::Tuple: {
        ValueList items;
        for (const auto& i : e.items) items.push_back(eval(*i, scope));
        return Value::sequence(std::move(items), e.kind == K::List ? Value::Seq::List : Value::Seq::Tuple);
      }
      case K::Dict: {
        Dict d;
        for (size_t i = 0; i + 1 < e.items.size(); i += 2) {
          Value key = eval(*e.items[i], scope);
          if (key.is_sequence() && key.seq() != Value::Seq::Tuple) throw JinjaError("unhashable type: '" + key.type_name() + "'");
          if (key.is_dict() || key.is_undefined()) throw JinjaError("unhashable type: '" + key.type_name() + "'");
          d.set(key, eval(*e.items[i + 1], scope));
        }
        return Value::dict(std::move(d));
      }
      case K::GetAttr: return get_attr(eval(*e.a, scope), e.name);
      case K::GetItem: {
        Value obj = eval(*e.a, scope);
        return get_item(obj, eval(*e.b, scope));
      }
      case K::Slice: {
        Value obj = eval(*e.a, scope);
        std::optional<Value> start, stop, step;
        if (e.b) start = eval(*e.b, scope);
        if (e.c) stop = eval(*e.c, scope);
        if (!e.items.empty()) step = eval(*e.items[0], scope);
        return slice(obj, start, stop, step);
      }
      case K::Call: return eval_call(e, scope);
      case K::Filter: return apply_filter_expr(e, eval(*e.a, scope), scope);
      case K::Test: {
        Value subject = eval(*e.a, scope);
        return Value(apply_test(e.name, subject, eval_args(e.args, scope)) != e.negated);
      }
      case K::Unary: {
        Value a = eval(*e.a, scope);
        if (e.name == "not") return Value(!a.truthy());
        return unary_op(e.name, a);
      }
      case K::Binary: {
        Value a = eval(*e.a, scope);
        if (e.name == "and") return a.truthy() ? eval(*e.b, scope) : a;
        if (e.name == "or") return a.truthy() ? a : eval(*e.b, scope);
        Value b = eval(*e.b, scope);
        if (e.name == "~") return Value(a.str() + b.str());
        return binary_op(e.name, a, b);
      }
      case K::Compare: {
        Value left = eval(*e.a, scope);
        for (size_t i = 0; i < e.ops.size(); ++i) {
          Value right = eval(*e.items[i], scope);
          if (!compare(e.ops[i], left, right)) return Value(false);
          left = std::move(right);
        }
        return Value(true);
      }
      case K::Conditional:
        if (eval(*e.a, scope).truthy()) return eval(*e.b, scope);
        return e.c ? eval(*e.c, scope) : Value::undefined("the inline if expression's condition was false and it has no else");
    }
    return Value();
  }

  static constexpr int kMaxMacroDepth = 200;
  const RenderOptions& options_;
  int macro_depth_ = 0;
};

}  // namespace

std::string render_body(const Body& body, const nlohmann::ordered_json& context, const RenderOptions& options) {
  auto renderer = std::make_shared<Renderer>(options);
  return renderer->run(body, context);
}

}  // namespace grpo::tok::jinja
