// The machine basin runs on, as records name it: the CPU's model,
// its core count and its widest vector instruction set. Latencies are only comparable
// between programs measured on one such machine; a records file carries each record's
// host so that tuning, training and evaluation never mix two machines' latencies.
#pragma once

#include <string>

namespace basin {

struct HostInfo {
  std::string cpu_model;  // /proc/cpuinfo's "model name" ("unknown" when absent)
  int cores = 1;          // online cores (std::thread::hardware_concurrency)
  std::string vector_isa; // "avx512", "avx2", "sse" (x86) or the architecture's name
  // "AMD EPYC, 2 cores, avx2": the form stored in records.
  std::string describe() const;
};

// This machine (read once).
const HostInfo& this_host();
// this_host().describe().
const std::string& host_description();

}  // namespace basin
