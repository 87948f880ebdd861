#include "bench/machine.h"

#include <algorithm>
#include <vector>

#include "core/util/hardware.h"
#include "core/util/host.h"

namespace basin::bench {

std::string cpu_model() { return this_host().cpu(); }

int cores() { return this_host().cores; }

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

double measured_peak_gflops() { return measure_peak_gflops(cores(), 20'000'000, 5); }

}  // namespace basin::bench
