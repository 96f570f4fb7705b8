#include "plugins/crash_guard.h"

#include <csignal>
#include <cstring>
#include <initializer_list>
#include <mutex>

#include <unistd.h>

namespace grpo::plugins {

namespace {

thread_local const char* t_plugin = nullptr;
thread_local const char* t_file = nullptr;
thread_local const char* t_call = nullptr;

void write_str(const char* s) {
  if (s) {
    ssize_t ignored = ::write(STDERR_FILENO, s, std::strlen(s));
    (void)ignored;
  }
}

// Async-signal-safe: only write(2), then the default action.
void on_fatal_signal(int sig) {
  if (t_plugin) {
    write_str("\nfatal: the process crashed (");
    write_str(strsignal(sig));
    write_str(") inside plugin '");
    write_str(t_plugin);
    write_str("' during ");
    write_str(t_call);
    write_str("() — file ");
    write_str(t_file);
    write_str(". The bug is in that plugin: run without it, or report it to its author.\n");
  }
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

}  // namespace

void install_crash_handlers() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) std::signal(sig, on_fatal_signal);
  });
}

PluginCallScope::PluginCallScope(const char* plugin, const char* file, const char* call)
    : saved_{t_plugin, t_file, t_call} {
  t_plugin = plugin;
  t_file = file;
  t_call = call;
}

PluginCallScope::~PluginCallScope() {
  t_plugin = saved_[0];
  t_file = saved_[1];
  t_call = saved_[2];
}

}  // namespace grpo::plugins
