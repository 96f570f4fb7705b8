// Tokeniser for normalised LaTeX answers.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "math_ast.h"

namespace grpo::math {

enum class Tok : uint8_t {
  End,
  Number,     // text: digits with an optional '.'
  Letter,     // text: symbol name (a latin letter or a greek letter name)
  Const,      // text: "pi", "oo"
  Name,       // text: symbol name from \text{..}, \mathbb{..}, accents
  Cmd,        // text: command name without the backslash ("frac", "begin:pmatrix")
  LParen, RParen, LBrack, RBrack, LBrace, RBrace, LSet, RSet,
  Plus, Minus, PlusMinus, MinusPlus, Star, Slash, Caret, Underscore,
  Comma, Semicolon, Colon, Bang, Pipe, Amp, RowSep, Percent, Degree, Prime, Period,
  Rel,        // rel: comparison
  Approx, In, Union, Inter, SetMinus, Empty,
};

struct Token {
  Tok kind = Tok::End;
  RelOp rel = RelOp::Eq;
  std::string text;
};

// False when the input holds something the parser cannot understand.
bool lex_latex(std::string_view s, std::vector<Token>* out);

}  // namespace grpo::math
