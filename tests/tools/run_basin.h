// Runs the `basin` binary of the build tree for the command-line tests.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

namespace basin::testing {

struct Result {
  int code;         // exit status, or 128 + the signal that killed it
  std::string out;  // stdout, and stderr too when asked
};

// Runs a shell command; its standard output and exit status.
inline Result capture(const std::string& cmd) {
  Result r{0, ""};
  FILE* p = popen(cmd.c_str(), "r");
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

inline std::string basin_path() { return std::string(BASIN_BINARY_DIR) + "/bin/basin"; }

// `basin ARGS`; stderr is dropped unless keep_stderr.
inline Result run_basin(const std::string& args, bool keep_stderr = false) {
  return capture(basin_path() + " " + args + (keep_stderr ? " 2>&1" : " 2>/dev/null"));
}

// What `basin ARGS` writes on stderr (stdout dropped).
inline std::string basin_stderr(const std::string& args) {
  return capture(basin_path() + " " + args + " 2>&1 >/dev/null").out;
}

// A whole file's text ("" where it cannot be read).
inline std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace basin::testing
