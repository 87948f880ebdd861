// bench/measure_state: one program measured again and again in one measurement worker
// (codegen/measure.h), with random programs of the same task measured in between, as a
// tuning run measures them. A program's latency should not depend on what the worker
// ran before; this prints, per measurement of the program, how many random programs
// the worker had run and the latency, then the spread (docs/PERFORMANCE.md, "The
// worker's history changes a program's latency").
//
//   build/bin/measure_state_bench --workload resnet18-c9 --config BEST.json [--rounds 8]
//                                 [--between 8] [--seed 1]
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <string>

#include "bench/machine.h"
#include "codegen/measure.h"
#include "core/ops/registry.h"
#include "core/ops/workloads.h"
#include "core/schedule/sketch.h"

using namespace basin;

int main(int argc, char** argv) {
  std::string workload, config;
  int rounds = 8, between = 8;
  uint64_t seed = 1;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << "measure_state_bench: " << a << " needs a value\n";
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--workload") workload = next();
    else if (a == "--config") config = next();
    else if (a == "--rounds") rounds = std::stoi(next());
    else if (a == "--between") between = std::stoi(next());
    else if (a == "--seed") seed = std::stoull(next());
    else {
      std::cerr << "measure_state_bench: unknown argument " << a << "\n";
      return 2;
    }
  }
  if (workload.empty() || config.empty()) {
    std::cerr << "measure_state_bench: --workload W and --config FILE are required\n";
    return 2;
  }
  const ops::Workload& w = ops::find_workload(workload);
  ops::OpGraph g = ops::build_op(w.op, w.params);
  std::ifstream in(config);
  if (!in) {
    std::cerr << "measure_state_bench: cannot read " << config << "\n";
    return 2;
  }
  std::stringstream text;
  text << in.rdbuf();
  std::vector<sched::Sketch> sketches = sched::cpu_sketches(g);
  const sched::Sketch* s = nullptr;
  sched::Config c = sched::config_from_json(text.str(), sketches, config, &s);
  const size_t index = static_cast<size_t>(s - sketches.data());
  codegen::MeasurePool pool(g, sketches);
  std::mt19937_64 rng(seed);
  std::printf("machine: %s, %d cores; %s, %s\n", bench::cpu_model().c_str(), bench::cores(), workload.c_str(),
              config.c_str());
  std::vector<double> seen;
  for (int r = 0; r < rounds; ++r) {
    codegen::MeasureResult m = pool.measure_one({&pool.sketches()[index], c});
    if (!m.ok()) {
      std::cerr << "measure_state_bench: the program failed: " << m.error << "\n";
      return 1;
    }
    seen.push_back(m.min_us());
    std::printf("after %4d random programs: %10.1f us\n", r * between, m.min_us());
    std::fflush(stdout);
    for (int k = 0; k < between; ++k) {
      const sched::Sketch& o = pool.sketches()[std::uniform_int_distribution<size_t>(0, sketches.size() - 1)(rng)];
      pool.measure_one({&o, sched::random_config(o, rng)});
    }
  }
  std::sort(seen.begin(), seen.end());
  std::printf("min %.1f us, median %.1f us, max %.1f us: max/min %.2f\n", seen.front(), seen[seen.size() / 2],
              seen.back(), seen.back() / seen.front());
  return 0;
}
