// Splits a template into text and the tokens of its tags, reproducing
// jinja2's lexer as transformers configures it: trim_blocks (the newline
// after a block or comment tag is dropped), lstrip_blocks (spaces and tabs
// before a block or comment tag on its own line are dropped), the `-` and
// `+` whitespace controls, {% raw %}, and jinja's newline handling (\r\n and
// \r read as \n, one trailing newline of the template dropped).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/jinja/value.h"

namespace grpo::tok::jinja {

enum class TokenType { Data, VariableBegin, VariableEnd, BlockBegin, BlockEnd, Name, String, Integer, Float, Operator, End };

struct Token {
  TokenType type;
  std::string text;  // data, name, operator, or a string literal's value
  int line = 1;
  PyInt integer = 0;
  double number = 0;
};

// Throws JinjaError for unterminated tags, comments, strings and unbalanced brackets.
std::vector<Token> tokenize(const std::string& source);

// How a token reads in an error message ("end of print statement", "'('").
std::string describe(const Token& token);

}  // namespace grpo::tok::jinja
