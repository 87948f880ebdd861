// bench/measure_state: one program measured again and again in one measurement worker
// (codegen/measure.h), with random programs of the same task measured in between, as a
// tuning run measures them. A program's latency should not depend on what the worker
// ran before; this prints, per measurement of the program, how many random programs
// the worker had run and the latency, then the spread (docs/PERFORMANCE.md@6bf7154, "The
// worker's history changes a program's latency").
//
// With --placement K it looks for the state instead, in this process: the program
// compiled K times (K copies of its machine code) and K sets of output arrays (the
// worker allocates fresh outputs for every measurement), then --rounds passes that
// time copy k on outputs 0 and copy 0 on outputs k, for each k in turn. A latency that
// follows the copy's index from pass to pass is the code's placement; one that follows
// the outputs' index is the data's; one that changes from pass to pass is neither.
//
//   build/bin/measure_state_bench --workload resnet18-c9 --config BEST.json [--rounds 8]
//                                 [--between 8] [--seed 1] [--placement K]
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <random>
#include <sstream>
#include <string>

#include <CLI/CLI.hpp>

#include "bench/machine.h"
#include "codegen/llvm_jit.h"
#include "codegen/measure.h"
#include "codegen/op_check.h"
#include "codegen/timing.h"
#include "core/ops/registry.h"
#include "core/ops/workloads.h"
#include "core/schedule/lower_sketch.h"
#include "core/schedule/sketch.h"

using namespace basin;

namespace {

// As the tuner times a candidate (3 rounds of at least 5 ms): the minimum, in us.
double tuning_min_us(const std::function<void()>& f) {
  return codegen::time_function(f, codegen::TimingOptions::tuning()).min_us;
}

// --placement: code copies against output sets, in one process (see the top).
int placement_main(const ops::OpGraph& g, const sched::Sketch& s, const sched::Config& c, int copies, int passes) {
  LoweredFunc f = sched::lower_config(g, s, c);
  std::vector<NDArray> inputs = codegen::random_inputs(g, 1);
  std::vector<std::unique_ptr<codegen::LlvmKernel>> code;
  std::vector<std::vector<NDArray>> outs;
  std::vector<std::vector<void*>> args;
  for (int k = 0; k < copies; ++k) {
    code.push_back(codegen::compile_llvm(f));
    outs.push_back(codegen::fresh_outputs(g));
  }
  for (int k = 0; k < copies; ++k) {
    std::vector<NDArray*> a = codegen::program_args(inputs, outs[static_cast<size_t>(k)]);
    std::vector<void*> raw;
    for (NDArray* x : a) raw.push_back(x->data());
    args.push_back(raw);
  }
  auto time = [&](int kc, int ko) {
    return tuning_min_us([&] { code[static_cast<size_t>(kc)]->run_raw(args[static_cast<size_t>(ko)].data()); });
  };
  std::printf("machine: %s, %d cores; %d copies of the code, %d output sets, %d passes (us)\n",
              bench::cpu_model().c_str(), bench::cores(), copies, copies, passes);
  std::vector<std::vector<double>> by_code(static_cast<size_t>(copies)), by_data(static_cast<size_t>(copies));
  for (int p = 0; p < passes; ++p) {
    std::printf("pass %2d  code k:", p);
    for (int k = 0; k < copies; ++k) {
      double t = time(k, 0);
      by_code[static_cast<size_t>(k)].push_back(t);
      std::printf(" %8.1f", t);
    }
    std::printf("\n         data k:");
    for (int k = 0; k < copies; ++k) {
      double t = time(0, k);
      by_data[static_cast<size_t>(k)].push_back(t);
      std::printf(" %8.1f", t);
    }
    std::printf("\n");
    std::fflush(stdout);
  }
  // How much of the spread the index explains: the spread of the per-index medians
  // against the spread of all timings.
  auto report = [&](const char* what, const std::vector<std::vector<double>>& v) {
    std::vector<double> medians, all;
    for (const auto& row : v) {
      medians.push_back(bench::median(row));
      all.insert(all.end(), row.begin(), row.end());
    }
    std::sort(medians.begin(), medians.end());
    std::sort(all.begin(), all.end());
    std::printf("%s: per-index medians %.1f to %.1f (max/min %.2f); all timings %.1f to %.1f (max/min %.2f)\n", what,
                medians.front(), medians.back(), medians.back() / medians.front(), all.front(), all.back(),
                all.back() / all.front());
  };
  report("code copies", by_code);
  report("output sets", by_data);
  return 0;
}

// --paired N: the program timed between two timings of a reference program (a
// random program of the same task, or a 512^3 matmul): does the reference's latency
// follow the machine's speed closely enough that the ratio is steadier than the time?
int paired_main(const ops::OpGraph& g, const std::vector<sched::Sketch>& sketches, const sched::Sketch& s,
                const sched::Config& c, int pairs, uint64_t seed) {
  std::vector<NDArray> inputs = codegen::random_inputs(g, 1), outputs = codegen::fresh_outputs(g);
  std::vector<void*> raw;
  for (NDArray* x : codegen::program_args(inputs, outputs)) raw.push_back(x->data());
  std::unique_ptr<codegen::LlvmKernel> prog = codegen::compile_llvm(sched::lower_config(g, s, c));
  const double t_prog = tuning_min_us([&] { prog->run_raw(raw.data()); });
  // The same task's reference: a random program within 2x of the program's latency.
  std::mt19937_64 rng(seed);
  std::unique_ptr<codegen::LlvmKernel> same;
  for (int tries = 0; tries < 200 && !same; ++tries) {
    const sched::Sketch& o = sketches[std::uniform_int_distribution<size_t>(0, sketches.size() - 1)(rng)];
    std::unique_ptr<codegen::LlvmKernel> k =
        codegen::compile_llvm(sched::lower_config(g, o, sched::random_config(o, rng)));
    double t = tuning_min_us([&] { k->run_raw(raw.data()); });
    if (t < 2 * t_prog && t > 0.5 * t_prog) same = std::move(k);
  }
  ops::OpGraph mm = ops::build_op("matmul", {{"M", "512"}, {"N", "512"}, {"K", "512"}});
  std::vector<sched::Sketch> mms = sched::cpu_sketches(mm);
  std::vector<NDArray> mi = codegen::random_inputs(mm, 1), mo = codegen::fresh_outputs(mm);
  std::vector<void*> mraw;
  for (NDArray* x : codegen::program_args(mi, mo)) mraw.push_back(x->data());
  std::unique_ptr<codegen::LlvmKernel> gemm =
      codegen::compile_llvm(sched::lower_config(mm, mms[0], sched::default_config(mms[0])));
  std::printf("machine: %s, %d cores; %d pairs (us): program, then program / mean of the reference before and after\n",
              bench::cpu_model().c_str(), bench::cores(), pairs);
  std::vector<double> t, r_same, r_gemm;
  for (int i = 0; i < pairs; ++i) {
    double s0 = same ? tuning_min_us([&] { same->run_raw(raw.data()); }) : 0;
    double g0 = tuning_min_us([&] { gemm->run_raw(mraw.data()); });
    double p = tuning_min_us([&] { prog->run_raw(raw.data()); });
    double g1 = tuning_min_us([&] { gemm->run_raw(mraw.data()); });
    double s1 = same ? tuning_min_us([&] { same->run_raw(raw.data()); }) : 0;
    t.push_back(p);
    if (same) r_same.push_back(p / ((s0 + s1) / 2));
    r_gemm.push_back(p / ((g0 + g1) / 2));
    std::printf("%3d  %8.1f  same task %.3f (%8.1f %8.1f)  gemm %.3f (%8.1f %8.1f)\n", i, p, same ? r_same.back() : 0.0,
                s0, s1, r_gemm.back(), g0, g1);
    std::fflush(stdout);
  }
  auto spread = [](const char* what, std::vector<double> v) {
    if (v.empty()) return;
    std::sort(v.begin(), v.end());
    const double q1 = v[v.size() / 4], q3 = v[3 * v.size() / 4], m = v[v.size() / 2];
    std::printf("%-26s median %10.3f  interquartile/median %.3f  max/min %.2f\n", what, m, (q3 - q1) / m,
                v.back() / v.front());
  };
  spread("program (us)", t);
  spread("/ same-task reference", r_same);
  spread("/ 512^3 matmul", r_gemm);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string workload, config;
  int rounds = 8, between = 8, placement = 0, paired = 0;
  uint64_t seed = 1;
  CLI::App app{"bench/measure_state: one program measured again and again (docs/PERFORMANCE.md@6bf7154)",
               "measure_state_bench"};
  app.add_option("--workload", workload, "a named workload (`basin workloads`)")->required();
  app.add_option("--config", config, "the program's configuration (JSON)")->required();
  app.add_option("--rounds", rounds, "measurements of the program (with --placement: passes)");
  app.add_option("--between", between, "random programs measured between two of its measurements");
  app.add_option("--seed", seed, "seed of the random programs");
  app.add_option("--placement", placement, "K code copies against K output sets, in this process");
  app.add_option("--paired", paired, "N timings of the program between two of a reference's");
  CLI11_PARSE(app, argc, argv);
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
  if (placement > 0) return placement_main(g, *s, c, placement, rounds);
  if (paired > 0) return paired_main(g, sketches, *s, c, paired, seed);
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
