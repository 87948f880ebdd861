#include "core/util/host.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "core/util/error.h"

namespace basin {

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
  if (const char* s = std::getenv("BASIN_NUM_THREADS"))
    if (const int n = std::atoi(s); n >= 1) h.cores = n;
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

namespace {

// The value of a whole-number variable in [lo, hi]; 0 when it is unset or anything else.
int whole_number_setting(const char* name, int lo, int hi) {
  const char* s = std::getenv(name);
  if (!s) return 0;
  const std::string v = s;
  if (v.empty() || v.size() > 6 || v.find_first_not_of("0123456789") != std::string::npos) return 0;
  const int n = std::stoi(v);
  return n >= lo && n <= hi ? n : 0;
}

}  // namespace

void check_thread_setting() {
  if (const char* s = std::getenv("BASIN_NUM_THREADS"); s && whole_number_setting("BASIN_NUM_THREADS", 1, 999999) == 0)
    throw Error("BASIN_NUM_THREADS='" + std::string(s) + "' is not a number of threads (a whole number, at least 1; "
                "unset it to use every core)");
  if (const char* s = std::getenv("BASIN_PARALLEL_CHUNKS");
      s && whole_number_setting("BASIN_PARALLEL_CHUNKS", 1, kMaxParallelChunks) == 0)
    throw Error("BASIN_PARALLEL_CHUNKS='" + std::string(s) + "' is not a number of chunks per thread (a whole number from 1 to " +
                std::to_string(kMaxParallelChunks) + "; unset it for " + std::to_string(kDefaultParallelChunks) + ")");
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
