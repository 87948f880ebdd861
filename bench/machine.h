// What every benchmark prints about the machine: CPU model, cores, and the peak FP32
// FMA throughput measured by a micro-benchmark on all cores.
#pragma once

#include <string>

namespace basin::bench {

std::string cpu_model();
int cores();
// GFLOP/s of independent vector FMAs on every core (AVX-512 where the CPU has it,
// else AVX2, else scalar).
double measured_peak_gflops();

}  // namespace basin::bench
