#include "plugins/conformance_steps.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <thread>

#include <fmt/format.h>
#include <grpo/reward.h>
#include <grpo/sampler.h>
#include <grpo/version.h>

#include "plugins/multiturn_handler.h"
#include "plugins/plugin_options.h"
#include "plugins/reward_function.h"
#include "plugins/wire.h"

namespace grpo::plugins {

namespace {

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

// A step's instance outlives it unless the step is "destroy": destroying is
// a check of its own, and a plugin that crashes there must fail that one alone.
template <class T>
void keep_unless_destroy(std::unique_ptr<T>& p, const std::string& step) {
  if (step == "destroy") p.reset();
  else static_cast<void>(p.release());
}

void reward_step(const std::shared_ptr<PluginLibrary>& library, const PluginInfo& info, const std::string& step,
                 const nlohmann::json& args, std::vector<CheckResult>& out) {
  const std::string name = step_check_name(info.name, step);
  std::unique_ptr<RewardFunction> fn;
  try {
    const nlohmann::json options = resolve_plugin_options(info, nlohmann::json::object(), args);
    fn = RewardFunction::create(ResolvedPlugin{library, info}, options, nullptr, "{}", 1);
  } catch (const std::exception& e) {
    out.push_back({name, false,
                   step == "create" ? std::string(e.what()) + " (give required options with --plugin_args '{\"" +
                                          info.name + "\": {...}}')"
                                    : std::string("create failed in this check's process: ") + e.what()});
    return;
  }
  const long failed = fn->failures();
  if (step == "create" || step == "destroy") {
    out.push_back({name, true, ""});
  } else if (step.rfind("score ", 0) == 0) {
    const size_t n = std::stoul(step.substr(6));
    const std::vector<double> r = fn->score(batch_of(n), {});
    const bool ok = r.size() == n && fn->failures() == failed && finite_or_nan(r);
    out.push_back({name, ok, ok ? "" : fn->failures() != failed ? "score() failed (the error is above)" : "infinite rewards"});
  } else if (step == "edges") {
    const std::vector<RewardInput> edges = edge_inputs();
    const bool ok = fn->score(edges, {}).size() == edges.size() && fn->failures() == failed;
    out.push_back({name, ok, ok ? "" : "score() failed (the error is above)"});
  } else if (step == "concurrent" && fn->thread_safe()) {
    // The host may call score() of a thread-safe plugin from several threads at once.
    const std::vector<RewardInput> edges = edge_inputs();
    const std::vector<double> alone = fn->score(edges, {});
    std::vector<std::vector<double>> results(4);
    std::vector<std::thread> threads;
    for (auto& r : results) threads.emplace_back([&, p = &r] { *p = fn->score(edges, {}); });
    for (auto& t : threads) t.join();
    bool ok = fn->failures() == failed;
    for (const auto& r : results) ok = ok && same(r, alone);
    out.push_back({name, ok, ok ? "" : "results differ from one call at a time, or a call failed"});
  }
  keep_unless_destroy(fn, step);
}

// A multi-turn handler: created with its defaults, its tool schemas valid,
// then one conversation per edge completion: begin, step, reward, end.
void multiturn_step(const std::shared_ptr<PluginLibrary>& library, const PluginInfo& info, const std::string& step,
                    const nlohmann::json& args, std::vector<CheckResult>& out) {
  const std::string name = step_check_name(info.name, step);
  std::unique_ptr<MultiturnHandler> h;
  try {
    const nlohmann::json options = resolve_plugin_options(info, nlohmann::json::object(), args);
    h = MultiturnHandler::create(ResolvedPlugin{library, info}, options, nullptr, "{}", {}, /*timeout_s=*/30);
  } catch (const std::exception& e) {
    out.push_back({name, false, step == "create" ? e.what() : std::string("create failed in this check's process: ") + e.what()});
    return;
  }
  if (step == "create" || step == "destroy") {
    out.push_back({name, true, ""});
  } else if (step == "tools" && !h->tools_json().empty()) {
    const nlohmann::json tools = nlohmann::json::parse(h->tools_json(), nullptr, false);
    bool ok = tools.is_array();
    for (const auto& t : tools) ok = ok && t.is_object();
    out.push_back({name, ok, ok ? "" : h->tools_json().substr(0, 200)});
  } else if (step == "conversations") {
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
    out.push_back({name, ok, ok ? "" : "a call failed (the error is above)"});
  }
  keep_unless_destroy(h, step);
}

}  // namespace

std::string step_check_name(const std::string& plugin, const std::string& step) {
  const std::string who = plugin + ": ";
  if (step == "load") return "loads (ELF, grpo_plugin_entry, SDK major, init)";
  if (step == "create") return who + "create with its defaults";
  if (step.rfind("score ", 0) == 0) return who + step + " completion(s)";
  if (step == "edges") return who + "score empty, 100 kB, invalid UTF-8, CJK and deeply nested completions";
  if (step == "concurrent") return who + "concurrent score() calls (declared thread-safe)";
  if (step == "destroy") return who + "destroy";
  if (step == "sampler table") return who + "sampler table (create, generate, load_weights, destroy)";
  if (step == "tools") return who + "tool schemas (a JSON array of objects)";
  if (step == "conversations") return who + "conversations on empty, 100 kB, invalid UTF-8, CJK and deeply nested turns";
  return who + step;
}

std::vector<CheckResult> run_check_step(const std::string& path, const std::string& plugin, const std::string& step,
                                        const nlohmann::json& args, std::vector<PluginInfo>* plugins) {
  const std::string name = step_check_name(plugin, step);
  std::vector<CheckResult> out;
  std::shared_ptr<PluginLibrary> library;
  try {
    library = PluginLibrary::load(path);
  } catch (const std::exception& e) {
    out.push_back({name, false, step == "load" ? e.what() : std::string("the library did not load in this check's process: ") + e.what()});
    return out;
  }
  // Unloading runs the library's deinit: part of "destroy" only.
  if (step != "destroy") new std::shared_ptr<PluginLibrary>(library);
  if (step == "load") {
    if (plugins) *plugins = library->plugins();
    out.push_back({name, true, ""});
    return out;
  }
  const PluginInfo* info = nullptr;
  for (const PluginInfo& p : library->plugins())
    if (p.name == plugin) info = &p;
  if (!info) {
    out.push_back({name, false, "the library does not list this plugin in this check's process"});
    return out;
  }
  if (info->interface_id == GRPO_REWARD_INTERFACE) {
    reward_step(library, *info, step, args, out);
  } else if (info->interface_id == GRPO_MULTITURN_INTERFACE) {
    multiturn_step(library, *info, step, args, out);
  } else if (info->interface_id == GRPO_SAMPLER_INTERFACE && step == "sampler table") {
    const auto* table = static_cast<const grpo_sampler_api*>(library->factory(info->name, GRPO_SAMPLER_INTERFACE));
    const bool ok = table && table->struct_size >= GRPO_STRUCT_SIZE(grpo_sampler_api, destroy) && table->create &&
                    table->generate && table->load_weights && table->destroy;
    out.push_back({name, ok,
                   ok ? "generation itself needs a model: run a short training against it"
                      : "the table is missing or lacks a required function"});
  }
  return out;
}

int serve_plugin_check(Wire& in, Wire& out) {
  uint64_t token = 0;
  std::string path, plugin, step;
  nlohmann::json args;
  try {
    token = in.get_u64();
    path = in.get_string(-1, 1 << 16);
    plugin = in.get_string(-1, 1 << 16);
    step = in.get_string(-1, 1 << 16);
    args = nlohmann::json::parse(in.get_string(-1, 64 << 20));
  } catch (const std::exception&) {
    return 2;
  }
  std::vector<PluginInfo> plugins;
  std::vector<CheckResult> results;
  try {
    results = run_check_step(path, plugin, step, args, &plugins);
  } catch (const std::exception& e) {
    results = {{step_check_name(plugin, step), false, e.what()}};
  }
  nlohmann::json body = {{"results", nlohmann::json::array()}, {"plugins", nlohmann::json::array()}};
  for (const CheckResult& r : results) body["results"].push_back({{"name", r.name}, {"passed", r.passed}, {"detail", r.detail}});
  for (const PluginInfo& p : plugins)
    body["plugins"].push_back({{"name", p.name}, {"interface_id", p.interface_id}, {"version", p.version},
                               {"description", p.description}, {"options_json", p.options_json}, {"file", p.file},
                               {"sdk_version", p.sdk_version}});
  // What the plugin printed reaches the host's file before the reply does.
  std::cout.flush();
  std::fflush(stdout);
  try {
    out.put_u64(token);
    // A plugin's strings need not be UTF-8: repaired, not a throw.
    out.put(body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    out.flush();
  } catch (const std::exception&) {
    return 1;
  }
  // Without static destructors or the library's deinit: destroying is a
  // check of its own.
  std::_Exit(0);
}

}  // namespace grpo::plugins
