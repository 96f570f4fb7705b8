#include "plugins/conformance.h"

#include <elf.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <thread>

#include <algorithm>

#include <fmt/format.h>
#include <grpo/reward.h>
#include <grpo/sampler.h>
#include <grpo/version.h>

#include "plugins/multiturn_handler.h"
#include "plugins/plugin_error.h"
#include "plugins/plugin_library.h"
#include "plugins/plugin_options.h"
#include "plugins/plugin_registry.h"
#include "plugins/reward_function.h"

namespace grpo::plugins {

namespace {

template <class T>
T read_at(std::ifstream& in, uint64_t offset) {
  T value{};
  in.seekg(static_cast<std::streamoff>(offset));
  in.read(reinterpret_cast<char*>(&value), sizeof value);
  if (!in) throw std::runtime_error("truncated ELF file");
  return value;
}

// Completions that have broken rewards before: nothing, a long run of one
// character, bytes that are not UTF-8, CJK text, deep braces.
std::vector<RewardInput> edge_inputs() {
  std::vector<RewardInput> v;
  auto add = [&](std::string text, std::vector<int32_t> ids, bool truncated) {
    RewardInput in;
    in.completion = std::move(text);
    in.completion_ids = std::move(ids);
    in.ids_known = true;
    in.is_truncated = truncated;
    in.prompt_messages_json = R"([{"role": "user", "content": "What is 6 * 7?"}])";
    in.columns = RowColumns::from_json({{"solution", "\\boxed{42}"}});
    v.push_back(std::move(in));
  };
  add("", {}, false);
  add("<think>x</think><answer>\\boxed{42}</answer>", {1, 2, 3}, false);
  add(std::string(100000, 'a'), std::vector<int32_t>(5000, 7), true);
  add("\xff\xfe invalid utf-8 \\boxed{", {9}, false);
  add("日本語のテキスト \\boxed{\\frac{1}{0}}", {4, 4, 4, 4}, false);
  add(std::string(5000, '{') + "\\boxed{" + std::string(5000, '{'), {1}, false);
  return v;
}

std::vector<RewardInput> batch_of(size_t n) {
  const std::vector<RewardInput> edges = edge_inputs();
  std::vector<RewardInput> out;
  for (size_t i = 0; i < n; ++i) out.push_back(edges[i % edges.size()]);
  return out;
}

bool finite_or_nan(const std::vector<double>& r) {
  for (double x : r)
    if (!std::isfinite(x) && !std::isnan(x)) return false;
  return true;
}

// Equal, NaN included.
bool same(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!(a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i])))) return false;
  return true;
}

std::string schema_problem(const PluginInfo& info) {
  const nlohmann::json schema = nlohmann::json::parse(info.options_json, nullptr, false);
  if (!schema.is_array()) return "the options schema is not a JSON array";
  for (const auto& o : schema) {
    if (!o.is_object() || !o.contains("name") || !o["name"].is_string()) return "an option without a string name";
    const std::string name = o["name"];
    for (const char* key : {"type", "default", "help"})
      if (!o.contains(key)) return fmt::format("option '{}' has no '{}'", name, key);
    const std::string type = o.value("type", "");
    if (type != "bool" && type != "int" && type != "float" && type != "string" && type != "strings")
      return fmt::format("option '{}' has type '{}'; expected bool, int, float, string or strings", name, type);
    const nlohmann::json& d = o["default"];
    const bool strings = d.is_array() && std::all_of(d.begin(), d.end(), [](const auto& x) { return x.is_string(); });
    const bool fits = d.is_null() || (type == "bool" && d.is_boolean()) || (type == "int" && d.is_number_integer()) ||
                      (type == "float" && d.is_number()) || (type == "string" && d.is_string()) ||
                      (type == "strings" && strings);
    if (!fits) return fmt::format("option '{}': default {} is not a {}", name, d.dump(), type);
  }
  return "";
}

void check_reward(const std::shared_ptr<PluginLibrary>& library, const PluginInfo& info, const nlohmann::json& args,
                  std::vector<CheckResult>& out) {
  const std::string who = info.name + ": ";
  std::unique_ptr<RewardFunction> fn;
  try {
    const nlohmann::json options = resolve_plugin_options(info, nlohmann::json::object(), args);
    fn = RewardFunction::create(ResolvedPlugin{library, info}, options, nullptr, "{}", 1);
    out.push_back({who + "create with its defaults", true, ""});
  } catch (const std::exception& e) {
    out.push_back({who + "create with its defaults", false,
                   std::string(e.what()) + " (give required options with --plugin_args '{\"" + info.name +
                       "\": {...}}')"});
    return;
  }
  for (size_t n : {size_t{0}, size_t{1}, size_t{64}}) {
    const long failed = fn->failures();
    const std::vector<double> r = fn->score(batch_of(n), {});
    const bool ok = r.size() == n && fn->failures() == failed && finite_or_nan(r);
    out.push_back({fmt::format("{}score {} completion(s)", who, n), ok,
                   ok ? "" : fn->failures() != failed ? "score() failed (the error is above)" : "infinite rewards"});
  }
  const std::vector<RewardInput> edges = edge_inputs();
  const long failed = fn->failures();
  const std::vector<double> alone = fn->score(edges, {});
  out.push_back({who + "score empty, 100 kB, invalid UTF-8, CJK and deeply nested completions",
                 fn->failures() == failed && alone.size() == edges.size(), "score() failed (the error is above)"});
  if (out.back().passed) out.back().detail.clear();
  if (fn->thread_safe()) {
    // The host may call score() of a thread-safe plugin from several threads at once.
    std::vector<std::vector<double>> results(4);
    std::vector<std::thread> threads;
    for (auto& r : results) threads.emplace_back([&, p = &r] { *p = fn->score(edges, {}); });
    for (auto& t : threads) t.join();
    bool ok = fn->failures() == failed;
    for (const auto& r : results) ok = ok && same(r, alone);
    out.push_back({who + "concurrent score() calls (declared thread-safe)", ok,
                   ok ? "" : "results differ from one call at a time, or a call failed"});
  }
  fn.reset();
  out.push_back({who + "destroy", true, ""});
}

void check_sampler(const std::shared_ptr<PluginLibrary>& library, const PluginInfo& info, std::vector<CheckResult>& out) {
  const auto* table = static_cast<const grpo_sampler_api*>(library->factory(info.name, GRPO_SAMPLER_INTERFACE));
  const bool ok = table && table->struct_size >= GRPO_STRUCT_SIZE(grpo_sampler_api, destroy) && table->create &&
                  table->generate && table->load_weights && table->destroy;
  out.push_back({info.name + ": sampler table (create, generate, load_weights, destroy)", ok,
                 ok ? "generation itself needs a model: run a short training against it"
                    : "the table is missing or lacks a required function"});
}

// A multi-turn handler: created with its defaults, its tool schemas valid,
// then one conversation per edge completion: begin, step, reward, end.
void check_multiturn(const std::shared_ptr<PluginLibrary>& library, const PluginInfo& info,
                     const nlohmann::json& args, std::vector<CheckResult>& out) {
  const std::string who = info.name + ": ";
  std::unique_ptr<MultiturnHandler> h;
  try {
    const nlohmann::json options = resolve_plugin_options(info, nlohmann::json::object(), args);
    h = MultiturnHandler::create(ResolvedPlugin{library, info}, options, nullptr, "{}", {}, /*timeout_s=*/30);
    out.push_back({who + "create with its defaults", true, ""});
  } catch (const std::exception& e) {
    out.push_back({who + "create with its defaults", false, e.what()});
    return;
  }
  if (!h->tools_json().empty()) {
    const nlohmann::json tools = nlohmann::json::parse(h->tools_json(), nullptr, false);
    bool ok = tools.is_array();
    for (const auto& t : tools) ok = ok && t.is_object();
    out.push_back({who + "tool schemas (a JSON array of objects)", ok, ok ? "" : h->tools_json().substr(0, 200)});
  }
  const long failed = h->failures();
  const std::vector<RewardInput> edges = edge_inputs();
  for (size_t i = 0; i < edges.size(); ++i) {
    Prompt prompt;
    prompt.messages_json = edges[i].prompt_messages_json;
    prompt.columns = edges[i].columns;
    bool begin_failed = false;
    grpo_conversation* conv = h->begin(i, prompt, 0, 0, {}, &begin_failed);
    TurnView turn;
    turn.conversation_json = R"([{"role": "user", "content": "What is 6 * 7?"}, {"role": "assistant", "content": ""}])";
    turn.completion = edges[i].completion;
    turn.ids = &edges[i].completion_ids;
    turn.columns = prompt.columns.get();
    if (!begin_failed) {
      h->step(conv, turn);
      h->reward(conv, turn);  // NaN unless it has one; a failure is counted
    }
    h->end(conv);
  }
  const bool ok = h->failures() == failed;
  out.push_back({who + "conversations on empty, 100 kB, invalid UTF-8, CJK and deeply nested turns", ok,
                 ok ? "" : "a call failed (the error is above)"});
  h.reset();
  out.push_back({who + "destroy", true, ""});
}

}  // namespace

std::vector<std::string> exported_symbols(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  const auto eh = read_at<Elf64_Ehdr>(in, 0);
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64)
    throw std::runtime_error(path + " is not a 64-bit ELF file");
  std::vector<std::string> names;
  for (uint16_t i = 0; i < eh.e_shnum; ++i) {
    const auto sh = read_at<Elf64_Shdr>(in, eh.e_shoff + uint64_t{i} * eh.e_shentsize);
    if (sh.sh_type != SHT_DYNSYM || sh.sh_entsize == 0) continue;
    const auto strtab = read_at<Elf64_Shdr>(in, eh.e_shoff + uint64_t{sh.sh_link} * eh.e_shentsize);
    for (uint64_t k = 1; k < sh.sh_size / sh.sh_entsize; ++k) {
      const auto sym = read_at<Elf64_Sym>(in, sh.sh_offset + k * sh.sh_entsize);
      const unsigned bind = ELF64_ST_BIND(sym.st_info);
      if (sym.st_shndx == SHN_UNDEF || (bind != STB_GLOBAL && bind != STB_WEAK)) continue;
      if (ELF64_ST_VISIBILITY(sym.st_other) != STV_DEFAULT) continue;
      std::string name;
      in.seekg(static_cast<std::streamoff>(strtab.sh_offset + sym.st_name));
      std::getline(in, name, '\0');
      if (!name.empty() && name[0] != '_') names.push_back(name);
    }
  }
  return names;
}

std::vector<CheckResult> check_plugin_library(const std::string& path, const nlohmann::json& plugin_args) {
  std::vector<CheckResult> out;
  std::shared_ptr<PluginLibrary> library;
  try {
    library = PluginLibrary::load(path);
    out.push_back({"loads (ELF, grpo_plugin_entry, SDK major, init)", true, ""});
  } catch (const std::exception& e) {
    out.push_back({"loads (ELF, grpo_plugin_entry, SDK major, init)", false, e.what()});
    return out;
  }
  try {
    const std::vector<std::string> symbols = exported_symbols(path);
    const bool only_entry = symbols.size() == 1 && symbols[0] == "grpo_plugin_entry";
    std::string list;
    for (const auto& s : symbols) list += (list.empty() ? "" : ", ") + s;
    out.push_back({"exports only grpo_plugin_entry", only_entry,
                   only_entry ? "" : "exports: " + list + " (build with -fvisibility=hidden)"});
  } catch (const std::exception& e) {
    out.push_back({"exports only grpo_plugin_entry", false, e.what()});
  }
  const std::vector<PluginInfo>& plugins = library->plugins();
  out.push_back({"lists at least one plugin", !plugins.empty(), plugins.empty() ? "plugin_count() is 0" : ""});
  for (const PluginInfo& info : plugins) {
    const std::string who = info.name + ": ";
    const bool described = !info.version.empty() && !info.description.empty();
    out.push_back({who + "descriptor (name, interface, version, description)", described,
                   described ? info.interface_id + " " + info.version : "version or description is empty"});
    const std::string problem = schema_problem(info);
    out.push_back({who + "options schema", problem.empty(), problem});
    const nlohmann::json args = plugin_args.is_object() && plugin_args.contains(info.name) ? plugin_args[info.name]
                                                                                          : nlohmann::json();
    if (info.interface_id == GRPO_REWARD_INTERFACE) check_reward(library, info, args, out);
    else if (info.interface_id == GRPO_SAMPLER_INTERFACE) check_sampler(library, info, out);
    else if (info.interface_id == GRPO_MULTITURN_INTERFACE) check_multiturn(library, info, args, out);
  }
  return out;
}

}  // namespace grpo::plugins
