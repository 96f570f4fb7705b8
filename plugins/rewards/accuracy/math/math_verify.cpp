#include "math_verify.h"

#include <vector>

#include "answer_extract.h"
#include "latex_normalize.h"
#include "latex_parse.h"
#include "math_equiv.h"
#include "text_scan.h"

namespace grpo::math {
namespace {

// What Math-Verify's parse() returns in first_match mode: the parsed value of
// the chosen match (if it parsed) and that match's text as a fallback string.
struct ParsedAnswer {
  bool matched = false;
  std::optional<Node> value;
  std::string fallback;
};

NormalizeConfig config_for(ExtractTarget target, bool boxed_region) {
  NormalizeConfig cfg;
  cfg.basic_latex = true;
  cfg.units = true;
  if (target == ExtractTarget::Gold) {
    cfg.malformed_operators = true;
    cfg.nits = true;
    cfg.boxed = BoxedMode::All;
  } else {
    // ms-swift passes boxed=True, which the normaliser treats as "none".
    cfg.boxed = BoxedMode::None;
  }
  if (boxed_region) cfg.boxed = BoxedMode::Last;
  return cfg;
}

ParsedAnswer parse_answer(std::string_view text, ExtractTarget target) {
  ParsedAnswer out;
  Extraction ex = extract_answer(text, target);
  switch (ex.kind) {
    case Extraction::Kind::None:
      return out;
    case Extraction::Kind::Number: {
      out.matched = true;
      Node n = number_node(ex.text);
      if (ex.percent) n = Node::make(Node::Type::Percent, {std::move(n)});
      out.value = std::move(n);
      out.fallback = ex.text;
      return out;
    }
    case Extraction::Kind::Expr:
      out.matched = true;
      out.value = parse_plain_expr(ex.text);
      out.fallback = ex.text;
      return out;
    case Extraction::Kind::Latex:
      break;
  }
  out.matched = true;
  std::vector<std::optional<Node>> nodes;
  std::vector<std::string> strs;
  for (const LatexPart& part : ex.parts) {
    strs.push_back(normalize_latex(part.latex, config_for(target, part.boxed_region)));
    std::optional<Node> n = parse_latex(strs.back());
    if (n && part.percent) n = Node::make(Node::Type::Percent, {std::move(*n)});
    nodes.push_back(std::move(n));
  }
  bool all = nodes.size() > 1;
  for (const auto& n : nodes) all = all && n.has_value();
  if (all) {
    // "$1$ and $2$": one set of every element.
    Node set = Node::make(Node::Type::Set, {});
    for (auto& n : nodes) {
      if (n->type == Node::Type::Set) {
        for (Node& k : n->kids) set.kids.push_back(std::move(k));
      } else {
        set.kids.push_back(std::move(*n));
      }
    }
    out.value = std::move(set);
    for (size_t k = 0; k < strs.size(); ++k) out.fallback += (k ? " and " : "") + strs[k];
  } else if (!nodes.empty()) {
    out.value = std::move(nodes[0]);
    out.fallback = strs[0];
  }
  return out;
}

bool fallback_equal(const std::string& a, const std::string& b) {
  const std::string_view x = scan::trim(a), y = scan::trim(b);
  return !x.empty() && x == y;
}

}  // namespace

VerifyResult accuracy_reward(std::string_view completion, std::string_view solution) {
  try {
    const ParsedAnswer gold = parse_answer(solution, ExtractTarget::Gold);
    if (!gold.matched) return {0.0, false};
    const ParsedAnswer pred = parse_answer(completion, ExtractTarget::Completion);
    if (!pred.matched) return {0.0, false};
    if (fallback_equal(gold.fallback, pred.fallback)) return {1.0, false};
    if (!gold.value || !pred.value) return {0.0, false};
    bool internal_error = false;
    const bool eq = answers_equivalent(*gold.value, *pred.value, &internal_error);
    return {eq ? 1.0 : 0.0, internal_error};
  } catch (...) {
    return {0.0, true};
  }
}

std::optional<std::string> extract_gold_answer(std::string_view solution) {
  try {
    ParsedAnswer a = parse_answer(solution, ExtractTarget::Gold);
    if (!a.matched) return std::nullopt;
    return a.fallback;
  } catch (...) {
    return std::nullopt;
  }
}

std::optional<std::string> extract_completion_answer(std::string_view completion) {
  try {
    ParsedAnswer a = parse_answer(completion, ExtractTarget::Completion);
    if (!a.matched) return std::nullopt;
    return a.fallback;
  } catch (...) {
    return std::nullopt;
  }
}

bool latex_answers_equivalent(std::string_view gold_latex, std::string_view pred_latex) {
  try {
    NormalizeConfig cfg;
    const auto g = parse_latex(normalize_latex(gold_latex, cfg));
    const auto p = parse_latex(normalize_latex(pred_latex, cfg));
    if (!g || !p) return false;
    bool err = false;
    return answers_equivalent(*g, *p, &err);
  } catch (...) {
    return false;
  }
}

}  // namespace grpo::math
