// Runs a reference library's Python (tests/oracles/, or a script a test
// writes) at test time, on the Python that LibTorch's wheel came from:
// scripts/setup.sh installs the pinned oracles there (pyarrow, duckdb,
// tokenizers). A test that needs one fails, never skips, when it is missing.
// A test target using this defines GRPO_PYTHON (tests/CMakeLists.txt).
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <sys/wait.h>

namespace grpo::test {

// Runs `args` (a script and its arguments, each quoted as the shell needs)
// with stdout and stderr into `log`. Returns "" when it exited 0, else what it
// printed and what to do, for the assertion's message.
inline std::string run_python(const std::string& args, const std::filesystem::path& log) {
  const int status = std::system(("'" GRPO_PYTHON "' " + args + " > '" + log.string() + "' 2>&1").c_str());
  if (status == 0) return "";
  std::ostringstream out;
  const std::string how = WIFEXITED(status) ? "exit status " + std::to_string(WEXITSTATUS(status)) : "killed";
  out << "'" GRPO_PYTHON "' " << args << " failed (" << how << "):\n" << std::ifstream(log).rdbuf()
      << "\nIf a module is missing, run scripts/setup.sh: it installs the pinned reference libraries the tests "
         "run as oracles.";
  return out.str();
}

// The same for a script's source, written to dir/make.py first.
inline std::string run_python_source(const std::string& source, const std::filesystem::path& dir) {
  std::ofstream(dir / "make.py") << source;
  return run_python("'" + (dir / "make.py").string() + "'", dir / "make.log");
}

// A script under tests/oracles/, quoted for run_python.
inline std::string oracle_script(const std::string& name) {
  return "'" GRPO_SOURCE_DIR "/tests/oracles/" + name + "'";
}

}  // namespace grpo::test
