// What every benchmark prints about the machine: CPU model, cores, and the peak FP32
// FMA throughput measured by a micro-benchmark on all cores; and the median the
// benchmarks report.
#pragma once

#include <string>
#include <vector>

namespace basin::bench {

// The CPU as records name it, without the cores: "AMD EPYC (family 26 model 2)".
std::string cpu_model();
int cores();
// GFLOP/s of independent vector FMAs on every core (AVX-512 where the CPU has it,
// else AVX2, else scalar).
double measured_peak_gflops();

// The middle value (the upper one of an even count); 0 for none.
double median(std::vector<double> v);

}  // namespace basin::bench
