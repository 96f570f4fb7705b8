#include "plugins/conformance.h"

#include <elf.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <fstream>
#include <random>
#include <stdexcept>

#include <fmt/format.h>
#include <grpo/reward.h>
#include <grpo/sampler.h>
#include <grpo/version.h>

#include "plugins/conformance_steps.h"
#include "plugins/wire.h"
#include "plugins/worker_process.h"

namespace grpo::plugins {

namespace {

// What the checker keeps of a check's stdout: enough to quote and count.
constexpr off_t kStdoutKeepBytes = 64 << 10;
// A check's reply: its results and the plugins' descriptors.
constexpr uint64_t kReplyMaxBytes = 64ull << 20;
// A worker whose reply pipe ended has this long to exit of its own (its
// crash being reported) before it is killed.
constexpr int64_t kExitGraceMs = 2000;

template <class T>
T read_at(std::ifstream& in, uint64_t offset) {
  T value{};
  in.seekg(static_cast<std::streamoff>(offset));
  in.read(reinterpret_cast<char*>(&value), sizeof value);
  if (!in) throw std::runtime_error("truncated ELF file");
  return value;
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

// A file for a check's stdout: a plugin's prints must not reach the report,
// and printing there is itself a fault (stdout is the output of grpo-host's
// commands). Sealed at 64 KiB, so a plugin that prints without end fills no
// memory; its offset, shared with the child, counts what was written.
int stdout_file() {
  const int fd = ::memfd_create("grpo-check-stdout", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return -1;
  if (::ftruncate(fd, kStdoutKeepBytes) != 0 ||
      ::fcntl(fd, F_ADD_SEALS, F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// "" when nothing was printed; else what and how much, quoted printable.
std::string printed_on(int fd) {
  if (fd < 0) return "";
  const off_t n = ::lseek(fd, 0, SEEK_CUR);
  if (n <= 0) return "";
  char head[80];
  const ssize_t got = ::pread(fd, head, std::min<off_t>(n, sizeof head), 0);
  std::string quoted;
  for (ssize_t i = 0; i < got; ++i) {
    const unsigned char c = static_cast<unsigned char>(head[i]);
    if (c == '\\' || c == '"') quoted += fmt::format("\\{}", static_cast<char>(c));
    else if (std::isprint(c)) quoted += static_cast<char>(c);
    else quoted += fmt::format("\\x{:02x}", c);
  }
  return fmt::format("it wrote {}{} bytes to stdout (\"{}{}\"): stdout is the host's output; log with host.info() or "
                     "host.warn()",
                     n >= kStdoutKeepBytes ? "at least " : "", n, quoted, n > got ? "..." : "");
}

struct StepReply {
  std::vector<CheckResult> results;
  std::vector<PluginInfo> plugins;
};

StepReply parse_reply(const std::string& body) {
  const nlohmann::json j = nlohmann::json::parse(body);
  StepReply r;
  for (const auto& x : j.at("results"))
    r.results.push_back({x.at("name").get<std::string>(), x.at("passed").get<bool>(), x.at("detail").get<std::string>()});
  for (const auto& x : j.at("plugins")) {
    auto text = [&](const char* key) { return x.at(key).get<std::string>(); };
    r.plugins.push_back({text("name"), text("interface_id"), text("version"), text("description"),
                         text("options_json"), text("file"), text("sdk_version")});
  }
  return r;
}

// Runs one step in a grpo-plugin-worker of its own (the isolated reward's
// worker, started for a check instead of a reward), within the timeout. What
// befalls the process (a signal, an exit, the timeout, a reply that is not
// its own, output on stdout) fails the step's check, named.
StepReply run_step(const std::string& path, const std::string& plugin, const std::string& step,
                   const nlohmann::json& args, const CheckOptions& options) {
  const std::string name = step_check_name(plugin, step);
  const std::string exe = plugin_worker_path(options.worker_exe);
  const int out_fd = stdout_file();
  WorkerProcess process;
  StepReply reply;
  std::string why;
  if (const int rc = process.start(exe, -1, out_fd); rc != 0) {
    why = fmt::format("cannot start the plugin worker {}: {} (it is installed beside grpo-host; set "
                      "GRPO_PLUGIN_WORKER to its path)",
                      exe, std::strerror(rc));
  } else {
    const uint64_t token = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
    Wire to(process.to_child()), from(process.from_child());
    from.interrupt_when([&process]() -> bool {  // as the reward worker's reader: a forked helper may hold the pipe
      if (process.exited_and_drained()) throw std::runtime_error("end of stream");
      return false;
    });
    to.put_u64(kCheckWorkerMagic);
    to.put_u64(token);
    to.put(path);
    to.put(plugin);
    to.put(step);
    to.put(args.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    const int64_t deadline = now_ms() + static_cast<int64_t>(options.timeout_s * 1000);
    try {
      to.flush();
      if (from.get_u64(deadline) != token)
        throw std::runtime_error("not its reply (did the plugin write on the worker's pipe?)");
      reply = parse_reply(from.get_string(deadline, kReplyMaxBytes));
    } catch (const std::exception& e) {
      const std::string what = e.what();
      reply = {};
      if (what == "end of stream") {
        why = process.reap(kExitGraceMs) + " during this check";
      } else {
        process.kill_group();  // alive, and of no further use
        process.reap(0);
        why = what == "timeout" ? fmt::format("did not finish within {} s (--check_timeout); its worker process was "
                                              "killed",
                                              options.timeout_s)
                                : "its worker process sent a reply that is no answer to this check: " + what;
      }
    }
  }
  process.stop();
  const std::string printed = printed_on(out_fd);
  if (out_fd >= 0) ::close(out_fd);
  if (!why.empty()) {
    reply.results = {{name, false, printed.empty() ? why : why + "; " + printed}};
  } else if (!printed.empty()) {
    if (reply.results.empty()) reply.results.push_back({name, false, ""});
    for (CheckResult& r : reply.results) {
      r.passed = false;
      r.detail = r.detail.empty() ? printed : r.detail + "; " + printed;
    }
  }
  return reply;
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

std::vector<CheckResult> check_plugin_library(const std::string& path, const nlohmann::json& plugin_args,
                                              const CheckOptions& options) {
  ::signal(SIGPIPE, SIG_IGN);  // a check's process that died is a failed write, not the checker's death
  std::vector<CheckResult> out;
  auto run = [&](const std::string& plugin, const std::string& step, const nlohmann::json& args) {
    StepReply r = run_step(path, plugin, step, args, options);
    const bool ok = std::all_of(r.results.begin(), r.results.end(), [](const CheckResult& c) { return c.passed; });
    out.insert(out.end(), r.results.begin(), r.results.end());
    return std::make_pair(ok, std::move(r.plugins));
  };
  auto [loaded, plugins] = run("", "load", nlohmann::json());
  if (!loaded) return out;
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
    std::vector<std::string> steps;
    if (info.interface_id == GRPO_REWARD_INTERFACE)
      steps = {"score 0", "score 1", "score 64", "edges", "concurrent", "destroy"};
    else if (info.interface_id == GRPO_MULTITURN_INTERFACE)
      steps = {"tools", "conversations", "destroy"};
    if (info.interface_id == GRPO_SAMPLER_INTERFACE) run(info.name, "sampler table", args);
    // The other checks need an instance: they are left out when it cannot be created.
    if (steps.empty() || !run(info.name, "create", args).first) continue;
    for (const std::string& step : steps) run(info.name, step, args);
  }
  return out;
}

}  // namespace grpo::plugins
