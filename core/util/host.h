// The machine basin runs on, as records name it: the CPU's model,
// the cores its kernels run on and its widest vector instruction set. Latencies are only comparable
// between programs measured on one such machine; a records file carries each record's
// host so that tuning, training and evaluation never mix two machines' latencies.
#pragma once

#include <string>

namespace basin {

struct HostInfo {
  std::string cpu_model;  // /proc/cpuinfo's "model name" ("unknown" when absent)
  // The threads parallel loops use: BASIN_NUM_THREADS when set (a kernel limited to
  // one core is another machine's program as far as latencies go), else the online
  // cores (std::thread::hardware_concurrency).
  int cores = 1;
  std::string vector_isa; // "avx512", "avx2", "sse" (x86) or the architecture's name
  // "AMD EPYC, 2 cores, avx2": the form stored in records.
  std::string describe() const;
};

// This machine, read now (from /proc/cpuinfo, the CPU and BASIN_NUM_THREADS).
HostInfo probe_host();
// Throws basin::Error naming the value when BASIN_NUM_THREADS is set to anything but
// a whole number of at least 1 (probe_host ignores such a value; the command line
// refuses it, since records would name every core while the user meant fewer).
// Likewise for BASIN_PARALLEL_CHUNKS (parallel_chunks_setting).
void check_thread_setting();
// Chunks per thread that a parallel loop is cut into (codegen/cpu_runtime.h): the
// threads claim them in turn, so a thread that starts late or runs slow leaves its
// share to the others. BASIN_PARALLEL_CHUNKS when set to a whole number from 1 (one
// contiguous chunk per thread, the static split) to kMaxParallelChunks, else
// kDefaultParallelChunks.
inline constexpr int kDefaultParallelChunks = 4;
inline constexpr int kMaxParallelChunks = 64;
int parallel_chunks_setting();
// This machine (probe_host, read once).
const HostInfo& this_host();
// this_host().describe().
const std::string& host_description();

}  // namespace basin
