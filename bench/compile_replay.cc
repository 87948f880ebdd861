// bench/compile_replay: the LLVM compile time of tuning runs' programs, compiled again
// without running them. Every distinct program of each records file (its `llvm`
// records) is lowered and compiled as the measuring worker compiles it, and the
// seconds are summed: the total, the median, the slowest, and the programs over one
// second with their share of the total. Run it under two LLVM settings
// (BASIN_LLVM_ARGS) to compare their compile time. It does not compare machine code:
// one program's machine code can differ between two processes (a third of
// a GEMM run's programs, in the order of an address addition's operands), so identical
// code is checked with llc-16 on the optimized IR (`basin op --emit llvm`), which is
// deterministic (docs/perf/compile-time/identical.sh@6bf7154).
//
// --each FILE writes one line per program (tab-separated: records file, record id,
// emitted LLVM instructions, compile seconds, the record's latency in us or -1 for an
// error, a hash of the machine code) for studies of compile time against program size,
// and of whether two compilations of a program give the same machine code.
//
//   build/bin/compile_replay --records RUN.db [--records RUN2.db ...] [--each FILE] [--json]
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "bench/machine.h"
#include "codegen/llvm_jit.h"
#include "core/schedule/lower_sketch.h"
#include "core/schedule/sketch.h"
#include "core/util/error.h"
#include "records/records.h"

using namespace basin;

int main(int argc, char** argv) {
  std::vector<std::string> files;
  bool json = false;
  std::string each_path;
  CLI::App app{
      "bench/compile_replay: tuning runs' programs compiled again (docs/PERFORMANCE.md@6bf7154, \"Compile time\")"};
  app.add_option("--records", files, "a records file (repeatable)")->required()->check(CLI::ExistingFile);
  app.add_flag("--json", json, "print one JSON object");
  app.add_option("--each", each_path, "write one line per program: file, record id, instructions, seconds, latency");
  CLI11_PARSE(app, argc, argv);
  const char* llvm_args = std::getenv("BASIN_LLVM_ARGS");
  nlohmann::json out = {{"machine", {{"cpu", bench::cpu_model()}, {"cores", bench::cores()}}},
                        {"llvm_args", llvm_args ? llvm_args : ""},
                        {"runs", nlohmann::json::array()}};
  // Each task and its sketches, built once (a run's records are of one task).
  std::map<std::string, std::pair<ops::OpGraph, std::vector<sched::Sketch>>> tasks;
  std::ofstream each;
  if (!each_path.empty()) {
    each.open(each_path);
    if (!each) throw Error("cannot write '" + each_path + "'");
  }
  double all_total = 0, all_slow = 0;
  size_t all_programs = 0;
  for (const std::string& file : files) {
    search::RecordStore store(file);
    std::set<std::string> seen;
    std::vector<double> secs;
    int skipped = 0;
    for (const search::Record& r : store.all()) {
      if (r.target != "llvm" || !seen.insert(r.task_key + "\n" + r.sketch + "\n" + r.config).second) continue;
      try {
        auto it = tasks.find(r.task_key);
        if (it == tasks.end()) {
          ops::OpGraph task = sched::task_from_key(r.task_key);
          std::vector<sched::Sketch> sketches = sched::sketches_for(task, "llvm");
          it = tasks.emplace(r.task_key, std::make_pair(std::move(task), std::move(sketches))).first;
        }
        const auto& [task, sketches] = it->second;
        const sched::Sketch* s = nullptr;
        sched::Config c = sched::config_from_json(r.config, sketches, file, &s);
        auto t0 = std::chrono::steady_clock::now();
        codegen::LlvmOptions lo;
        lo.keep_object = each.is_open();
        std::unique_ptr<codegen::LlvmKernel> k = codegen::compile_llvm(sched::lower_config(task, *s, c), lo);
        secs.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        if (each) {
          each << file << '\t' << r.id << '\t' << k->emitted_instructions() << '\t' << secs.back() << '\t'
               << (r.ok() ? r.latency_us() : -1.0) << '\t' << std::hex << std::hash<std::string>()(k->object())
               << std::dec << '\n';
          each.flush();
        }
      } catch (const Error& e) {  // a task or sketch this basin no longer has: named, skipped
        std::cerr << "compile_replay: " << file << ": record " << r.id << " skipped: " << e.what() << "\n";
        ++skipped;
      }
    }
    if (secs.empty()) continue;
    double total = 0, slow = 0;
    int over_1s = 0;
    for (double x : secs) {
      total += x;
      if (x > 1) slow += x, ++over_1s;
    }
    std::vector<double> sorted = secs;
    std::sort(sorted.begin(), sorted.end());
    const double median = sorted[sorted.size() / 2], worst = sorted.back();
    all_total += total;
    all_slow += slow;
    all_programs += secs.size();
    out["runs"].push_back({{"records", file},
                           {"programs", secs.size()},
                           {"compile_seconds", total},
                           {"median_seconds", median},
                           {"max_seconds", worst},
                           {"over_1s", over_1s},
                           {"over_1s_seconds", slow},
                           {"skipped", skipped}});
    if (!json)
      std::printf("%s: %zu programs, compiled in %.1f s (median %.3f s, slowest %.2f s; %d over 1 s, %.1f s of it)\n",
                  file.c_str(), secs.size(), total, median, worst, over_1s, slow);
  }
  out["programs"] = all_programs;
  out["compile_seconds"] = all_total;
  out["over_1s_seconds"] = all_slow;
  if (json) std::cout << out.dump(2) << "\n";
  else std::printf("all: %zu programs, %.1f s (%.1f s in programs over 1 s)\n", all_programs, all_total, all_slow);
  return 0;
}
