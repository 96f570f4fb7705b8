#include "latex_lexer.h"

#include <algorithm>
#include <cstring>

#include "text_scan.h"

namespace grpo::math {
namespace {

using scan::is_alpha;
using scan::is_digit;
using scan::starts_with;

struct CmdMap {
  const char* name;
  Tok kind;
  RelOp rel;
};

// Commands that map onto a single token.
const CmdMap kSimple[] = {
    {"cdot", Tok::Star, RelOp::Eq},       {"times", Tok::Star, RelOp::Eq},
    {"ast", Tok::Star, RelOp::Eq},        {"div", Tok::Slash, RelOp::Eq},
    {"le", Tok::Rel, RelOp::Le},          {"leq", Tok::Rel, RelOp::Le},
    {"leqslant", Tok::Rel, RelOp::Le},    {"ge", Tok::Rel, RelOp::Ge},
    {"geq", Tok::Rel, RelOp::Ge},         {"geqslant", Tok::Rel, RelOp::Ge},
    {"lt", Tok::Rel, RelOp::Lt},          {"gt", Tok::Rel, RelOp::Gt},
    {"ne", Tok::Rel, RelOp::Ne},          {"neq", Tok::Rel, RelOp::Ne},
    {"equiv", Tok::Rel, RelOp::Eq},       {"approx", Tok::Approx, RelOp::Eq},
    {"in", Tok::In, RelOp::Eq},           {"pm", Tok::PlusMinus, RelOp::Eq},
    {"mp", Tok::MinusPlus, RelOp::Eq},    {"lbrace", Tok::LSet, RelOp::Eq},
    {"rbrace", Tok::RSet, RelOp::Eq},     {"lbrack", Tok::LBrack, RelOp::Eq},
    {"rbrack", Tok::RBrack, RelOp::Eq},   {"langle", Tok::LParen, RelOp::Eq},
    {"rangle", Tok::RParen, RelOp::Eq},   {"lgroup", Tok::LParen, RelOp::Eq},
    {"rgroup", Tok::RParen, RelOp::Eq},   {"vert", Tok::Pipe, RelOp::Eq},
    {"lvert", Tok::Pipe, RelOp::Eq},      {"rvert", Tok::Pipe, RelOp::Eq},
    {"mid", Tok::Pipe, RelOp::Eq},        {"cup", Tok::Union, RelOp::Eq},
    {"cap", Tok::Inter, RelOp::Eq},       {"setminus", Tok::SetMinus, RelOp::Eq},
    {"emptyset", Tok::Empty, RelOp::Eq},  {"varnothing", Tok::Empty, RelOp::Eq},
    {"circ", Tok::Degree, RelOp::Eq},     {"degree", Tok::Degree, RelOp::Eq},
    {"colon", Tok::Colon, RelOp::Eq},     {"prime", Tok::Prime, RelOp::Eq},
};

// Spacing and sizing commands that carry no meaning.
const char* const kSkip[] = {"left", "right", "mleft", "mright", "middle", "big", "Big", "bigg",
                             "Bigg", "bigl", "bigr", "Bigl", "Bigr", "biggl", "biggr", "Biggl",
                             "Biggr", "quad", "qquad", "displaystyle", "textstyle", "limits",
                             "nolimits", "thinspace", "medspace", "thickspace", "negthinspace",
                             "dots", "ldots", "cdots", "hfill", "space"};

// Commands handled by the parser itself.
const char* const kParserCmds[] = {
    "frac", "sqrt", "binom", "dbinom", "tbinom", "boxed", "fbox", "sin", "cos", "tan", "cot",
    "sec", "csc", "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh", "log", "ln", "lg", "exp",
    "lfloor", "rfloor", "lceil", "rceil", "max", "min", "gcd", "lcm", "det", "phantom"};

const char* const kGreek[] = {
    "alpha", "beta", "gamma", "delta", "epsilon", "varepsilon", "zeta", "eta", "theta",
    "vartheta", "iota", "kappa", "lambda", "mu", "nu", "xi", "omicron", "varpi", "rho", "varrho",
    "sigma", "varsigma", "tau", "upsilon", "phi", "varphi", "chi", "psi", "omega", "Gamma",
    "Delta", "Theta", "Lambda", "Xi", "Pi", "Sigma", "Upsilon", "Phi", "Psi", "Omega", "ell",
    // other symbol commands, read as plain symbols
    "angle", "measuredangle", "triangle", "square", "nabla", "hbar", "aleph", "wp", "imath", "jmath"};

const char* const kAccents[] = {"bar", "overline", "hat", "widehat", "vec", "overrightarrow",
                                "tilde", "widetilde", "dot", "ddot", "acute", "grave", "breve",
                                "check", "bm", "boldsymbol", "mathcal", "mathbb", "mathfrak",
                                "mathscr", "mathsf", "mathtt", "mathring", "mathbf", "mathit",
                                "mathrm", "operatorname"};

std::string lower_str(std::string_view s) {
  std::string r(s);
  for (char& c : r) c = scan::lower(c);
  return r;
}

template <size_t N>
bool in_list(const char* const (&list)[N], std::string_view name) {
  return std::any_of(std::begin(list), std::end(list), [&](const char* c) { return name == c; });
}

// Text of a braced group starting at s[i] == '{' (no nesting, like the grammar's ACCENT token).
bool braced_text(std::string_view s, size_t* i, std::string_view* out) {
  size_t j = *i;
  if (j < s.size() && scan::is_space(s[j])) ++j;
  if (j >= s.size() || s[j] != '{') return false;
  size_t k = j + 1;
  while (k < s.size() && !(s[k] == '}' && s[k - 1] != '\\')) ++k;
  if (k >= s.size()) return false;
  *out = s.substr(j + 1, k - j - 1);
  *i = k + 1;
  return true;
}

// Symbol name for \text{...}: spaces (and, for text, parentheses) dropped, lower case.
std::string text_name(std::string_view body, bool drop_parens) {
  std::string r;
  for (char c : body) {
    if (c == ' ' || (drop_parens && (c == '(' || c == ')'))) continue;
    r.push_back(scan::lower(c));
  }
  return r;
}

struct Utf8Map {
  const char* bytes;
  Tok kind;
  RelOp rel;
  const char* text;
};

const Utf8Map kUtf8[] = {
    {"\xc3\x97", Tok::Star, RelOp::Eq, ""},        {"\xc3\xb7", Tok::Slash, RelOp::Eq, ""},
    {"\xc2\xb7", Tok::Star, RelOp::Eq, ""},        {"\xe2\x8b\x85", Tok::Star, RelOp::Eq, ""},
    {"\xe2\x88\x92", Tok::Minus, RelOp::Eq, ""},   {"\xe2\x89\xa4", Tok::Rel, RelOp::Le, ""},
    {"\xe2\x89\xa5", Tok::Rel, RelOp::Ge, ""},     {"\xe2\x89\xa0", Tok::Rel, RelOp::Ne, ""},
    {"\xe2\x89\x88", Tok::Approx, RelOp::Eq, ""},  {"\xcf\x80", Tok::Const, RelOp::Eq, "pi"},
    {"\xe2\x88\x9e", Tok::Const, RelOp::Eq, "oo"}, {"\xc2\xb1", Tok::PlusMinus, RelOp::Eq, ""},
    {"\xc2\xb0", Tok::Degree, RelOp::Eq, ""},      {"\xe2\x88\x9a", Tok::Cmd, RelOp::Eq, "sqrt"},
    {"\xe2\x88\x88", Tok::In, RelOp::Eq, ""},      {"\xe2\x88\xaa", Tok::Union, RelOp::Eq, ""},
    {"\xe2\x88\xa9", Tok::Inter, RelOp::Eq, ""},   {"\xe2\x88\x85", Tok::Empty, RelOp::Eq, ""},
    {"\xc2\xa0", Tok::End, RelOp::Eq, ""},  // no-break space: skipped
};

}  // namespace

bool lex_latex(std::string_view s, std::vector<Token>* out) {
  out->clear();
  const size_t n = s.size();
  size_t i = 0;
  auto push = [&](Tok k, std::string text = std::string(), RelOp rel = RelOp::Eq) {
    Token t;
    t.kind = k;
    t.rel = rel;
    t.text = std::move(text);
    out->push_back(std::move(t));
  };
  while (i < n) {
    const char c = s[i];
    if (scan::is_space(c) || c == '~') { ++i; continue; }
    if (is_digit(c) || (c == '.' && i + 1 < n && is_digit(s[i + 1]))) {
      size_t j = i;
      while (j < n && is_digit(s[j])) ++j;
      if (j + 1 < n && s[j] == '.' && is_digit(s[j + 1])) {
        ++j;
        while (j < n && is_digit(s[j])) ++j;
      }
      push(Tok::Number, std::string(s.substr(i, j - i)));
      i = j;
      continue;
    }
    if (is_alpha(c)) { push(Tok::Letter, std::string(1, c)); ++i; continue; }
    if (c == '\\') {
      if (i + 1 >= n) return false;
      const char d = s[i + 1];
      if (!is_alpha(d)) {
        i += 2;
        switch (d) {
          case ',': case ';': case ':': case '!': case ' ': case '$': continue;
          case '{': push(Tok::LSet); continue;
          case '}': push(Tok::RSet); continue;
          case '%': push(Tok::Percent); continue;
          case '|': push(Tok::Pipe); continue;
          case '\\': push(Tok::RowSep); continue;
          case '(': push(Tok::LParen); continue;
          case ')': push(Tok::RParen); continue;
          case '[': push(Tok::LBrack); continue;
          case ']': push(Tok::RBrack); continue;
          default: return false;
        }
      }
      size_t j = i + 1;
      while (j < n && is_alpha(s[j])) ++j;
      const std::string_view name = s.substr(i + 1, j - i - 1);
      i = j;
      if (in_list(kSkip, name)) {
        // "\left." and "\right." are invisible delimiters.
        if ((name == "left" || name == "right") && i < n && s[i] == '.') ++i;
        continue;
      }
      bool simple = false;
      for (const CmdMap& m : kSimple) {
        if (name == m.name) {
          push(m.kind, std::string(), m.rel);
          simple = true;
          break;
        }
      }
      if (simple) continue;
      if (name == "pi") { push(Tok::Const, "pi"); continue; }
      if (name == "infty") { push(Tok::Const, "oo"); continue; }
      if (in_list(kGreek, name)) { push(Tok::Letter, lower_str(name)); continue; }
      if (name == "text" || name == "textup" || name == "mbox" || name == "textsf" ||
          name == "texttt") {
        std::string_view body;
        if (!braced_text(s, &i, &body)) return false;
        push(Tok::Name, text_name(body, true));
        continue;
      }
      if (in_list(kAccents, name)) {
        std::string_view body;
        if (!braced_text(s, &i, &body)) return false;
        if (name == "operatorname") {
          push(Tok::Cmd, lower_str(body));
          continue;
        }
        std::string acc(name);
        if (acc == "overline") acc = "bar";
        else if (acc == "overrightarrow") acc = "vec";
        else if (acc == "widetilde") acc = "tilde";
        else if (acc.compare(0, 4, "math") == 0) acc = "math";
        push(Tok::Name, acc + "{" + text_name(body, false) + "}");
        continue;
      }
      if (name == "begin" || name == "end") {
        std::string_view env;
        if (!braced_text(s, &i, &env)) return false;
        if (name == "begin" && env == "array") {
          std::string_view spec;
          if (!braced_text(s, &i, &spec)) return false;
        }
        push(Tok::Cmd, std::string(name) + ":" + std::string(env));
        continue;
      }
      if (in_list(kParserCmds, name)) { push(Tok::Cmd, std::string(name)); continue; }
      return false;
    }
    if (static_cast<unsigned char>(c) >= 0x80) {
      bool hit = false;
      for (const Utf8Map& m : kUtf8) {
        const size_t len = std::strlen(m.bytes);
        if (starts_with(s, i, std::string_view(m.bytes, len))) {
          if (m.kind != Tok::End) push(m.kind, m.text, m.rel);
          i += len;
          hit = true;
          break;
        }
      }
      if (!hit) return false;
      continue;
    }
    ++i;
    switch (c) {
      case '(': push(Tok::LParen); break;
      case ')': push(Tok::RParen); break;
      case '[': push(Tok::LBrack); break;
      case ']': push(Tok::RBrack); break;
      case '{': push(Tok::LBrace); break;
      case '}': push(Tok::RBrace); break;
      case '+': push(Tok::Plus); break;
      case '-': push(Tok::Minus); break;
      case '*': push(Tok::Star); break;
      case '/': push(Tok::Slash); break;
      case '^': push(Tok::Caret); break;
      case '_': push(Tok::Underscore); break;
      case ',': push(Tok::Comma); break;
      case ';': push(Tok::Semicolon); break;
      case ':': push(Tok::Colon); break;
      case '|': push(Tok::Pipe); break;
      case '&': push(Tok::Amp); break;
      case '%': push(Tok::Percent); break;
      case '\'': push(Tok::Prime); break;
      case '.': push(Tok::Period); break;
      case '!':
        if (i < n && s[i] == '=') { ++i; push(Tok::Rel, "", RelOp::Ne); }
        else push(Tok::Bang);
        break;
      case '=':
        if (i < n && s[i] == '=') ++i;
        push(Tok::Rel, "", RelOp::Eq);
        break;
      case '<':
        if (i < n && s[i] == '=') { ++i; push(Tok::Rel, "", RelOp::Le); }
        else push(Tok::Rel, "", RelOp::Lt);
        break;
      case '>':
        if (i < n && s[i] == '=') { ++i; push(Tok::Rel, "", RelOp::Ge); }
        else push(Tok::Rel, "", RelOp::Gt);
        break;
      default:
        return false;
    }
  }
  push(Tok::End);
  return true;
}

}  // namespace grpo::math
