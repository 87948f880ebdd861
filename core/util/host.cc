#include "core/util/host.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "core/util/error.h"

namespace basin {

namespace {

constexpr int kMaxThreads = 999999;

// The value of the variable `name` when it is a whole number in [lo, hi]; 0 when it is
// unset or anything else.
int whole_number_setting(const char* name, int lo, int hi) {
  const char* s = std::getenv(name);
  if (!s) return 0;
  const std::string v = s;
  if (v.empty() || v.size() > 6 || v.find_first_not_of("0123456789") != std::string::npos) return 0;
  const int n = std::stoi(v);
  return n >= lo && n <= hi ? n : 0;
}

// Throws basin::Error naming `name`'s value when it is set but not a whole number in
// [lo, hi]; `what` says what the number counts and what unsetting it gives.
void refuse_bad_setting(const char* name, int lo, int hi, const std::string& what) {
  const char* s = std::getenv(name);
  if (s && whole_number_setting(name, lo, hi) == 0)
    throw Error(std::string(name) + "='" + s + "' is not a number of " + what);
}

}  // namespace

HostInfo probe_host() {
  HostInfo h;
  h.cpu_model = "unknown";
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) {
      h.cpu_model = line.substr(line.find(':') + 1);
      h.cpu_model.erase(0, h.cpu_model.find_first_not_of(" \t"));
      break;
    }
  h.cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (const int n = whole_number_setting("BASIN_NUM_THREADS", 1, kMaxThreads)) h.cores = n;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) h.vector_isa = "avx512";
  else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) h.vector_isa = "avx2";
  else h.vector_isa = "sse";
#elif defined(__aarch64__)
  h.vector_isa = "neon";
#else
  h.vector_isa = "scalar";
#endif
  return h;
}

std::string HostInfo::describe() const {
  return cpu_model + ", " + std::to_string(cores) + (cores == 1 ? " core, " : " cores, ") + vector_isa;
}


void check_thread_setting() {
  refuse_bad_setting("BASIN_NUM_THREADS", 1, kMaxThreads,
                     "threads (a whole number, at least 1; unset it to use every core)");
  refuse_bad_setting("BASIN_PARALLEL_CHUNKS", 1, kMaxParallelChunks,
                     "chunks per thread (a whole number from 1 to " + std::to_string(kMaxParallelChunks) +
                         "; unset it for " + std::to_string(kDefaultParallelChunks) + ")");
}

int parallel_chunks_setting() {
  const int n = whole_number_setting("BASIN_PARALLEL_CHUNKS", 1, kMaxParallelChunks);
  return n > 0 ? n : kDefaultParallelChunks;
}

const HostInfo& this_host() {
  static const HostInfo h = probe_host();
  return h;
}

const std::string& host_description() {
  static const std::string d = this_host().describe();
  return d;
}

}  // namespace basin
