// How fast the oracle is: the interpreter's throughput on benchmark workloads (it will
// check thousands of generated kernels, so its speed bounds how many the tests afford).
// Prints a table, or one JSON object with --json. Never fails for being slow.
#include <chrono>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "bench/machine.h"
#include "codegen/op_check.h"
#include "core/ir/interpreter.h"
#include "core/ir/lower.h"
#include "core/ops/registry.h"
#include "core/ops/workloads.h"

int main(int argc, char** argv) {
  using namespace basin;
  bool json = argc > 1 && std::strcmp(argv[1], "--json") == 0;
  std::vector<std::string> workloads = {"gemm-256", "bert-768x768", "attn-bmm", "resnet18-c3", "resnet18-c12"};
  nlohmann::json rows = nlohmann::json::array();
  if (!json)
    std::cout << "machine: " << bench::cpu_model() << ", " << std::thread::hardware_concurrency() << " cores\n"
              << "workload        interpreter_s  M_flop/s  max_rel_error_vs_libtorch\n";
  for (const std::string& name : workloads) {
    const ops::Workload& w = ops::find_workload(name);
    ops::OpGraph g = ops::build_op(w.op, w.params);
    codegen::OpCheck c = codegen::check_against_torch(g, 1);
    double mflops = g.flops / c.interpret_seconds / 1e6;
    rows.push_back({{"workload", name},
                    {"interpreter_seconds", c.interpret_seconds},
                    {"mflops", mflops},
                    {"max_rel_error", c.max_rel_error}});
    if (!json) {
      std::printf("%-15s %12.3f  %8.1f  %.2e\n", name.c_str(), c.interpret_seconds, mflops, c.max_rel_error);
      std::fflush(stdout);
    }
  }
  if (json) std::cout << nlohmann::json{{"machine", bench::cpu_model()}, {"results", rows}}.dump(2) << "\n";
  return 0;
}
