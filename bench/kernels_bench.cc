// bench/kernels: the GEMM and ResNet-18 C1-C12 workloads. For each: the best of N
// random configurations (measured in the worker pool with the tuning-time timing,
// the winner re-timed with the full protocol), the configuration committed under
// bench/configs/ (built by reasoning about the machine, where there is one), and
// LibTorch's kernel (OpenBLAS for GEMM, oneDNN for convolutions) in the same run with
// the full protocol (BENCHMARKS.md). Also the median LLVM compile time per candidate.
// Prints a table, or one JSON object with --json; never fails for being slow.
//
//   build/bin/kernels_bench [--random N] [--workloads a,b,...] [--configs DIR] [--records F] [--json]
#include <algorithm>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <thread>

#include "bench/machine.h"
#include "codegen/llvm_jit.h"
#include "codegen/measure.h"
#include "codegen/op_check.h"
#include "codegen/torch_reference.h"
#include "core/ops/workloads.h"
#include "core/util/blas.h"
#include "core/schedule/lower_sketch.h"
#include "records/records.h"

namespace {

using namespace basin;

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Full-protocol latency of a configuration, in this process.
codegen::Timing time_config(const ops::OpGraph& g, const sched::Sketch& s, const sched::Config& c,
                            std::vector<NDArray>& in) {
  auto k = codegen::compile_llvm(sched::lower_config(g, s, c));
  std::vector<NDArray> out;
  for (const te::Tensor& t : g.outputs) out.emplace_back(t.dtype(), t.shape());
  std::vector<void*> raw;
  for (NDArray& a : in) raw.push_back(a.data());
  for (NDArray& a : out) raw.push_back(a.data());
  return codegen::time_function([&] { k->run_raw(raw.data()); }, codegen::TimingOptions::full());
}

}  // namespace

int main(int argc, char** argv) {
  basin::exec_with_torch_settings(argv, /*peer=*/true);  // the peer at its best (core/util/blas.h)
  int random_n = 20;
  std::string configs_dir = std::string(BASIN_SOURCE_DIR) + "/bench/configs";
  std::string records_path;
  bool json = false;
  std::vector<std::string> names = {"gemm-256", "gemm-512", "gemm-1024", "gemm-2048"};
  for (int i = 1; i <= 12; ++i) names.push_back("resnet18-c" + std::to_string(i));
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << "kernels_bench: " << a << " needs a value\n";
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--random") random_n = std::stoi(next());
    else if (a == "--configs") configs_dir = next();
    else if (a == "--records") records_path = next();
    else if (a == "--json") json = true;
    else if (a == "--workloads") {
      names.clear();
      std::stringstream ss(next());
      std::string w;
      while (std::getline(ss, w, ',')) names.push_back(w);
    } else {
      std::cerr << "kernels_bench: unknown argument " << a << "\n";
      return 2;
    }
  }
  if (!codegen::llvm_enabled()) {
    std::cerr << "kernels_bench: basin was built without LLVM\n";
    return 1;
  }
  const int threads = codegen::match_torch_threads();
  std::unique_ptr<search::RecordStore> records;
  if (!records_path.empty()) records = std::make_unique<search::RecordStore>(records_path);

  nlohmann::json out;
  out["machine"] = {{"cpu", bench::cpu_model()}, {"cores", threads}, {"peak_gflops", bench::measured_peak_gflops()}};
  out["random_configurations"] = random_n;
  out["workloads"] = nlohmann::json::array();
  std::vector<double> c2_compile;
  if (!json)
    std::cerr << "machine: " << out["machine"]["cpu"].get<std::string>() << ", " << threads << " cores, peak "
              << out["machine"]["peak_gflops"].get<double>() << " GFLOP/s (measured)\n";
  for (const std::string& name : names) {
    const ops::Workload& w = ops::find_workload(name);
    ops::OpGraph g = ops::build_op(w.op, w.params);
    std::vector<NDArray> in = codegen::random_inputs(g, 1);
    nlohmann::json row = {{"workload", name}, {"gflop", g.flops / 1e9}};

    // LibTorch, full protocol.
    codegen::Timing peer = codegen::time_torch_reference(g, in);
    row["torch_latency_us"] = peer.min_us;

    // Best of N random configurations.
    codegen::MeasurePool pool(g, sched::cpu_sketches(g));
    const std::vector<sched::Sketch>& ps = pool.sketches();  // candidates point into the pool's own copy
    std::mt19937_64 rng(42);
    std::vector<double> compile, lower, compile_cpu;
    int best = -1, errors = 0;
    double best_us = 1e300;
    std::vector<codegen::Candidate> cands;
    for (int i = 0; i < random_n; ++i) {
      const sched::Sketch& s = ps[std::uniform_int_distribution<size_t>(0, ps.size() - 1)(rng)];
      cands.push_back({&s, sched::random_config(s, rng)});
    }
    for (size_t i = 0; i < cands.size(); ++i) {
      double t0 = now_seconds();
      codegen::MeasureResult r = pool.measure_one(cands[i]);
      if (records) {
        search::Record rec;
        rec.task_key = sched::task_key(g);
        rec.target = "llvm";
        rec.sketch = cands[i].sketch->name;
        rec.config = sched::config_to_json(*cands[i].sketch, cands[i].config);
        rec.latencies_us = r.latencies_us;
        rec.error = r.error;
        rec.compile_seconds = r.compile_seconds;
        rec.started_at = t0;
        rec.finished_at = now_seconds();
        rec.seed = 42;
        records->add(rec);
      }
      if (!r.ok()) {
        ++errors;
        continue;
      }
      compile.push_back(r.compile_seconds);
      lower.push_back(r.lower_seconds);
      compile_cpu.push_back(r.compile_cpu_seconds);
      if (r.min_us() < best_us) {
        best_us = r.min_us();
        best = static_cast<int>(i);
      }
    }
    if (name == "resnet18-c2") {
      c2_compile = compile;
      out["resnet18_c2_median_compile_cpu_ms"] = bench::median(compile_cpu) * 1e3;
    }
    row["random_errors"] = errors;
    row["median_compile_ms"] = bench::median(compile) * 1e3;
    row["median_lower_ms"] = bench::median(lower) * 1e3;
    row["median_compile_cpu_ms"] = bench::median(compile_cpu) * 1e3;
    if (best >= 0) {
      codegen::Timing t = time_config(g, *cands[best].sketch, cands[best].config, in);
      row["random_best_latency_us"] = t.min_us;
      row["random_best_vs_torch"] = peer.min_us / t.min_us;
      row["random_best_config"] = nlohmann::json::parse(sched::config_to_json(*cands[best].sketch, cands[best].config));
    }
    // The committed configuration.
    std::ifstream f(configs_dir + "/" + name + ".json");
    if (f) {
      std::stringstream text;
      text << f.rdbuf();
      const sched::Sketch* s = nullptr;
      sched::Config c = sched::config_from_json(text.str(), ps, name + ".json", &s);
      codegen::MeasureResult check = pool.measure_one({s, c});  // verified against the reference
      if (check.ok()) {
        codegen::Timing t = time_config(g, *s, c, in);
        row["config_latency_us"] = t.min_us;
        row["config_gflops"] = g.flops / t.min_us / 1e3;
        row["config_vs_torch"] = peer.min_us / t.min_us;
      } else {
        row["config_error"] = check.error;
      }
    }
    row["torch_gflops"] = g.flops / peer.min_us / 1e3;
    if (!json) {
      std::cerr << name << ": torch " << peer.min_us << " us";
      if (row.contains("random_best_latency_us"))
        std::cerr << " | best of " << random_n << " random " << row["random_best_latency_us"].get<double>() << " us ("
                  << row["random_best_vs_torch"].get<double>() << "x)";
      if (row.contains("config_latency_us"))
        std::cerr << " | committed config " << row["config_latency_us"].get<double>() << " us ("
                  << row["config_vs_torch"].get<double>() << "x, " << row["config_gflops"].get<double>() << " GFLOP/s)";
      std::cerr << " | compile median " << row["median_compile_ms"].get<double>() << " ms wall, "
                << row["median_compile_cpu_ms"].get<double>() << " ms CPU (lowering "
                << row["median_lower_ms"].get<double>() << " ms)\n";
    }
    out["workloads"].push_back(row);
  }
  if (!c2_compile.empty()) out["resnet18_c2_median_compile_ms"] = bench::median(c2_compile) * 1e3;
  if (json) {
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  std::printf("\n%-14s %12s %14s %8s %14s %8s %10s\n", "workload", "torch_us", "random_best_us", "ratio", "config_us",
              "ratio", "compile_ms");
  for (const auto& r : out["workloads"]) {
    auto num = [&](const char* k) { return r.contains(k) ? r[k].get<double>() : 0.0; };
    std::printf("%-14s %12.1f %14.1f %8.2f %14.1f %8.2f %10.1f\n", r["workload"].get<std::string>().c_str(),
                num("torch_latency_us"), num("random_best_latency_us"), num("random_best_vs_torch"),
                num("config_latency_us"), num("config_vs_torch"), num("median_compile_ms"));
  }
  std::printf("ratio = LibTorch latency / basin latency (above 1: basin is faster)\n");
  if (out.contains("resnet18_c2_median_compile_ms"))
    std::printf("median LLVM compile time per candidate, resnet18-c2: %.1f ms wall, %.1f ms CPU\n",
                out["resnet18_c2_median_compile_ms"].get<double>(),
                out["resnet18_c2_median_compile_cpu_ms"].get<double>());
  return 0;
}
