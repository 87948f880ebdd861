// `basin op`: compile one operator (default schedule), verify it against LibTorch on
// random inputs, and report the error and the time each side took.
#include <iostream>
#include <nlohmann/json.hpp>

#include "codegen/op_check.h"
#include "core/ir/stmt.h"
#include "core/ops/registry.h"
#include "core/ops/workloads.h"
#include "core/util/error.h"
#include "tools/commands.h"

namespace basin::tools {

namespace {

struct OpOptions {
  std::string name;
  std::string workload;
  std::vector<std::string> params;
  std::string emit;
  uint64_t seed = 1;
  double tolerance = 1e-4;
  bool json = false;
};

std::map<std::string, std::string> parse_params(const std::vector<std::string>& kvs) {
  std::map<std::string, std::string> m;
  for (const std::string& kv : kvs) {
    auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0)
      throw ParseError("--param expects K=V, got '" + kv + "'");
    m[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return m;
}

int run_op(const OpOptions& o) {
  if (o.name.empty() == o.workload.empty())
    throw ParseError("give an operator NAME or --workload W (not both)");
  std::string op = o.name;
  std::map<std::string, std::string> params;
  if (!o.workload.empty()) {
    if (!o.params.empty()) throw ParseError("--param cannot be combined with --workload");
    const ops::Workload& w = ops::find_workload(o.workload);
    op = w.op;
    params = w.params;
  } else {
    params = parse_params(o.params);
  }
  ops::OpGraph g = ops::build_op(op, params);
  if (!o.json) std::cerr << "basin: " << op << ": lowering, interpreting and comparing with LibTorch...\n";
  codegen::OpCheck c = codegen::check_against_torch(g, o.seed);
  bool ok = c.max_rel_error <= o.tolerance;
  if (o.emit == "ir") std::cout << to_string(c.func);
  if (o.json) {
    nlohmann::json shapes = nlohmann::json::array();
    for (const auto& t : g.outputs) shapes.push_back(t.shape());
    nlohmann::json j = {{"op", op},
                        {"params", nlohmann::json::object()},
                        {"output_shapes", shapes},
                        {"max_abs_error", c.max_abs_error},
                        {"max_rel_error", c.max_rel_error},
                        {"verified", ok},
                        {"flops", g.flops},
                        {"interpreter_seconds", c.interpret_seconds},
                        {"torch_seconds", c.torch_seconds},
                        {"target", "interpreter"}};
    for (const auto& [k, v] : g.attrs.values()) j["params"][k] = ops::attr_to_string(v);
    if (!o.workload.empty()) j["workload"] = o.workload;
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << "operator        " << op << "\n";
    for (const auto& [k, v] : g.attrs.values()) std::cout << "  " << k << " = " << ops::attr_to_string(v) << "\n";
    std::cout << "max_abs_error   " << c.max_abs_error << "\n"
              << "max_rel_error   " << c.max_rel_error << (ok ? "  (verified)" : "  (MISMATCH)") << "\n"
              << "interpreter     " << c.interpret_seconds * 1e3 << " ms\n"
              << "LibTorch        " << c.torch_seconds * 1e3 << " ms (one cold run, not a latency)\n"
              << "note: compiled kernels and latency_us come with the LLVM backend; this checks the oracle path.\n";
  }
  if (!ok) {
    std::cerr << "basin: error: " << op << " does not match LibTorch: max relative error " << c.max_rel_error
              << " exceeds " << o.tolerance << "\n";
    return 3;
  }
  return 0;
}

}  // namespace

void add_op_command(CLI::App& app, Runner& run) {
  auto o = std::make_shared<OpOptions>();
  auto* cmd = app.add_subcommand("op", "compile one operator, verify it against LibTorch and report the error");
  cmd->add_option("name", o->name, "operator name (`basin ops` lists them)");
  cmd->add_option("--workload", o->workload, "a named workload instead of NAME and --param (`basin workloads`)");
  cmd->add_option("--param", o->params, "operator parameter K=V (repeatable)")->take_all();
  cmd->add_option("--seed", o->seed, "seed of the random inputs");
  cmd->add_option("--tolerance", o->tolerance, "largest accepted max relative error");
  cmd->add_option("--emit", o->emit, "also print the program: ir")->check(CLI::IsMember({"ir"}));
  cmd->add_flag("--json", o->json, "print one JSON object");
  cmd->callback([&run, o] { run = [o] { return run_op(*o); }; });
}

}  // namespace basin::tools
