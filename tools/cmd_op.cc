// `basin op`: compile one operator (default schedule), verify it against LibTorch (and
// against the interpreter, the oracle), measure it, and with --compare time LibTorch's
// kernel in the same run.
#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>

#include "codegen/c_printer.h"
#include "codegen/cuda.h"
#include "codegen/llvm_jit.h"
#include "codegen/op_check.h"
#include "codegen/timing.h"
#include "codegen/torch_reference.h"
#include "core/ir/interpreter.h"
#include "core/ir/lower.h"
#include "core/ops/registry.h"
#include "core/ops/workloads.h"
#include "core/schedule/lower_sketch.h"
#include <fstream>
#include <sstream>
#include "core/util/blas.h"
#include "core/util/error.h"
#include "tools/commands.h"

namespace basin::tools {

namespace {

struct OpOptions {
  std::string name;
  std::string workload;
  std::vector<std::string> params;
  std::string target;
  std::string precision;
  std::string arch;
  std::string emit;
  std::string config;
  std::string oracle = "auto";
  std::string timing = "full";
  uint64_t seed = 1;
  double tolerance = 1e-4;
  bool compare = false;
  bool json = false;
};

// The interpreter runs at roughly 100 MFLOP/s: beyond this, `--oracle auto` skips it.
constexpr double kOracleFlopLimit = 1e9;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

ErrorStats compare_all(const std::vector<NDArray>& got, const std::vector<NDArray>& ref, const std::string& op,
                       const char* against) {
  ErrorStats worst;
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i].shape() != ref[i].shape())
      throw Error("operator '" + op + "' output " + std::to_string(i) + " has shape " + shape_str(got[i].shape()) +
                  ", " + against + "'s " + shape_str(ref[i].shape()));
    ErrorStats s = compare_arrays(got[i], ref[i]);
    worst.max_abs = std::max(worst.max_abs, s.max_abs);
    worst.max_rel = std::max(worst.max_rel, s.max_rel);
  }
  return worst;
}

int run_op(const OpOptions& o) {
  std::string target = o.target.empty() ? (codegen::llvm_enabled() ? "llvm" : "interpreter") : o.target;
  ops::OpGraph g = op_from_args(o.name, o.workload, o.params);
  const std::string& op = g.op;
  // What --emit prints comes from one target's compiler: LLVM IR and assembly from the
  // llvm target's, CUDA C from the cuda target's.
  const std::string emit_target = o.emit == "llvm" || o.emit == "asm" ? "llvm" : o.emit == "cuda" ? "cuda" : "";
  if (!emit_target.empty() && emit_target != target)
    throw Error("--emit " + o.emit + " prints the " + emit_target + " target's code; this is --target " + target);
  // The program: the given configuration, else the default configuration of the default
  // sketch (sched::default_sketch; the interpreter target runs the plain default schedule).
  const bool cuda = target == "cuda";
  if (target != "interpreter") check_precision_option(target, o.precision, false);
  std::vector<sched::Sketch> sketches =
      target == "interpreter" ? sched::cpu_sketches(g) : sched::sketches_for(g, target, o.precision);
  if (cuda && sketches.empty()) throw Error("operator '" + op + "' has no GPU sketch yet (its stages share no rows)");
  const sched::Sketch* sketch = &sketches.at(sched::default_sketch(sketches));
  sched::Config cfg;
  if (!o.config.empty()) {
    std::ifstream in(o.config);
    if (!in) throw NotFoundError("--config: cannot read '" + o.config + "'");
    std::stringstream text;
    text << in.rdbuf();
    cfg = sched::config_from_json(text.str(), sketches, o.config, &sketch);
  } else {
    cfg = sched::default_config(*sketch);
  }
  LoweredFunc func = target == "interpreter" && o.config.empty() ? lower_default(op, g.inputs, g.outputs)
                                                                 : sched::lower_config(g, *sketch, cfg);
  std::vector<NDArray> inputs = codegen::random_inputs(g, o.seed);
  const codegen::TimingOptions topt =
      o.timing == "quick" ? codegen::TimingOptions::quick() : codegen::TimingOptions::full();
  nlohmann::json j = {{"op", op}, {"target", target}, {"params", nlohmann::json::object()}, {"flops", g.flops}};
  for (const auto& [k, v] : g.attrs.values()) j["params"][k] = ops::attr_to_string(v);
  if (!o.workload.empty()) j["workload"] = o.workload;
  if (target != "interpreter" || !o.config.empty())
    j["config"] = nlohmann::json::parse(sched::config_to_json(*sketch, cfg));
  if (o.emit == "ir") std::cout << to_string(func);
  if (o.emit == "c") std::cout << codegen::print_c(func);
  codegen::CudaBinary cuda_bin;
  if (cuda) {
    // CUDA C compiled by NVRTC for the GPU here, or for --arch (which needs no GPU).
    std::string source = codegen::print_cuda(func);
    if (o.emit == "cuda") std::cout << source;
    std::string why;
    const bool gpu = codegen::cuda_available(&why);
    std::string arch = !o.arch.empty() ? o.arch : gpu ? codegen::cuda_device_arch() : "";
    if (!arch.empty()) {
      cuda_bin = codegen::compile_cuda(source, op, arch);
      j["arch"] = arch;
      j["cubin_bytes"] = cuda_bin.cubin.size();
      if (!o.json)
        std::cerr << "basin: " << op << ": compiled for " << arch << " (" << cuda_bin.cubin.size()
                  << " bytes of cubin)\n";
    }
    if (!gpu) throw Error("the cuda target is unavailable: " + why);
  }

  std::vector<NDArray> outputs = codegen::fresh_outputs(g);
  if (cuda) {
    // Run on GPU 0, checked below like the CPU kernel, timed with CUDA events (the L2
    // flushed before each launch).
    if (cuda_bin.arch != codegen::cuda_device_arch())
      throw Error("--arch " + cuda_bin.arch + " is not this GPU's architecture (" + codegen::cuda_device_arch() + ")");
    codegen::CudaKernel kernel(cuda_bin, func);
    kernel.run(codegen::program_args(inputs, outputs));
    codegen::Timing t = kernel.time(topt, /*flush_l2=*/true);
    j["latency_us"] = t.min_us;
    j["latency_median_us"] = t.median_us;
    j["gflops"] = g.flops / (t.min_us * 1e-6) / 1e9;
    j["device"] = codegen::cuda_device_info().name;
  }
  std::unique_ptr<codegen::LlvmKernel> kernel;
  if (target == "llvm") {
    if (!o.json) std::cerr << "basin: " << op << ": compiling with LLVM...\n";
    codegen::LlvmOptions lopt;
    lopt.keep_ir = o.emit == "llvm";
    lopt.keep_asm = o.emit == "asm";
    kernel = codegen::compile_llvm(func, lopt);
    j["compile_seconds"] = kernel->compile_seconds();
    if (o.emit == "llvm") std::cout << kernel->llvm_ir();
    if (o.emit == "asm") std::cout << kernel->assembly();
    std::vector<NDArray*> args = codegen::program_args(inputs, outputs);
    kernel->run(args);
    std::vector<void*> raw;
    for (NDArray* a : args) raw.push_back(a->data());
    codegen::Timing t = codegen::time_function([&] { kernel->run_raw(raw.data()); }, topt);
    j["latency_us"] = t.min_us;
    j["latency_median_us"] = t.median_us;
    j["gflops"] = g.flops / (t.min_us * 1e-6) / 1e9;
  }

  bool run_oracle =
      target == "interpreter" || o.oracle == "always" || (o.oracle == "auto" && g.flops <= kOracleFlopLimit);
  bool ok = true;
  if (run_oracle) {
    std::vector<NDArray> oracle = codegen::fresh_outputs(g);
    auto t0 = std::chrono::steady_clock::now();
    Interpreter(func).run(codegen::program_args(inputs, oracle));
    j["interpreter_seconds"] = seconds_since(t0);
    if (target == "llvm" || cuda) {
      ErrorStats s = compare_all(outputs, oracle, op, "the interpreter");
      j["oracle_max_abs_error"] = s.max_abs;
      j["oracle_max_rel_error"] = s.max_rel;
      ok &= s.max_rel <= sched::storage_tolerance(
                             g, j.contains("config") ? sched::oracle_tolerance(*sketch, o.tolerance) : o.tolerance);
    } else {
      outputs = std::move(oracle);
    }
  } else {
    j["oracle"] =
        "skipped: " + std::to_string(g.flops / 1e9) + " GFLOP is too much for the interpreter (--oracle always)";
  }
  std::vector<NDArray> reference = codegen::torch_reference(g, inputs);
  ErrorStats s = compare_all(outputs, reference, op, "LibTorch");
  j["max_abs_error"] = s.max_abs;
  j["max_rel_error"] = s.max_rel;
  // LibTorch computes in FP32: a TF32 program's results differ by its rounding.
  const double torch_tolerance =
      sched::storage_tolerance(g, j.contains("config") ? sched::result_tolerance(*sketch, o.tolerance) : o.tolerance);
  ok &= s.max_rel <= torch_tolerance;
  j["verified"] = ok;
  if (o.compare) {
    j["torch_threads"] = codegen::match_torch_threads();
    j["torch_blas_core"] = blas_core();
    codegen::Timing t = codegen::time_torch_reference(g, inputs, topt);
    j["torch_latency_us"] = t.min_us;
    j["torch_latency_median_us"] = t.median_us;
    if (j.contains("latency_us")) j["speedup_vs_torch"] = t.min_us / j["latency_us"].get<double>();
  }

  if (o.json) {
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << "operator           " << op << (o.workload.empty() ? "" : "  (" + o.workload + ")") << "\n";
    for (const auto& [k, v] : g.attrs.values()) std::cout << "  " << k << " = " << ops::attr_to_string(v) << "\n";
    std::cout << "target             " << target << "\n";
    if (j.contains("config")) std::cout << "configuration      " << j["config"].dump() << "\n";
    if (j.contains("latency_us"))
      std::cout << "latency_us         " << j["latency_us"].get<double>() << "  (median "
                << j["latency_median_us"].get<double>() << ")\n"
                << "gflops             " << j["gflops"].get<double>() << "\n";
    if (j.contains("torch_latency_us"))
      std::cout << "torch_latency_us   " << j["torch_latency_us"].get<double>() << "\n";
    if (j.contains("oracle_max_abs_error"))
      std::cout << "vs interpreter     max abs " << j["oracle_max_abs_error"].get<double>() << ", max rel "
                << j["oracle_max_rel_error"].get<double>() << "\n";
    if (j.contains("oracle")) std::cout << "vs interpreter     " << j["oracle"].get<std::string>() << "\n";
    std::cout << "max_abs_error      " << s.max_abs << "  (vs LibTorch)\n"
              << "max_rel_error      " << s.max_rel << (ok ? "  (verified)" : "  (MISMATCH)") << "\n";
  }
  if (!ok) {
    std::cerr << "basin: error: " << op << " does not match its reference: max relative error exceeds "
              << (s.max_rel > torch_tolerance ? torch_tolerance : o.tolerance) << "\n";
    return 3;
  }
  return 0;
}

}  // namespace

ops::OpGraph op_from_args(const std::string& name, const std::string& workload,
                          const std::vector<std::string>& params) {
  if (name.empty() == workload.empty()) throw ParseError("give an operator NAME or --workload W (not both)");
  if (workload.empty()) {
    std::map<std::string, std::string> kv;
    for (const std::string& p : params) {
      auto eq = p.find('=');
      if (eq == std::string::npos || eq == 0) throw ParseError("--param expects K=V, got '" + p + "'");
      kv[p.substr(0, eq)] = p.substr(eq + 1);
    }
    return ops::build_op(name, kv);
  }
  if (!params.empty()) throw ParseError("--param cannot be combined with --workload");
  const ops::Workload& w = ops::find_workload(workload);
  return ops::build_op(w.op, w.params);
}

void add_op_command(CLI::App& app, Runner& run) {
  auto o = std::make_shared<OpOptions>();
  auto* cmd = app.add_subcommand("op", "compile one operator, verify it against LibTorch, measure it");
  cmd->add_option("name", o->name, "operator name (`basin ops` lists them)");
  cmd->add_option("--workload", o->workload, "a named workload instead of NAME and --param (`basin workloads`)");
  cmd->add_option("--param", o->params, "operator parameter K=V (repeatable)")->take_all();
  cmd->add_option("--target", o->target, "llvm (default where built), interpreter, or cuda (NVRTC; runs need a GPU)")
      ->check(CLI::IsMember({"llvm", "interpreter", "cuda"}));
  cmd->add_option("--arch", o->arch, "with --target cuda: compile for this architecture (sm_80, sm_90) without a GPU");
  cmd->add_flag("--compare", o->compare, "also time LibTorch's kernel in the same run (torch_latency_us)");
  cmd->add_option("--oracle", o->oracle, "check against the interpreter: auto (small ops), always, never")
      ->check(CLI::IsMember({"auto", "always", "never"}));
  cmd->add_option("--timing", o->timing, "full (5 rounds of 200 ms) or quick")->check(CLI::IsMember({"full", "quick"}));
  cmd->add_option("--config", o->config, "a configuration file (JSON: sketch, splits, unroll; docs/schedules.md)");
  add_seed_option(cmd, o->seed, "seed of the random inputs");
  cmd->add_option("--tolerance", o->tolerance,
                  "largest accepted max relative error (against LibTorch at least 5e-3 for a TF32 or FP16 program, "
                  "3e-2 for BF16)");
  add_precision_option(cmd, o->precision);
  cmd->add_option("--emit", o->emit,
                  "also print the program: ir (loop IR), c (C source), llvm (optimized LLVM IR), asm (the "
                  "llvm target's machine code) or cuda (CUDA C)")
      ->check(CLI::IsMember({"ir", "c", "llvm", "asm", "cuda"}));
  cmd->add_flag("--json", o->json, "print one JSON object");
  cmd->callback([&run, o] { run = [o] { return run_op(*o); }; });
}

}  // namespace basin::tools
