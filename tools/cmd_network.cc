// Whole networks from the command line: `basin tune MODEL` (the task scheduler over
// the network's tasks, search/network.h), `basin compile MODEL -o OUT` (the best record
// of each task, every untuned task named), `basin run OUT|MODEL` (.npy in and out) and
// `basin compare MODEL` (basin against the LibTorch executor: latency and error).
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <set>
#include <map>
#include <nlohmann/json.hpp>

#include "codegen/llvm_jit.h"
#include "codegen/network.h"
#include "codegen/quantize.h"
#include "codegen/ranged.h"
#include "codegen/torch_executor.h"
#include "codegen/torch_reference.h"
#include "core/graph/fusion.h"
#include "core/graph/model.h"
#include "core/graph/layout.h"
#include "core/graph/passes.h"
#include "core/graph/shape_range.h"
#include "core/ir/npy.h"
#include "core/schedule/sketch.h"
#include "core/util/blas.h"
#include "core/util/error.h"
#include "core/util/hardware.h"
#include "core/util/host.h"
#include "core/util/output_file.h"
#include "core/util/parse.h"
#include "codegen/cpu_runtime.h"
#include "models/calibrate.h"
#include "search/network.h"
#include "search/strategy.h"
#include "tools/commands.h"
#include "tools/ranks.h"

namespace basin::tools {

namespace {

struct NetOptions {
  std::vector<std::string> more_models;  // tune: further models tuned at once
  std::string model, target = "llvm", precision, arch, records, strategy = "gradient", estimator, budget, out;
  std::vector<std::string> inputs, shapes, shape_weights;
  std::vector<std::string> calibrate;  // --precision int8: samples, each .npy files comma-separated
  std::string output;
  int trials = 0, batch = 16, first_batch = 0, repeat = 0, compile_threads = 0;
  uint64_t seed = 1;
  int64_t max_instructions = codegen::kMaxInstructions;
  double timeout = 10, slow_factor = 2;
  bool json = false, quiet = false, no_calibrate = false, no_transfer = false;
  double family_sweep = search::NetworkTuneOptions().family_sweep;
  std::string weights_timing = "auto";
  bool f32_activations = false;  // at bf16: the values between kernels stay float32
};

void log_line(const NetOptions& o, const std::string& line) {
  if (!o.quiet) std::cerr << "basin: " << line << "\n";
}

// --precision int8 quantizes the model first (`basin quantize` with --calibrate); its
// programs are then chosen as at f32 (the quantized graph's products are integer ones).
std::string programs_precision(const NetOptions& o) { return o.precision == "int8" ? "" : o.precision; }

// Whether the convolutions will run on matrix tiles (bfloat16 on a CPU with AMX-BF16):
// the layout plan then keeps them direct (graph::plan_layouts).
bool tiled_convolutions(const NetOptions& o) {
  return o.target == "llvm" && sched::resolve_precision(o.target, programs_precision(o)) == "bf16" &&
         this_host().amx_bf16;
}

// Whether the values between kernels are stored in bfloat16
// (graph::store_activations_bf16): at --precision bf16 on a CPU with bfloat16
// instructions, unless --f32-activations.
bool bf16_activations(const NetOptions& o) {
  return sched::stores_bf16_activations(o.target, programs_precision(o)) && !o.f32_activations;
}

// The passes a network's graph goes through before its partition: graph::optimize, then
// at bf16 the storage of activations. `reference` gets the graph before the storage
// (float32: what the accuracy is measured against).
graph::Graph prepare_graph(const NetOptions& o, const graph::Graph& g, graph::Graph* reference) {
  graph::Graph opt = graph::optimize(g, graph::layout_lanes(o.target), tiled_convolutions(o));
  if (!bf16_activations(o)) {
    if (reference) *reference = opt;
    return opt;
  }
  graph::Graph stored = graph::store_activations_bf16(opt);
  if (tiled_convolutions(o)) stored = graph::store_borders(stored);
  if (reference) *reference = std::move(opt);
  return stored;
}

void check_network_precision(const NetOptions& o, bool quiet) {
  if (o.precision == "int8") {
    if (o.target != "llvm") throw Error("--precision int8 is a CPU precision (--target llvm)");
    if (o.calibrate.empty())
      throw Error(
          "--precision int8 quantizes the model on calibration samples: give --calibrate (a model already "
          "quantized runs in int8 as it is, without --precision)");
    return;
  }
  if (!o.calibrate.empty()) throw Error("--calibrate applies to --precision int8");
  if (o.f32_activations && sched::resolve_precision(o.target, o.precision) != "bf16")
    throw Error("--f32-activations applies to --precision bf16 (the activations are float32 otherwise)");
  check_precision_option(o.target, o.precision, quiet);
}

// The samples of --calibrate: each the .npy files of one sample, comma-separated.
std::vector<std::vector<NDArray>> calibration_samples(const std::vector<std::string>& given) {
  std::vector<std::vector<NDArray>> out;
  for (const std::string& sample : given) {
    std::vector<NDArray> in;
    for (const std::string& f : split_list(sample, ',')) in.push_back(read_npy(f));
    out.push_back(std::move(in));
  }
  return out;
}

struct Loaded {
  graph::Graph graph;
  graph::Graph reference;  // float32 (no bfloat16 storage): the accuracy's reference
  graph::Partition partition;
  std::vector<std::string> files;  // the external-data files the model read: inputs too
  // A model over ranges of shapes (--shape NAME=LO..HI): its buckets (the graphs there
  // masked, before the passes), each bucket's graph after the passes and partition in
  // `buckets`, and the model at any extents (`import`).
  std::optional<graph::RangedModel> ranged;
  std::vector<Loaded> buckets;
  std::function<graph::Graph(const std::map<std::string, int64_t>&)> import;
};

// A value of --shape: an integer.
int64_t shape_integer(const std::string& a, const std::string& x) {
  try {
    size_t used = 0;
    const int64_t v = std::stoll(x, &used);
    if (used != x.size()) throw std::invalid_argument(x);
    return v;
  } catch (const std::exception&) {
    throw Error("--shape '" + a + "': '" + x + "' is not an integer");
  }
}

// --shape NAME=LO..HI: a symbolic dimension's range.
std::vector<graph::DimRange> shape_ranges(const NetOptions& o) {
  std::vector<graph::DimRange> out;
  for (const std::string& a : o.shapes) {
    const size_t eq = a.find('='), dots = a.find("..");
    if (eq == std::string::npos || dots == std::string::npos || dots < eq) continue;
    graph::DimRange d{a.substr(0, eq), shape_integer(a, a.substr(eq + 1, dots - eq - 1)),
                      shape_integer(a, a.substr(dots + 2))};
    if (d.lo < 1 || d.hi < d.lo) throw Error("--shape '" + a + "': a range LO..HI needs 1 <= LO <= HI");
    if (d.hi > (int64_t{1} << 31))
      throw Error("--shape '" + a + "': extent " + std::to_string(d.hi) + " is not in 1 to 2^31");
    out.push_back(d);
  }
  // --shape-weights NAME=V:W,V:W,...: the distribution of a range's values.
  for (const std::string& a : o.shape_weights) {
    const size_t eq = a.find('=');
    const std::string name = eq == std::string::npos ? "" : a.substr(0, eq);
    auto it = std::find_if(out.begin(), out.end(), [&](const graph::DimRange& d) { return d.name == name; });
    if (it == out.end())
      throw Error("--shape-weights '" + a + "': expected NAME=V:W,V:W,... for a dimension given a range with --shape " +
                  "NAME=LO..HI");
    if (!it->value_weights.empty()) throw Error("--shape-weights " + name + " is given twice");
    for (const std::string& vw : split_list(a.substr(eq + 1), ',')) {
      const size_t colon = vw.find(':');
      if (colon == std::string::npos) throw Error("--shape-weights '" + a + "': '" + vw + "' is not VALUE:WEIGHT");
      const int64_t v = shape_integer(a, vw.substr(0, colon));
      double w = 0;
      try {
        size_t used = 0;
        w = std::stod(vw.substr(colon + 1), &used);
        if (used != vw.size() - colon - 1) throw std::invalid_argument(vw);
      } catch (const std::exception&) {
        throw Error("--shape-weights '" + a + "': '" + vw.substr(colon + 1) + "' is not a number");
      }
      if (v < it->lo || v > it->hi || !(w >= 0) || !std::isfinite(w))
        throw Error("--shape-weights '" + a + "': " + vw + ": the value must lie in " + std::to_string(it->lo) + ".." +
                    std::to_string(it->hi) + " and the weight be finite, not negative");
      it->value_weights[v] += w;
    }
  }
  return out;
}

// --shape NAME=D0,D1,... (an input's shape) or NAME=N (a symbolic dimension); ranges
// (NAME=LO..HI) are shape_ranges'.
graph::ImportOptions import_options(const NetOptions& o) {
  graph::ImportOptions io;
  for (const std::string& a : o.shapes) {
    size_t eq = a.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == a.size())
      throw Error("--shape '" + a +
                  "': expected NAME=DIMS (an input's shape, 1,128), NAME=N (a symbolic dimension) or NAME=LO..HI (a "
                  "range of its values)");
    if (a.find("..", eq) != std::string::npos) continue;
    std::vector<int64_t> dims;
    for (const std::string& x : split_list(a.substr(eq + 1), ',')) dims.push_back(shape_integer(a, x));
    if (!io.shapes.emplace(a.substr(0, eq), dims).second) throw Error("--shape " + a.substr(0, eq) + " is given twice");
  }
  return io;
}

Loaded load(const NetOptions& o, const std::string& model) {
  if (model.rfind("zoo:", 0) != 0 && codegen::CompiledNetwork::is_compiled_file(model))
    throw Error("'" + model +
                "' is a compiled basin network: this command takes a model (an ONNX file or zoo:NAME); `basin run` "
                "and `basin profile` take compiled networks");
  Loaded l;
  graph::ImportOptions io = import_options(o);
  io.files_read = &l.files;
  const std::vector<graph::DimRange> ranges = shape_ranges(o);
  if (!ranges.empty()) {
    if (model.rfind("zoo:", 0) == 0)
      throw Error("'" + model + "' is a zoo network: its shapes are fixed (--shape applies to ONNX files)");
    if (o.precision == "int8")
      throw Error("--precision int8 quantizes a model of fixed shapes: give each --shape one value");
    for (const graph::DimRange& d : ranges)
      if (io.shapes.count(d.name)) throw Error("--shape " + d.name + " is given twice");
    l.import = [io, model](const std::map<std::string, int64_t>& at) {
      graph::ImportOptions x = io;
      for (const auto& [d, e] : at) x.shapes[d] = {e};
      return graph::load_model(model, x);
    };
    graph::ConstantPool pool;
    l.ranged = graph::ranged_model(l.import, ranges, pool);
    std::map<std::string, size_t> tasks;
    for (const graph::ShapeBucket& b : l.ranged->buckets) {
      Loaded bl;
      bl.graph = prepare_graph(o, b.graph, &bl.reference);
      pool.share(bl.graph);
      pool.share(bl.reference);
      bl.partition = graph::partition(bl.graph);
      for (const graph::NetworkTask& t : bl.partition.tasks) tasks.emplace(t.key, 0);
      l.buckets.push_back(std::move(bl));
    }
    l.graph = l.buckets.back().graph;
    l.reference = l.buckets.back().reference;
    l.partition = l.buckets.back().partition;
    std::string list;
    for (const graph::ShapeBucket& b : l.ranged->buckets) list += (list.empty() ? "" : " ") + graph::extents_str(b.at);
    log_line(o, model + ": " + std::to_string(l.ranged->buckets.size()) + " shape buckets (" + list + "), " +
                    std::to_string(tasks.size()) + " distinct tasks in all, " +
                    std::to_string(l.graph.weight_bytes() / (1 << 20)) + " MiB of weights" +
                    (l.ranged->masks.empty() ? "" : ", padded positions masked before each softmax"));
    return l;
  }
  if (o.precision == "int8") {
    check_network_precision(o, true);
    if (model.rfind("zoo:", 0) == 0)
      throw Error("--precision int8 quantizes ONNX models; export " + model.substr(4) + " to ONNX first");
    codegen::QuantizeOptions q;
    q.import = io;
    q.import.files_read = nullptr;  // the temporary files it reads are not the command's inputs
    q.calibration = calibration_samples(o.calibrate);
    codegen::QuantizeResult r;
    l.graph = graph::optimize(codegen::quantized_graph(model, q, &r), graph::layout_lanes(o.target));
    l.reference = l.graph;
    log_line(o, model + ": quantized to int8: " + std::to_string(r.products) + " products, " +
                    std::to_string(q.calibration.size()) + " calibration samples (min-max)");
    l.files.push_back(model);
  } else {
    l.graph = prepare_graph(o, graph::load_model(model, io), &l.reference);
  }
  l.partition = graph::partition(l.graph);
  log_line(o, model + ": " + std::to_string(l.graph.nodes().size()) + " nodes, " +
                  std::to_string(l.partition.groups.size()) + " fused groups, " +
                  std::to_string(l.partition.tasks.size()) + " distinct tasks, " +
                  std::to_string(l.graph.weight_bytes() / (1 << 20)) + " MiB of weights");
  return l;
}
Loaded load(const NetOptions& o) { return load(o, o.model); }

// `bucket`: a bucket's extents of the ranged dimensions, for a bucket of a network over
// ranges of shapes (its kernels take their iterations at run time where they can).
codegen::CompiledNetwork compile_one(const NetOptions& o, const Loaded& l, nlohmann::json& untuned,
                                     search::RecordStore* store, const std::vector<int64_t>& bucket = {});

// The programs of a network's tasks; untuned ones named on stderr and in `untuned`. A
// model over ranges of shapes: every bucket compiled, behind one dispatcher.
codegen::CompiledNetwork compile(const NetOptions& o, const Loaded& l, nlohmann::json& untuned) {
  std::unique_ptr<search::RecordStore> store;
  if (!o.records.empty()) store = std::make_unique<search::RecordStore>(o.records, search::RecordStore::ReadOnly::Yes);
  if (!l.ranged) return compile_one(o, l, untuned, store.get());
  std::vector<codegen::CompiledNetwork> buckets;
  std::set<std::string> seen;
  untuned = nlohmann::json::array();
  NetOptions quiet = o;
  quiet.quiet = true;  // one warning for the buckets together, below
  for (size_t i = 0; i < l.buckets.size(); ++i) {
    nlohmann::json u;
    std::vector<int64_t> extents;
    for (const auto& [d, x] : l.ranged->buckets.at(i).at) extents.push_back(x);
    buckets.push_back(compile_one(quiet, l.buckets[i], u, store.get(), extents));
    for (const auto& x : u)
      if (seen.insert(x.get<std::string>()).second) untuned.push_back(x);
  }
  if (!untuned.empty()) {
    std::string names;
    for (const auto& x : untuned) names += "\n  " + x.get<std::string>();
    log_line(o, "warning: " + std::to_string(untuned.size()) + " tasks of the buckets have no tuned program" +
                    (o.records.empty() ? "" : " in " + o.records) +
                    " and use their first sketch's default configuration:" + names);
  }
  codegen::ShapeRanges r{l.ranged->dims, l.ranged->input_axes, l.ranged->output_axes, l.ranged->masks};
  return codegen::CompiledNetwork::ranged(std::move(buckets), r);
}

codegen::CompiledNetwork compile_one(const NetOptions& o, const Loaded& l, nlohmann::json& untuned,
                                     search::RecordStore* store, const std::vector<int64_t>& bucket) {
  std::vector<int> missing;
  std::vector<codegen::ProgramChoice> choices =
      search::choose_programs(l.partition, store, o.target, &missing, programs_precision(o));
  untuned = nlohmann::json::array();
  if (!missing.empty()) {
    std::string names;
    for (int t : missing) {
      untuned.push_back(l.partition.tasks[t].label);
      names += "\n  task " + std::to_string(t) + ": " + l.partition.tasks[t].label + " (x" +
               std::to_string(l.partition.tasks[t].weight) + ")";
    }
    log_line(o, "warning: " + std::to_string(missing.size()) + " of " + std::to_string(l.partition.tasks.size()) +
                    " tasks have no tuned program" + (o.records.empty() ? "" : " in " + o.records) +
                    " and use their first sketch's default configuration:" + names);
  }
  return codegen::CompiledNetwork::compile(l.graph, l.partition, choices, o.target, o.arch, bucket);
}

std::vector<NDArray> read_inputs(const NetOptions& o, const std::vector<codegen::TensorInfo>& infos) {
  if (o.inputs.empty()) return codegen::random_inputs(infos);
  if (o.inputs.size() != infos.size())
    throw Error("the network takes " + std::to_string(infos.size()) + " inputs; give one --input per input, got " +
                std::to_string(o.inputs.size()));
  std::vector<NDArray> in;
  for (size_t i = 0; i < infos.size(); ++i) {
    NDArray a = read_npy(o.inputs[i]);
    // A network over ranges of shapes checks the extents when it runs.
    if ((infos[i].axis_dims.empty() && a.shape() != infos[i].shape) || a.dtype() != infos[i].dtype)
      throw Error("--input " + o.inputs[i] + ": input '" + infos[i].name + "' expects " + infos[i].dtype.str() + " " +
                  shape_str(infos[i].shape) + ", the file holds " + a.dtype().str() + " " + shape_str(a.shape()));
    in.push_back(std::move(a));
  }
  return in;
}

// The compiled network's error against the float32 reference (LibTorch on the graph)
// on `in` (--input's files or random ones), kept in the network.
void check_accuracy(const NetOptions& o, const Loaded& l, codegen::CompiledNetwork& net,
                    const std::vector<NDArray>& in) {
  if (l.ranged) {
    // Every bucket against the model at the extents of its call, padding checked exact.
    net.set_accuracy(codegen::check_ranged(*l.ranged, net, l.import));
    return;
  }
  net.set_accuracy(
      codegen::measure_accuracy(l.reference, net, in, o.inputs.empty() ? "random inputs" : "the given inputs"));
}

nlohmann::json accuracy_json(const codegen::Accuracy& a) {
  nlohmann::json j = {{"measured", a.measured}, {"note", a.note}};
  if (!a.measured) return j;
  j["reference"] = "float32 (LibTorch)";
  j["max_rel_error"] = a.max_rel;
  j["max_abs_error"] = a.max_abs;
  if (a.top1_rows > 0) {
    j["top1_agree"] = a.top1_agree;
    j["top1_rows"] = a.top1_rows;
  }
  return j;
}

std::string accuracy_line(const codegen::Accuracy& a) {
  if (!a.measured) return "accuracy: " + a.note;
  char line[256];
  std::snprintf(line, sizeof line,
                "accuracy against float32 (LibTorch) on %s: max error %.2g relative to the largest output",
                a.note.c_str(), a.max_rel);
  std::string s = line;
  if (a.top1_rows > 0)
    s += ", top-1 agrees on " + std::to_string(a.top1_agree) + " of " + std::to_string(a.top1_rows) + " rows";
  return s;
}

// On a machine the shipped weights were not trained on and that has no calibration
// yet, a time budget of a minute or more first spends a quarter of itself (at most two
// minutes) calibrating the estimator (models/calibrate.h), and says so; the
// calibration is kept for every later run here. Shorter budgets and --trials runs
// leave it to `basin estimator calibrate`.
void calibrate_if_new(const NetOptions& o, double& budget_seconds) {
  if (o.no_calibrate) {
    models::set_use_calibration(false);
    return;
  }
  const std::string spec = o.estimator.empty() ? search::make_strategy(o.strategy)->default_estimator() : o.estimator;
  if (o.target != "llvm" || (spec != "ensemble" && spec != "mlp") || budget_seconds < 60 ||
      !models::calibrated_estimator_path(spec).empty() || models::shipped_weights_know_this_host())
    return;
  models::CalibrateOptions co;
  co.kind = spec;
  co.budget_seconds = std::min(120.0, budget_seconds / 4);
  co.seed = o.seed;
  char line[320];
  std::snprintf(line, sizeof line,
                "the estimator was not trained on this machine (%s): calibrating it for %.0f s of the budget first "
                "(kept for later runs; --no-calibrate skips, basin estimator calibrate does it apart)",
                machine_description("llvm").c_str(), co.budget_seconds);
  log_line(o, line);
  const auto t0 = std::chrono::steady_clock::now();
  models::CalibrateResult r = models::calibrate(co);
  budget_seconds =
      std::max(1.0, budget_seconds - std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  std::snprintf(line, sizeof line, "calibrated on %d programs of %d tasks: %s", r.measured, r.tasks, r.out.c_str());
  log_line(o, line);
}

int run_tune(const NetOptions& o) {
  check_network_precision(o, o.quiet);
  if ((o.trials > 0) == !o.budget.empty()) throw ParseError("give one budget: --trials N or --budget T");
  if (o.batch <= 0 || o.batch > kMaxBatch)
    throw ParseError("--batch must be positive, at most " + std::to_string(kMaxBatch));
  if (o.first_batch < 0 || o.first_batch > kMaxBatch)
    throw ParseError("--first-batch (the first round's batch size) must be 0 (automatic) to " +
                     std::to_string(kMaxBatch));
  const double budget_seconds = o.budget.empty() ? 0 : parse_duration(o.budget);  // before any file is made
  // Under mpirun, the other ranks measure for rank 0 (docs/distributed.md): they never
  // load the model or open the records.
  Ranks ranks = start_ranks(o.quiet);
  if (ranks.worker()) return ranks.serve();
  std::vector<std::string> models = {o.model};
  models.insert(models.end(), o.more_models.begin(), o.more_models.end());
  std::vector<Loaded> nets;
  for (const std::string& m : models) nets.push_back(load(o, m));
  // The networks the scheduler serves: each model, or each bucket of a model over
  // ranges of shapes, weighted by its share of the calls.
  std::vector<Loaded> units;
  std::vector<int64_t> scale;
  std::vector<std::string> unit_names;
  bool any_ranged = false;
  std::set<int64_t> range_extents;  // every bucket extent of a ranged dimension
  for (size_t n = 0; n < nets.size(); ++n) {
    if (nets[n].ranged)
      for (const auto& e : nets[n].ranged->extents) range_extents.insert(e.begin(), e.end());
    if (!nets[n].ranged) {
      unit_names.push_back(models[n]);
      scale.push_back(1);
      continue;
    }
    any_ranged = true;
    for (size_t b = 0; b < nets[n].buckets.size(); ++b) {
      unit_names.push_back(models[n] + " " + graph::extents_str(nets[n].ranged->buckets[b].at));
      scale.push_back(nets[n].ranged->buckets[b].weight);
    }
  }
  for (Loaded& l : nets) {
    if (!l.ranged) {
      units.push_back(std::move(l));
      continue;
    }
    for (Loaded& b : l.buckets) units.push_back(std::move(b));
  }
  nets.clear();
  std::vector<const graph::Partition*> parts;
  for (const Loaded& u : units) parts.push_back(&u.partition);
  const graph::Partition merged = units.size() > 1 ? search::merge_partitions(parts, scale) : graph::Partition();
  const graph::Partition& part = units.size() > 1 ? merged : units[0].partition;
  if (units.size() > 1)
    log_line(o, std::to_string(units.size()) + (any_ranged ? " networks and shape buckets" : " networks") +
                    " tuned at once: " + std::to_string(part.tasks.size()) + " distinct tasks in all" +
                    (any_ranged ? ", each bucket weighted by the values it serves per position" : ""));
  search::RecordStore store(o.records);
  search::NetworkTuneOptions to;
  if (any_ranged && !o.no_transfer) to.estimator_family = search::range_families(part, range_extents);
  to.family_sweep = o.family_sweep;
  if (o.no_transfer) to.kin_seeds = 0;
  using WeightsTiming = search::NetworkTuneOptions::WeightsTiming;
  to.weights_timing = o.weights_timing == "cold"   ? WeightsTiming::Cold
                      : o.weights_timing == "warm" ? WeightsTiming::Warm
                                                   : WeightsTiming::Auto;
  to.task.cluster = ranks.cluster.get();
  to.task.target = o.target;
  to.task.precision = programs_precision(o);
  to.task.batch = o.batch;
  to.task.seed = o.seed;
  to.task.timeout_seconds = o.timeout;
  to.task.compile_threads = o.compile_threads;
  to.task.max_instructions = o.max_instructions;
  to.task.slow_factor = o.slow_factor;
  to.strategy = o.strategy;
  to.estimator = o.estimator;
  to.budget = {o.trials, budget_seconds};
  to.first_batch = o.first_batch;
  calibrate_if_new(o, to.budget.seconds);
  const bool bar = !o.quiet && isatty(STDERR_FILENO);
  to.task.log = tuning_log(o.quiet, bar);
  if (bar) to.progress = draw_progress;
  InterruptStops interrupt;
  to.stop = [&o, bar] {
    if (!InterruptStops::interrupted()) return false;
    if (bar) std::cerr << "\r\033[K";
    log_line(o, "interrupted: the run stops here; the records keep every program measured (the same command resumes)");
    return true;
  };
  search::NetworkTuneResult r = search::tune_network(part, store, to);
  if (bar) std::cerr << "\r\033[K" << std::flush;
  nlohmann::json tasks = nlohmann::json::array();
  int without = 0;
  for (const auto& t : r.tasks) {
    tasks.push_back({{"label", t.label},
                     {"key", t.key},
                     {"weight", t.weight},
                     {"trials", t.trials},
                     {"measured", t.measured},
                     {"errors", t.errors},
                     {"best_latency_us", t.best_us > 0 ? nlohmann::json(t.best_us) : nlohmann::json()},
                     {"rounds", t.rounds},
                     {"retired", t.retired},
                     {"settled", t.settled}});
    without += t.best_us <= 0;
  }
  nlohmann::json curve = nlohmann::json::array();
  for (const auto& p : r.curve) curve.push_back({p.seconds, p.trials, p.estimated_us});
  nlohmann::json j = {
      {"model", o.model},
      {"target", o.target},
      {"precision", o.precision},
      {"strategy", o.strategy},
      {"records", o.records},
      {"trials", r.trials},
      {"resumed", r.resumed},
      {"measured", r.measured},
      {"disturbed", r.disturbed},
      {"disturbed_kept", r.disturbed_kept},
      {"search_seconds", r.seconds},
      {"overhead_fraction", r.overhead_fraction},
      {"measure_seconds", r.measure_seconds},
      {"wait_seconds", r.wait_seconds},
      {"propose_seconds", r.propose_seconds},
      {"update_seconds", r.update_seconds},
      {"setup_seconds", r.setup_seconds},
      {"estimated_latency_us", r.estimated_latency_us > 0 ? nlohmann::json(r.estimated_latency_us) : nlohmann::json()},
      {"tasks", tasks},
      {"tasks_without_program", without},
      {"curve", curve},
      {"kin_seeded", r.kin_seeded},
      {"interrupted", r.stopped}};
  if (units.size() > 1) {
    // Each network's (each bucket's) estimated latency from the tasks' best programs.
    std::map<std::string, double> best;
    for (const auto& t : r.tasks) best[t.key] = t.best_us;
    j["models"] = nlohmann::json::array();
    for (size_t n = 0; n < units.size(); ++n) {
      double us = 0;
      for (const graph::NetworkTask& t : units[n].partition.tasks)
        us = us < 0 || best[t.key] <= 0 ? -1 : us + t.weight * best[t.key];
      j["models"].push_back({{"model", unit_names[n]},
                             {"weight", scale[n]},
                             {"estimated_latency_us", us > 0 ? nlohmann::json(us) : nlohmann::json()}});
    }
  }
  ranks.report(j, r.measured, r.measure_seconds - r.wait_seconds, o.quiet);
  if (o.json) {
    std::cout << j.dump(2) << "\n";
  } else {
    std::printf("%-4s %-48s %6s %7s %12s\n", "task", "subgraph", "weight", "trials", "best (us)");
    for (size_t i = 0; i < r.tasks.size(); ++i) {
      const auto& t = r.tasks[i];
      std::printf("%-4zu %-48s %6d %7d %12s\n", i, t.label.substr(0, 48).c_str(), t.weight, t.trials,
                  t.best_us > 0 ? std::to_string(t.best_us).c_str() : "none");
    }
    std::printf(
        "trials %d (%d resumed, %d of kin queued), %.1f s (compile and measure %.1f s, propose %.1f s, estimator "
        "%.1f s, setup %.1f s; overhead %.1f%%), estimated network latency %s\n",
        r.trials, r.resumed, r.kin_seeded, r.seconds, r.measure_seconds, r.propose_seconds, r.update_seconds, r.setup_seconds,
        100 * r.overhead_fraction,
        r.estimated_latency_us > 0 ? (std::to_string(r.estimated_latency_us) + " us").c_str()
                                   : "n/a (a task has no program)");
    if (any_ranged)
      for (const auto& m : j["models"])
        std::printf("  %-48s estimated %s\n", m["model"].get<std::string>().c_str(),
                    m["estimated_latency_us"].is_null()
                        ? "n/a (a task has no program)"
                        : (std::to_string(m["estimated_latency_us"].get<double>()) + " us").c_str());
  }
  if (r.stopped) return 130;  // as a shell reports an interrupted command
  return without == 0 ? 0 : 4;
}

int run_compile(const NetOptions& o) {
  check_network_precision(o, /*quiet=*/true);
  if (o.out.empty()) throw ParseError("give the output file: -o OUT");
  std::vector<std::string> reads = {o.model, o.records};
  check_output_path(o.out, reads);  // before the work, not after it
  Loaded l = load(o);
  reads.insert(reads.end(), l.files.begin(), l.files.end());
  check_output_path(o.out, reads);  // nor the model's external data
  nlohmann::json untuned;
  codegen::CompiledNetwork net = compile(o, l, untuned);
  // A cuda network compiled for --arch may not run here: not checked.
  if (net.target() == "cuda" && !o.arch.empty()) {
    codegen::Accuracy a;
    a.note = "not measured: compiled for --arch " + o.arch + " without running it";
    net.set_accuracy(a);
  } else {
    check_accuracy(o, l, net, read_inputs(o, net.inputs()));
  }
  net.save(o.out, reads);
  nlohmann::json j = {{"model", o.model},
                      {"output", o.out},
                      {"target", net.target()},
                      {"kernels", net.kernels()},
                      {"launches", net.launches()},
                      {"arena_bytes", net.arena_bytes()},
                      {"tensor_bytes", net.tensor_bytes()},
                      {"weight_bytes", net.weight_bytes()},
                      {"packed_weights", net.packed_weights()},
                      {"bf16_kernels", net.kernels_of_precision("bf16")},
                      {"int8_kernels", net.kernels_of_precision("int8")},
                      {"accuracy", accuracy_json(net.accuracy())},
                      {"untuned_tasks", untuned}};
  if (net.target() == "cuda") j["arch"] = net.cuda_arch();
  if (net.is_ranged()) {
    j["ranges"] = nlohmann::json::array();
    for (const graph::DimRange& d : net.ranges().dims)
      j["ranges"].push_back({{"name", d.name}, {"lo", d.lo}, {"hi", d.hi}});
    j["runtime_extent_launches"] = net.runtime_extent_launches();
    j["buckets"] = nlohmann::json::array();
    for (int b = 0; b < net.buckets(); ++b)
      j["buckets"].push_back({{"extents", net.bucket_extents(b)},
                              {"kernels", net.bucket(b).kernels()},
                              {"launches", net.bucket(b).launches()}});
  }
  if (o.json) {
    std::cout << j.dump(2) << "\n";
  } else {
    if (net.is_ranged()) {
      std::string list;
      for (int b = 0; b < net.buckets(); ++b) list += (b ? " " : "") + graph::extents_str(net.bucket_extents(b));
      std::printf("%d shape buckets: %s; %d of the largest bucket's %d launches run only a call's real positions\n",
                  net.buckets(), list.c_str(), net.runtime_extent_launches(), net.launches());
    }
    std::printf(
        "wrote %s: %d kernels (%d bf16, %d int8), %d launches, arena %.1f MiB (%.1f MiB without reuse), weights %.1f "
        "MiB, %zu untuned tasks\n",
        o.out.c_str(), net.kernels(), net.kernels_of_precision("bf16"), net.kernels_of_precision("int8"),
        net.launches(), net.arena_bytes() / 1048576.0, net.tensor_bytes() / 1048576.0, net.weight_bytes() / 1048576.0,
        untuned.size());
    std::printf("%s\n", accuracy_line(net.accuracy()).c_str());
  }
  return 0;
}

// MODEL as `run` and `profile` take it: a compiled file, loaded (true; compiled_for is
// the CPU it was compiled for, with a note where that is not this one), or a model,
// compiled with the records (false; untuned names its tasks without a record; the
// graph in *loaded where it is given).
bool load_or_compile(const NetOptions& o, codegen::CompiledNetwork& net, nlohmann::json& untuned,
                     std::string& compiled_for, std::optional<Loaded>* loaded = nullptr) {
  if (o.model.rfind("zoo:", 0) == 0 || !codegen::CompiledNetwork::is_compiled_file(o.model)) {
    Loaded l = load(o);
    net = compile(o, l, untuned);
    if (loaded) *loaded = std::move(l);
    return false;
  }
  if (!o.shapes.empty())
    throw Error("--shape applies to models; '" + o.model + "' is a compiled network with fixed shapes");
  net = codegen::CompiledNetwork::load(o.model);
  if (net.target() == "llvm") {
    compiled_for = net.compiled_for_cpu();
    const std::string here = codegen::llvm_cpu_name(codegen::llvm_host_cpu());
    if (compiled_for != here)
      log_line(o, "note: '" + o.model + "' was compiled, and its kernels tuned, for CPU '" + compiled_for +
                      "'; this one is '" + here + "'");
  }
  return true;
}

// `basin profile`: each launch of the compiled network timed alone, in run order, with
// its share, GFLOP/s against the measured peak of the threads it runs on, bytes moved
// and the tuning behind it; then the time outside the kernels.
// `basin quantize MODEL --calibrate A.npy[,B.npy ...] ... -o OUT.onnx`: the QDQ model.
struct QuantizeCmd {
  std::string model, out, method = "minmax";
  std::vector<std::string> calibrate, shapes;
  double percentile = 99.99;
  bool quiet = false;
};

int run_quantize(const QuantizeCmd& q) {
  NetOptions shapes_only;
  shapes_only.shapes = q.shapes;
  codegen::QuantizeOptions o;
  o.import = import_options(shapes_only);
  o.method = q.method;
  o.percentile = q.percentile;
  o.calibration = calibration_samples(q.calibrate);
  const codegen::QuantizeResult r = codegen::quantize_model(q.model, q.out, o);
  if (!q.quiet) {
    std::fprintf(stderr,
                 "basin: %s: %d products quantized (int8 weights per output channel, uint8 inputs), %zu "
                 "inputs calibrated by %s over %zu samples\n",
                 q.model.c_str(), r.products, r.activations.size(), q.method.c_str(), q.calibrate.size());
    for (size_t i = 0; i < r.activations.size(); ++i)
      std::fprintf(stderr, "  %-48s [%g, %g]\n", r.activations[i].c_str(), static_cast<double>(r.ranges[i].first),
                   static_cast<double>(r.ranges[i].second));
  }
  std::printf("%s\n", q.out.c_str());
  return 0;
}

int run_profile(const NetOptions& o) {
  nlohmann::json untuned = nlohmann::json::array();
  codegen::CompiledNetwork net;
  std::unique_ptr<search::RecordStore> store;
  if (!o.records.empty()) store = std::make_unique<search::RecordStore>(o.records, search::RecordStore::ReadOnly::Yes);
  std::string compiled_for;
  const bool from_model = !load_or_compile(o, net, untuned, compiled_for);
  if (o.repeat < 0) throw Error("--repeat must be 1 or more");
  std::vector<NDArray> in = read_inputs(o, net.inputs());
  codegen::NetworkProfile p = net.profile(in, o.repeat > 0 ? o.repeat : 20);
  const int threads = codegen::runtime_threads();
  // The host's measured peak on its threads (measured once per machine), for the threads the kernels ran on.
  const Hardware& hw = this_hardware();
  const double peak = hw.peak_gflops * threads / std::max(1, hw.cores);
  std::set<std::string> untuned_labels;
  for (const auto& u : untuned) untuned_labels.insert(u.get<std::string>());
  nlohmann::json launches = nlohmann::json::array();
  std::map<std::string, int64_t> trials_of;
  // With the records, each launch's task's best record among the sketches of its
  // kernel's precision (as choose_programs picks the program a network compiled from
  // these records runs): its latency timed alone, beside its time in the network.
  std::map<std::pair<std::string, std::string>, double> record_of;  // (task, precision) -> us, 0: none
  auto record_us = [&](const codegen::KernelProfile& k) {
    auto [it, fresh] = record_of.emplace(std::make_pair(k.task_key, k.precision), 0.0);
    if (!fresh || !store) return it->second;
    try {
      std::set<std::string> names;
      for (const sched::Sketch& s : sched::sketches_for(sched::task_from_key(k.task_key), net.target(),
                                                        k.precision == "int8" ? "" : k.precision))
        names.insert(s.name);
      if (std::optional<search::Record> r = store->best(k.task_key, net.target(), &names)) it->second = r->latency_us();
    } catch (const Error&) {
      // A task whose key this basin no longer builds: no record to set beside it.
    }
    return it->second;
  };
  double in_network_us = 0, alone_us = 0;  // the launches with a record, in the network and in their records
  // The launches' floating-point work and whether all of it is float32 (the measured
  // peak is that of float32 FMAs: bfloat16 and integer products go faster).
  double flops = 0;
  bool all_f32 = !p.launches.empty();
  for (const codegen::KernelProfile& k : p.launches) {
    flops += k.flops;
    all_f32 = all_f32 && k.precision == "f32";
    nlohmann::json e = {{"task", k.label},
                        {"task_key", k.task_key},
                        {"us", k.us},
                        {"share", p.run_us > 0 ? k.us / p.run_us : 0.0},
                        {"gflops", k.us > 0 ? k.flops / k.us / 1e3 : 0.0},
                        {"bytes", k.bytes},
                        {"kernel", k.kernel},
                        {"precision", k.precision}};
    e["peak_share"] = peak > 0 ? e["gflops"].get<double>() / peak : 0.0;
    if (store) {
      auto it = trials_of.find(k.task_key);
      if (it == trials_of.end())
        it = trials_of.emplace(k.task_key, static_cast<int64_t>(store->task_records(k.task_key, net.target()).size()))
                 .first;
      e["trials"] = it->second;
      e["tuned"] = it->second > 0;
      const double rec = record_us(k);
      e["record_us"] = rec;
      if (rec > 0) {
        in_network_us += k.us;
        alone_us += rec;
      }
    } else if (from_model) {
      e["tuned"] = !untuned_labels.count(k.label);
    } else {
      e["tuned"] = nullptr;  // a compiled file without its records: unknown
    }
    launches.push_back(e);
  }
  const double outside = std::max(0.0, p.run_us - p.kernels_us);
  nlohmann::json j = {{"model", o.model},     {"threads", threads},         {"peak_gflops", peak},
                      {"run_us", p.run_us},   {"kernels_us", p.kernels_us}, {"outside_us", outside},
                      {"launches", launches}, {"kernels", net.kernels()},   {"untuned_tasks", untuned}};
  if (store) {
    j["recorded_in_network_us"] = in_network_us;
    j["recorded_alone_us"] = alone_us;
  }
  // A float32 network's work at the peak: no run of it on these threads is faster.
  const double peak_bound_us = all_f32 && peak > 0 ? flops / peak / 1e3 : 0;
  j["gflop"] = flops / 1e9;
  if (peak_bound_us > 0) j["peak_bound_us"] = peak_bound_us;
  if (o.json) {
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  std::printf("%s: %zu launches of %d kernels, %d threads, peak %.0f GFLOP/s (measured)\n", o.model.c_str(),
              p.launches.size(), net.kernels(), threads, peak);
  std::printf("%4s %10s %6s %8s %6s %10s %6s %7s %9s %5s  %s\n", "#", "us", "share", "GFLOP/s", "peak", "KiB", "tuned",
              "trials", "record", "prec", "task");
  for (size_t i = 0; i < launches.size(); ++i) {
    const auto& e = launches[i];
    std::string tuned = e["tuned"].is_null() ? "-" : (e["tuned"].get<bool>() ? "yes" : "no");
    std::string trials = e.contains("trials") ? std::to_string(e["trials"].get<int64_t>()) : "-";
    char record[32] = "-";
    if (e.contains("record_us") && e["record_us"].get<double>() > 0)
      std::snprintf(record, sizeof record, "%.1f", e["record_us"].get<double>());
    std::printf("%4zu %10.1f %5.1f%% %8.1f %5.1f%% %10.1f %6s %7s %9s %5s  %s\n", i, e["us"].get<double>(),
                100 * e["share"].get<double>(), e["gflops"].get<double>(), 100 * e["peak_share"].get<double>(),
                e["bytes"].get<int64_t>() / 1024.0, tuned.c_str(), trials.c_str(), record,
                e["precision"].get<std::string>().c_str(), e["task"].get<std::string>().c_str());
  }
  std::printf("kernels %.1f us, outside kernels %.1f us (%.1f%%), whole run %.1f us\n", p.kernels_us, outside,
              p.run_us > 0 ? 100 * outside / p.run_us : 0.0, p.run_us);
  if (alone_us > 0)
    std::printf("launches with a record: %.1f us in the network, %.1f us timed alone in their records (%.2fx)\n",
                in_network_us, alone_us, in_network_us / alone_us);
  if (peak_bound_us > 0 && p.run_us > 0)
    std::printf("%.3f GFLOP at the peak: %.1f us, the whole run at %.0f%% of the peak\n", flops / 1e9, peak_bound_us,
                100 * peak_bound_us / p.run_us);
  return 0;
}

int run_run(const NetOptions& o) {
  std::vector<std::string> reads = {o.model, o.records};
  reads.insert(reads.end(), o.inputs.begin(), o.inputs.end());
  if (!o.output.empty()) check_output_path(o.output, reads);
  nlohmann::json untuned = nlohmann::json::array();
  codegen::CompiledNetwork net;
  std::string compiled_for;     // a compiled file's CPU (llvm target)
  std::optional<Loaded> model;  // a model compiled here: its accuracy checked on the inputs
  load_or_compile(o, net, untuned, compiled_for, &model);
  if (model && !o.output.empty()) {
    reads.insert(reads.end(), model->files.begin(), model->files.end());
    check_output_path(o.output, reads);  // nor the model's external data
  }
  std::vector<NDArray> in = read_inputs(o, net.inputs());
  if (model) check_accuracy(o, *model, net, in);
  std::vector<NDArray> out = net.run(in);
  nlohmann::json outs = nlohmann::json::array();
  for (size_t i = 0; i < out.size(); ++i) {
    nlohmann::json e = {{"name", net.outputs()[i].name}, {"shape", out[i].shape()}, {"dtype", out[i].dtype().str()}};
    if (!o.output.empty()) {
      std::string file = o.output;
      if (i > 0) {
        size_t dot = file.rfind(".npy");
        file = (dot == std::string::npos ? file : file.substr(0, dot)) + "." + std::to_string(i) + ".npy";
      }
      write_npy(file, out[i], reads);
      e["file"] = file;
    }
    outs.push_back(e);
  }
  nlohmann::json j = {
      {"model", o.model}, {"outputs", outs}, {"accuracy", accuracy_json(net.accuracy())}, {"untuned_tasks", untuned}};
  if (!compiled_for.empty()) j["compiled_for_cpu"] = compiled_for;
  if (o.repeat > 0) {
    codegen::TimingOptions t = codegen::TimingOptions::with(1, o.repeat, 0.0);
    codegen::Timing tm = net.time(in, t);
    j["latency_us"] = tm.min_us;
    j["median_latency_us"] = tm.median_us;
  }
  if (o.json) {
    std::cout << j.dump(2) << "\n";
  } else {
    for (const auto& e : outs)
      std::printf("output %s %s %s%s\n", e["name"].get<std::string>().c_str(), e["dtype"].get<std::string>().c_str(),
                  shape_str(e["shape"].get<std::vector<int64_t>>()).c_str(),
                  e.contains("file") ? (" -> " + e["file"].get<std::string>()).c_str() : "");
    std::printf("%s%s\n", accuracy_line(net.accuracy()).c_str(),
                compiled_for.empty() || !net.accuracy().measured ? "" : " (when it was compiled)");
    if (j.contains("latency_us"))
      std::printf("latency %.1f us (min of %d runs)\n", j["latency_us"].get<double>(), o.repeat);
  }
  return 0;
}

int run_compare(const NetOptions& o) {
  if (o.target != "llvm")
    throw Error(
        "compare times LibTorch on this CPU, for the llvm target; on a GPU compare with PyTorch there (docs/gpu.md)");
  if (!shape_ranges(o).empty())
    throw Error(
        "compare runs one shape: give each --shape one value (a range's network is checked against the model "
        "at every bucket when it is compiled)");
  Loaded l = load(o);
  nlohmann::json untuned;
  codegen::CompiledNetwork net = compile(o, l, untuned);
  std::vector<NDArray> in = codegen::random_inputs(net.inputs());
  const int threads = codegen::match_torch_threads();
  codegen::TorchExecutor torch(l.reference);
  std::vector<NDArray> got = net.run(in), ref = torch.run(in);
  ErrorStats err;
  for (size_t i = 0; i < got.size(); ++i) {
    ErrorStats e = compare_arrays(got[i], ref[i]);
    err.max_abs = std::max(err.max_abs, e.max_abs);
    err.max_rel = std::max(err.max_rel, e.max_rel);
  }
  // Each side timed three times, in turn, with the full protocol; the fastest of each.
  // A burst of load from elsewhere on a shared machine then hits one round of one side,
  // not the whole measurement of one side.
  codegen::TimingOptions t = codegen::TimingOptions::full();
  double basin_us = 1e300, torch_us = 1e300;
  for (int round = 0; round < 3; ++round) {
    basin_us = std::min(basin_us, net.time(in, t).min_us);
    torch_us = std::min(torch_us, torch.time(in, t).min_us);
  }
  nlohmann::json j = {{"model", o.model},
                      {"target", o.target},
                      {"latency_us", basin_us},
                      {"torch_latency_us", torch_us},
                      {"speedup_vs_torch", torch_us / basin_us},
                      {"max_abs_error", err.max_abs},
                      {"max_rel_error", err.max_rel},
                      {"torch_threads", threads},
                      {"torch_blas_core", blas_core()},
                      {"tasks", l.partition.tasks.size()},
                      {"launches", net.launches()},
                      {"untuned_tasks", untuned}};
  if (o.json) {
    std::cout << j.dump(2) << "\n";
  } else {
    std::printf(
        "basin     %10.1f us\nLibTorch  %10.1f us   (speedup %.2fx)\nmax error %.3g absolute, %.3g relative to the "
        "largest output\n",
        basin_us, torch_us, torch_us / basin_us, err.max_abs, err.max_rel);
  }
  return 0;
}

CLI::App* network_cmd(CLI::App& app, const std::string& name, const std::string& help, std::shared_ptr<NetOptions> o) {
  auto* cmd = app.add_subcommand(name, help);
  cmd->add_option(
         "model", o->model,
         "zoo:NAME (resnet18, resnet50, mobilenet_v2, bert_base, transformer_layer, vit_b16, dcgan, llama_layer, "
         "r3d_18) or an .onnx file")
      ->required();
  cmd->add_option("--target", o->target, "llvm (the CPU, default) or cuda (GPU 0)")
      ->check(CLI::IsMember({"llvm", "cuda"}));
  add_precision_option(cmd, o->precision);
  cmd->add_flag("--f32-activations", o->f32_activations,
                "with --precision bf16: keep the values between kernels float32 (default: bfloat16 where the CPU "
                "has bfloat16 instructions, half the bytes; tune and compile alike, the tasks differ)");
  cmd->add_option("--calibrate", o->calibrate,
                  "with --precision int8 (ONNX models): one calibration sample, an .npy file per model input, "
                  "comma-separated (repeat for more samples); the model is quantized as `basin quantize` does");
  cmd->add_flag("--json", o->json, "print one JSON object");
  cmd->add_flag("--quiet", o->quiet, "nothing on stderr but errors");
  cmd->add_option(
      "--shape", o->shapes,
      "NAME=D0,D1,... fixes input NAME's shape; NAME=N a symbolic dimension's value (ONNX models; repeatable)");
  return cmd;
}

}  // namespace

void add_network_commands(CLI::App& app, Runner& run) {
  {
    auto q = std::make_shared<QuantizeCmd>();
    auto* cmd = app.add_subcommand(
        "quantize",
        "quantize an ONNX model to int8 (QDQ): per-channel int8 weights, uint8 inputs calibrated on samples");
    cmd->add_option("model", q->model, "the float32 .onnx model")->required();
    cmd->add_option("--calibrate", q->calibrate,
                    "one calibration sample: an .npy file per model input, comma-separated, in input order (repeat "
                    "for more samples)")
        ->required();
    cmd->add_option("-o,--output", q->out, "the quantized model to write (.onnx)")->required();
    cmd->add_option("--method", q->method,
                    "minmax (default: every sample's extremes, as onnxruntime's quantize_static) or percentile")
        ->check(CLI::IsMember({"minmax", "percentile"}));
    cmd->add_option("--percentile", q->percentile, "with --method percentile: the upper percentile (default 99.99)");
    cmd->add_option("--shape", q->shapes,
                    "NAME=D0,D1,... fixes input NAME's shape; NAME=N a symbolic dimension's value");
    cmd->add_flag("--quiet", q->quiet, "nothing on stderr but errors");
    cmd->callback([&run, q] { run = [q] { return run_quantize(*q); }; });
  }
  {
    auto o = std::make_shared<NetOptions>();
    auto* cmd =
        network_cmd(app, "tune", "tune every task of a network, the budget spread by the task scheduler; resumable", o);
    cmd->add_option("more", o->more_models,
                    "further models, tuned at once with the first: one task scheduler over all their tasks, the "
                    "budget where their summed latency gains most");
    cmd->add_option("--trials", o->trials, "stop when the network's tasks have N measured programs in all");
    cmd->add_option("--budget", o->budget, "stop after this wall time (90s, 10m, 1h)");
    cmd->add_option("--records", o->records, "the records file (SQLite; created if missing)")->required();
    cmd->add_option(
           "--strategy", o->strategy,
           "gradient (default), annealing, evolutionary or random, with options as NAME:KEY=VALUE (`basin strategies`)")
        ->check([](const std::string& spec) { return check_strategy_spec(spec); });
    cmd->add_option("--estimator", o->estimator,
                    "mlp, gbt, ensemble, roofline, gpu_roofline or a file (default: the strategy's)");
    cmd->add_option("--batch", o->batch, "programs per round (default 16)");
    cmd->add_option("--first-batch", o->first_batch,
                    "programs of each task's first round, the estimator's best guesses (default 0: 256 shared "
                    "by the tasks, 4 to --batch each)");
    add_seed_option(cmd, o->seed, "seed of the search");
    add_timeout_option(cmd, o->timeout);
    add_compile_options(cmd, o->compile_threads, o->max_instructions);
    add_slow_factor_option(cmd, o->slow_factor);
    cmd->add_flag("--no-calibrate", o->no_calibrate,
                  "use the shipped estimator as it is: no calibration for this machine is made or used");
    cmd->add_option("--shape-weights", o->shape_weights,
                    "with --shape NAME=LO..HI: NAME=V:W,V:W,... the distribution of the calls' values that tuning "
                    "weighs the buckets by (values not listed weigh 0; default uniform)");
    cmd->add_flag("--no-transfer", o->no_transfer,
                  "each task tunes alone (by default each round of a task starts with the best programs of the "
                  "two nearest tasks of its operator chain at other extents, fitted to its own; with a range of "
                  "shapes, one chain's tasks at the buckets' extents also share one estimator, and in the last "
                  "tenth of the budget each measures the best programs of up to three others)");
    cmd->add_option("--family-sweep", o->family_sweep,
                    "with a range of shapes: the share of the budget left when each bucket's task measures the best "
                    "programs of up to three other buckets' (0: no sweep)")
        ->check(CLI::Range(0.0, 0.5));
    cmd->add_option("--weights-timing", o->weights_timing,
                    "cold: time every program with its weights evicted from the caches, as a network whose weights "
                    "outgrow the caches reads them; warm: cached; auto (default): cold when the weights exceed half "
                    "the last-level cache")
        ->check(CLI::IsMember({"auto", "cold", "warm"}));
    cmd->callback([&run, o] { run = [o] { return run_tune(*o); }; });
  }
  {
    auto o = std::make_shared<NetOptions>();
    auto* cmd = network_cmd(app, "compile", "compile a network with the best record of each task into one file", o);
    cmd->add_option("--records", o->records, "the records file (untuned tasks are named and use a default program)");
    cmd->add_option("-o,--output", o->out, "the compiled network file")->required();
    cmd->add_option("--arch", o->arch,
                    "with --target cuda: compile for this architecture (sm_80, sm_90) without a GPU");
    cmd->add_option("--input", o->inputs,
                    "an .npy file per network input, in order: the inputs of the accuracy check against float32 "
                    "(default: random)");
    cmd->callback([&run, o] { run = [o] { return run_compile(*o); }; });
  }
  {
    auto o = std::make_shared<NetOptions>();
    auto* cmd = network_cmd(app, "run", "run a compiled network file (or compile MODEL first) on .npy inputs", o);
    cmd->add_option("--records", o->records, "when MODEL is a model: the records to compile it with");
    cmd->add_option("--input", o->inputs, "an .npy file per network input, in order (default: random)");
    cmd->add_option("--output", o->output, "write the output to this .npy file (further outputs: NAME.1.npy ...)")
        ->check(
            [](const std::string& v) { return v.empty() ? std::string("the output path is empty") : std::string(); });
    cmd->add_option("--repeat", o->repeat, "also time N runs and report the fastest");
    cmd->callback([&run, o] { run = [o] { return run_run(*o); }; });
  }
  {
    auto o = std::make_shared<NetOptions>();
    auto* cmd = network_cmd(app, "profile", "time each kernel launch of a network alone: where its time goes", o);
    cmd->add_option("--records", o->records, "the records to compile with, and to count the trials behind each task");
    cmd->add_option("--input", o->inputs, "an .npy file per network input, in order (default: random)");
    cmd->add_option("--repeat", o->repeat, "rounds; each launch's fastest is reported (default 20)");
    cmd->callback([&run, o] { run = [o] { return run_profile(*o); }; });
  }
  {
    auto o = std::make_shared<NetOptions>();
    auto* cmd = network_cmd(app, "compare", "run a network with basin and with LibTorch: latencies and max error", o);
    cmd->add_option("--records", o->records, "the records to compile with (default: untuned programs)");
    cmd->callback([&run, o] { run = [o] { return run_compare(*o); }; });
  }
}

}  // namespace basin::tools
