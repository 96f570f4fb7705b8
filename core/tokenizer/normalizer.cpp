#include "tokenizer/normalizer.h"

#include <utf8proc.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace grpo::tok {
namespace {

utf8proc_option_t options_of(Normalizer::Form form) {
  switch (form) {
    case Normalizer::Form::kNfc:
      return static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE);
    case Normalizer::Form::kNfd:
      return static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE);
    case Normalizer::Form::kNfkc:
      return static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT);
    case Normalizer::Form::kNfkd:
      return static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT);
  }
  return UTF8PROC_STABLE;
}

void parse_into(const nlohmann::json& value, const std::string& source, std::vector<Normalizer::Form>* forms) {
  if (value.is_null()) return;
  if (!value.is_object() || !value.contains("type") || !value["type"].is_string()) {
    throw TokenizerError(source + ": \"normalizer\" must be null or an object with a \"type\"");
  }
  const std::string type = value["type"].get<std::string>();
  if (type == "Sequence") {
    const auto it = value.find("normalizers");
    if (it == value.end() || !it->is_array()) {
      throw TokenizerError(source + ": Sequence normalizer without a \"normalizers\" array");
    }
    for (const auto& child : *it) parse_into(child, source, forms);
  } else if (type == "NFC") {
    forms->push_back(Normalizer::Form::kNfc);
  } else if (type == "NFD") {
    forms->push_back(Normalizer::Form::kNfd);
  } else if (type == "NFKC") {
    forms->push_back(Normalizer::Form::kNfkc);
  } else if (type == "NFKD") {
    forms->push_back(Normalizer::Form::kNfkd);
  } else {
    throw TokenizerError("unsupported normalizer '" + type + "' in " + source +
                         "; grpo supports NFC, NFD, NFKC, NFKD and Sequence of them");
  }
}

// Normalizes one valid UTF-8 run through every form in turn.
void normalize_run(std::string_view run, const std::vector<Normalizer::Form>& forms, std::string* out) {
  std::string current(run);
  for (const Normalizer::Form form : forms) {
    utf8proc_uint8_t* mapped = nullptr;
    const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(current.data()),
                                            static_cast<utf8proc_ssize_t>(current.size()), &mapped, options_of(form));
    if (n < 0) {
      // Only invalid UTF-8 or memory exhaustion fail; the run was validated,
      // so keeping it unnormalized is the least surprising fallback.
      std::free(mapped);
      break;
    }
    current.assign(reinterpret_cast<const char*>(mapped), static_cast<size_t>(n));
    std::free(mapped);
  }
  *out += current;
}

// Normalizes text[begin, end), splitting it around bytes that are not UTF-8.
void normalize_region(std::string_view text, size_t begin, size_t end, const std::vector<Normalizer::Form>& forms,
                      std::string* out) {
  size_t run_start = begin;
  size_t pos = begin;
  const std::string_view region = text.substr(0, end);
  while (pos < end) {
    size_t len = 0;
    if (utf8::decode(region, pos, &len) == utf8::kInvalid) {
      if (pos > run_start) normalize_run(text.substr(run_start, pos - run_start), forms, out);
      out->append(text.data() + pos, len);
      run_start = pos + len;
    }
    pos += len;
  }
  if (end > run_start) normalize_run(text.substr(run_start, end - run_start), forms, out);
}

}  // namespace

Normalizer Normalizer::from_json(const nlohmann::json& value, const std::string& source) {
  Normalizer n;
  parse_into(value, source, &n.forms_);
  return n;
}

bool Normalizer::apply(std::string_view text, std::string* out) const {
  if (forms_.empty() || utf8::is_ascii(text)) return false;
  out->clear();
  out->reserve(text.size() + 16);
  // ASCII is stable under every normalization form and never combines with
  // what precedes it, so only each non-ASCII run plus the ASCII character just
  // before it (a combining mark may compose with it) needs utf8proc.
  size_t copied = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    if (static_cast<unsigned char>(text[pos]) < 0x80) {
      ++pos;
      continue;
    }
    size_t run_end = pos;
    while (run_end < text.size() && static_cast<unsigned char>(text[run_end]) >= 0x80) ++run_end;
    const size_t region_start = pos > copied ? pos - 1 : pos;
    out->append(text.data() + copied, region_start - copied);
    normalize_region(text, region_start, run_end, forms_, out);
    copied = pos = run_end;
  }
  out->append(text.data() + copied, text.size() - copied);
  return true;
}

}  // namespace grpo::tok
