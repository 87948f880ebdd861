// The C++ API (api/include/basin/basin.h) over the internal libraries: each public type holds the
// internal object it stands for.
#include "basin/basin.h"

#include <cstring>
#include <functional>
#include <optional>
#include <set>

#include "api/estimator.h"
#include "codegen/network.h"
#include "codegen/ranged.h"
#include "core/graph/shape_range.h"
#include "core/graph/fusion.h"
#include "core/graph/model.h"
#include "core/graph/layout.h"
#include "core/graph/passes.h"
#include "core/ir/ndarray.h"
#include "core/ops/registry.h"
#include "core/ops/workloads.h"
#include "core/schedule/sketch.h"
#include "core/util/error.h"
#include "core/util/host.h"
#include "relax/features.h"
#include "search/network.h"
#include "search/strategy.h"
#include "search/tuner.h"

namespace basin {

struct Tensor::Impl {
  NDArray a;
};

namespace {

Tensor wrap(NDArray a) {
  auto impl = std::make_shared<Tensor::Impl>();
  impl->a = std::move(a);
  return Tensor(std::move(impl));
}

TensorSpec spec(const codegen::TensorInfo& t) {
  return {t.name, t.dtype.str(), t.shape, t.index_bound, t.divisor, t.axis_dims};
}

std::vector<TensorSpec> specs(const std::vector<codegen::TensorInfo>& ts) {
  std::vector<TensorSpec> out;
  for (const auto& t : ts) out.push_back(spec(t));
  return out;
}

// A user's shape, named as the API's (NDArray's own error names the shape alone).
void check_shape(const std::vector<int64_t>& shape, const std::string& what) {
  for (int64_t e : shape)
    if (e < 0) throw Error(what + ": invalid shape " + shape_str(shape));
}

// The tensors' arrays, sharing their data.
std::vector<NDArray> arrays(const std::vector<Tensor>& ts) {
  std::vector<NDArray> out;
  for (const Tensor& t : ts) out.push_back(t.impl().a);
  return out;
}

}  // namespace

Tensor::Tensor() : Tensor(std::make_shared<Impl>()) {}
Tensor::Tensor(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tensor::Tensor(const std::string& dtype, const std::vector<int64_t>& shape) {
  check_shape(shape, "basin::Tensor");
  *this = wrap(NDArray(DType::parse(dtype), shape));
}
Tensor Tensor::random(const TensorSpec& s, double lo, double hi, uint64_t seed) {
  check_shape(s.shape, "basin::Tensor::random");
  const DType t = DType::parse(s.dtype);
  if (s.index_bound > 0) return wrap(NDArray::random(t, s.shape, 0, static_cast<double>(s.index_bound), seed));
  if (s.divisor) return wrap(NDArray::random(t, s.shape, std::max(lo, 1.0), std::max(hi, 2.0), seed));
  return wrap(NDArray::random(t, s.shape, lo, hi, seed));
}
Tensor Tensor::borrow(const std::string& dtype, const std::vector<int64_t>& shape, void* data,
                      std::shared_ptr<void> owner) {
  check_shape(shape, "basin::Tensor::borrow");
  NDArray a = NDArray::borrow(DType::parse(dtype), shape, data, std::move(owner));
  return wrap(std::move(a));
}
Tensor Tensor::from_floats(const std::vector<float>& values, const std::vector<int64_t>& shape) {
  check_shape(shape, "basin::Tensor::from_floats");
  NDArray a(DType::f32(), shape);
  if (static_cast<size_t>(a.numel()) != values.size())
    throw Error("basin::Tensor::from_floats: " + std::to_string(values.size()) + " values for shape " +
                shape_str(shape));
  if (!values.empty()) std::memcpy(a.data(), values.data(), values.size() * sizeof(float));
  return wrap(std::move(a));
}
std::string Tensor::dtype() const { return impl_->a.dtype().str(); }
const std::vector<int64_t>& Tensor::shape() const { return impl_->a.shape(); }
int64_t Tensor::size() const { return impl_->a.numel(); }
size_t Tensor::bytes() const { return impl_->a.nbytes(); }
void* Tensor::data() { return impl_->a.data(); }
const void* Tensor::data() const { return impl_->a.data(); }
double Tensor::at(int64_t i) const {
  if (i < 0 || i >= size())
    throw Error("basin::Tensor::at(" + std::to_string(i) + "): out of range for " + std::to_string(size()) +
                " elements");
  return impl_->a.get(i);
}
Tensor Tensor::clone() const { return wrap(impl_->a.clone()); }

struct Model::Impl {
  std::string name;
  // The optimized graph with every value NCHW (the GPU's), and with the layout plan of
  // this CPU's vectors (the CPU's); each with its tasks.
  struct Planned {
    graph::Graph graph;
    graph::Partition partition;
  };
  // At bf16 on a CPU with AVX512-BF16 (`bf16`): the layout plan for its sketches (direct
  // convolutions where AMX tiles run them) and the activations stored in bfloat16
  // (graph::store_activations_bf16), as the command line plans it; `reference` is the
  // graph before the storage, the float32 one the accuracy is measured against.
  Planned nchw, cpu, bf16;
  graph::Graph bf16_reference;
  const Planned& for_target(const std::string& target, const std::string& precision = "") const {
    return sched::stores_bf16_activations(target, precision) ? bf16 : target == "llvm" ? cpu : nchw;
  }
  // A model over ranges of shapes: its buckets (core/graph/shape_range.h), each planned
  // as above, and the model at any extents (for the padding check).
  std::optional<graph::RangedModel> ranged;
  std::vector<Planned> nchw_buckets, cpu_buckets, bf16_buckets;
  std::function<graph::Graph(const std::map<std::string, int64_t>&)> import;
  const std::vector<Planned>& buckets_for(const std::string& target, const std::string& precision = "") const {
    return sched::stores_bf16_activations(target, precision) ? bf16_buckets
           : target == "llvm"                                ? cpu_buckets
                                                             : nchw_buckets;
  }
  // The buckets' tasks as one partition, each bucket's weighted by the values it serves.
  graph::Partition merged(const std::string& target, const std::string& precision = "") const {
    std::vector<const graph::Partition*> parts;
    std::vector<int64_t> scale;
    for (size_t b = 0; b < ranged->buckets.size(); ++b) {
      parts.push_back(&buckets_for(target, precision)[b].partition);
      scale.push_back(ranged->buckets[b].weight);
    }
    return search::merge_partitions(parts, scale);
  }
  // The bf16 plan of an optimized graph (the other plans' `nchw`); *reference its graph
  // before the storage. Empty where this CPU has no AVX512-BF16.
  static Planned plan_bf16(const graph::Graph& nchw, int64_t lanes, graph::Graph* reference) {
    Planned p;
    if (!this_host().bf16_dot) return p;
    *reference = graph::plan_layouts(nchw, lanes, this_host().amx_bf16);
    p.graph = graph::store_activations_bf16(*reference);
    if (this_host().amx_bf16) p.graph = graph::store_borders(p.graph);
    p.partition = graph::partition(p.graph);
    return p;
  }
};

Model Model::load(const std::string& model, const LoadOptions& options) {
  graph::ImportOptions io;
  io.shapes = options.shapes;
  Model m;
  m.impl_ = std::make_shared<Impl>();
  const int64_t lanes = graph::layout_lanes("llvm");
  if (!options.ranges.empty()) {
    std::vector<graph::DimRange> dims;
    for (const auto& [name, r] : options.ranges) {
      if (r.first < 1 || r.second < r.first)
        throw Error("basin::LoadOptions::ranges['" + name + "']: a range {lo, hi} needs 1 <= lo <= hi");
      if (io.shapes.count(name)) throw Error("basin::LoadOptions: '" + name + "' has both a shape and a range");
      dims.push_back({name, r.first, r.second});
    }
    if (model.rfind("zoo:", 0) == 0)
      throw Error("'" + model + "' is a zoo network: its shapes are fixed (ranges apply to ONNX files)");
    m.impl_->import = [io, model](const std::map<std::string, int64_t>& at) {
      graph::ImportOptions x = io;
      for (const auto& [d, e] : at) x.shapes[d] = {e};
      return graph::load_model(model, x);
    };
    graph::ConstantPool pool;
    m.impl_->ranged = graph::ranged_model(m.impl_->import, dims, pool);
    for (const graph::ShapeBucket& b : m.impl_->ranged->buckets) {
      Impl::Planned n, c;
      n.graph = graph::optimize(b.graph);
      pool.share(n.graph);
      n.partition = graph::partition(n.graph);
      c.graph = graph::plan_layouts(n.graph, lanes);
      pool.share(c.graph);
      c.partition = lanes > 0 ? graph::partition(c.graph) : n.partition;
      graph::Graph reference;
      Impl::Planned h = Impl::plan_bf16(n.graph, lanes, &reference);
      pool.share(h.graph);
      m.impl_->nchw_buckets.push_back(std::move(n));
      m.impl_->cpu_buckets.push_back(std::move(c));
      m.impl_->bf16_buckets.push_back(std::move(h));
    }
    m.impl_->nchw = m.impl_->nchw_buckets.back();
    m.impl_->cpu = m.impl_->cpu_buckets.back();
    m.impl_->bf16 = m.impl_->bf16_buckets.back();
    m.impl_->name = m.impl_->nchw.graph.name;
    return m;
  }
  m.impl_->nchw.graph = graph::optimize(graph::load_model(model, io));
  m.impl_->nchw.partition = graph::partition(m.impl_->nchw.graph);
  m.impl_->cpu.graph = graph::plan_layouts(m.impl_->nchw.graph, lanes);
  m.impl_->cpu.partition = lanes > 0 ? graph::partition(m.impl_->cpu.graph) : m.impl_->nchw.partition;
  m.impl_->bf16 = Impl::plan_bf16(m.impl_->nchw.graph, lanes, &m.impl_->bf16_reference);
  m.impl_->name = m.impl_->nchw.graph.name;
  return m;
}
const std::string& Model::name() const { return impl_->name; }
int Model::tasks() const {
  return static_cast<int>((impl_->ranged ? impl_->merged("llvm") : impl_->cpu.partition).tasks.size());
}
std::vector<TensorSpec> Model::inputs() const {
  std::vector<TensorSpec> out;
  const graph::Graph& g = impl_->nchw.graph;
  for (int v : g.inputs()) {
    const auto& t = g.value(v);
    out.push_back({t.name, t.dtype.str(), t.shape, codegen::input_index_bound(g, v), codegen::input_is_divisor(g, v)});
    if (impl_->ranged) {
      if (out.size() > impl_->ranged->input_axes.size()) {  // the buckets' padding masks: the dispatcher's
        out.pop_back();
        break;
      }
      out.back().dims = impl_->ranged->input_axes[out.size() - 1];
    }
  }
  return out;
}

TuningSession::TuningSession(const Model& model, TuneOptions options) : model_(model), options_(std::move(options)) {}

namespace {

void check_tune_options(const TuneOptions& o) {
  if (o.records.empty()) throw Error("basin::TuneOptions::records: a records file is required");
  if (o.trials < 0) throw Error("basin::TuneOptions::trials must not be negative");
  if (o.trials == 0 && !(o.budget_seconds > 0 && o.budget_seconds < 1e7))
    throw Error("basin::TuneOptions::budget_seconds must be positive (or give trials)");
  if (o.batch <= 0 || o.batch > 4096) throw Error("basin::TuneOptions::batch must be 1 to 4096");
  if (o.first_batch < 0 || o.first_batch > 4096)
    throw Error("basin::TuneOptions::first_batch must be 0 (automatic) to 4096");
  if (o.target != "llvm" && o.target != "cuda")
    throw Error("basin::TuneOptions::target: unknown target '" + o.target + "' (llvm or cuda)");
}

// The tuners' progress callback (trials, trial budget, seconds, latency) as
// TuneOptions::on_progress; none without one.
std::function<void(int, int, double, double)> progress_of(const TuneOptions& o) {
  if (!o.on_progress) return nullptr;
  return [&o](int trials, int budget, double seconds, double latency) {
    o.on_progress({trials, budget, seconds, o.trials > 0 ? 0 : o.budget_seconds, latency});
  };
}

}  // namespace

TuneReport TuningSession::run() {
  const TuneOptions& o = options_;
  check_tune_options(o);
  search::RecordStore store(o.records);
  search::NetworkTuneOptions to;
  to.task.target = o.target;
  to.task.precision = o.precision;
  to.task.seed = o.seed;
  to.task.batch = o.batch;
  to.strategy = o.strategy;
  to.first_batch = o.first_batch;
  to.estimator = o.estimator;
  if (o.custom_estimator) {
    std::shared_ptr<Estimator> e = o.custom_estimator;
    to.make_estimator = [e](size_t) { return api::adapt(e); };
  }
  if (o.trials > 0) to.budget.trials = o.trials;
  else to.budget.seconds = o.budget_seconds;
  if (o.on_log) to.task.log = o.on_log;
  to.stop = o.stop;
  to.progress = progress_of(o);
  const Model::Impl& mi = model_.impl();
  const graph::Partition merged = mi.ranged ? mi.merged(o.target, o.precision) : graph::Partition();
  if (mi.ranged && !o.custom_estimator) {
    std::set<int64_t> extents;
    for (const auto& e : mi.ranged->extents) extents.insert(e.begin(), e.end());
    to.estimator_family = search::range_families(merged, extents);
  }
  search::NetworkTuneResult r =
      search::tune_network(mi.ranged ? merged : mi.for_target(o.target, o.precision).partition, store, to);
  TuneReport rep;
  rep.trials = r.trials;
  rep.measured = r.measured;
  rep.resumed = r.resumed;
  rep.seconds = r.seconds;
  rep.overhead_fraction = r.overhead_fraction;
  rep.estimated_latency_us = r.estimated_latency_us;
  for (const auto& t : r.tasks) rep.tasks_without_program += t.best_us <= 0;
  rep.stopped = r.stopped;
  return rep;
}

OperatorTuneReport tune_operator(const OperatorSpec& spec, const TuneOptions& o) {
  check_tune_options(o);
  if (spec.workload.empty() == spec.op.empty())
    throw Error("basin::OperatorSpec: give a workload or an operator (one of them)");
  if (!spec.workload.empty() && !spec.params.empty())
    throw Error("basin::OperatorSpec: a workload has its own parameters (params must be empty)");
  ops::OpGraph g;
  std::string label = spec.workload;
  if (!spec.workload.empty()) {
    const ops::Workload& w = ops::find_workload(spec.workload);
    g = ops::build_op(w.op, w.params);
  } else {
    g = ops::build_op(spec.op, spec.params);
    label = sched::task_key(g);
  }
  std::unique_ptr<search::Strategy> strategy = search::make_strategy(o.strategy);
  std::unique_ptr<models::Estimator> est;
  if (o.custom_estimator) {
    est = api::adapt(o.custom_estimator);
  } else {
    const std::string name = o.estimator.empty() ? strategy->default_estimator() : o.estimator;
    if (!name.empty()) est = models::estimator_for_target(name, o.target);
  }
  search::RecordStore store(o.records);
  search::TuneOptions to;
  to.target = o.target;
  to.precision = o.precision;
  to.seed = o.seed;
  to.batch = o.batch;
  if (o.trials > 0) to.budget.trials = o.trials;
  else to.budget.seconds = o.budget_seconds;
  to.label = label;
  if (o.on_log) to.log = o.on_log;
  to.progress = progress_of(o);
  search::TaskTuner tuner(g, store, *strategy, est.get(), to);
  bool stopped = false;
  auto stop = [&] { return stopped || (stopped = o.stop && o.stop()); };
  while (!tuner.done() && !stop())
    if (tuner.round(o.batch, stop) == 0) break;
  if (!stopped) tuner.settle();  // as the network's tuner: a stop ends the run now
  const search::TuneResult& r = tuner.result();
  OperatorTuneReport rep;
  rep.task = r.task_key;
  rep.trials = r.trials;
  rep.measured = r.measured;
  rep.resumed = r.resumed;
  rep.errors = r.errors;
  rep.seconds = r.seconds;
  rep.best_latency_us = r.best ? r.best_latency_us : 0;
  if (r.best) {
    rep.best_sketch = r.best->sketch;
    rep.best_config = r.best->config;
  }
  rep.estimator = r.estimator;
  rep.stopped = stopped;
  return rep;
}

struct Network::Impl {
  codegen::CompiledNetwork net;
  int untuned = 0;
};

Network Network::compile(const Model& model, const std::string& records, const std::string& target,
                         const std::string& precision) {
  std::unique_ptr<search::RecordStore> store;
  if (!records.empty()) store = std::make_unique<search::RecordStore>(records, search::RecordStore::ReadOnly::Yes);
  std::vector<int> untuned;
  Network n;
  n.impl_ = std::make_shared<Impl>();
  const Model::Impl& mi = model.impl();
  if (mi.ranged) {
    std::vector<codegen::CompiledNetwork> buckets;
    std::set<std::string> missing;
    const std::vector<Model::Impl::Planned>& planned = mi.buckets_for(target, precision);
    for (size_t i = 0; i < planned.size(); ++i) {
      const Model::Impl::Planned& b = planned[i];
      std::vector<int> u;
      std::vector<codegen::ProgramChoice> c = search::choose_programs(b.partition, store.get(), target, &u, precision);
      for (int t : u) missing.insert(b.partition.tasks[static_cast<size_t>(t)].key);
      std::vector<int64_t> extents;
      for (const auto& [d, x] : mi.ranged->buckets.at(i).at) extents.push_back(x);
      buckets.push_back(codegen::CompiledNetwork::compile(b.graph, b.partition, c, target, "", extents));
    }
    const graph::RangedModel& rm = *mi.ranged;
    n.impl_->net =
        codegen::CompiledNetwork::ranged(std::move(buckets), {rm.dims, rm.input_axes, rm.output_axes, rm.masks});
    n.impl_->untuned = static_cast<int>(missing.size());
    n.impl_->net.set_accuracy(codegen::check_ranged(rm, n.impl_->net, mi.import));
    return n;
  }
  const Model::Impl::Planned& m = mi.for_target(target, precision);
  std::vector<codegen::ProgramChoice> choices =
      search::choose_programs(m.partition, store.get(), target, &untuned, precision);
  n.impl_->net = codegen::CompiledNetwork::compile(m.graph, m.partition, choices, target);
  n.impl_->untuned = static_cast<int>(untuned.size());
  const graph::Graph& reference = &m == &mi.bf16 ? mi.bf16_reference : m.graph;
  n.impl_->net.set_accuracy(codegen::measure_accuracy(reference, n.impl_->net,
                                                      codegen::random_inputs(n.impl_->net.inputs()), "random inputs"));
  return n;
}

Network Network::load(const std::string& path) {
  Network n;
  n.impl_ = std::make_shared<Impl>();
  n.impl_->net = codegen::CompiledNetwork::load(path);
  return n;
}

void Network::save(const std::string& path) const { impl_->net.save(path); }
std::vector<TensorSpec> Network::inputs() const { return specs(impl_->net.inputs()); }
std::vector<TensorSpec> Network::outputs() const { return specs(impl_->net.outputs()); }
int Network::untuned_tasks() const { return impl_->untuned; }
int Network::bf16_kernels() const { return impl_->net.kernels_of_precision("bf16"); }
Accuracy Network::accuracy() const {
  const codegen::Accuracy& a = impl_->net.accuracy();
  Accuracy r;
  r.measured = a.measured;
  r.note = a.note;
  r.max_rel_error = a.max_rel;
  r.max_abs_error = a.max_abs;
  r.top1_agree = a.top1_agree;
  r.top1_rows = a.top1_rows;
  return r;
}

std::vector<Tensor> Network::run(const std::vector<Tensor>& inputs) {
  std::vector<Tensor> out;
  for (NDArray& a : impl_->net.run(arrays(inputs))) out.push_back(wrap(std::move(a)));
  return out;
}

double Network::time_us(const std::vector<Tensor>& inputs) { return impl_->net.time(arrays(inputs)).min_us; }

Profile Network::profile(const std::vector<Tensor>& inputs, int rounds) {
  if (rounds < 1) throw Error("basin::Network::profile: rounds must be 1 or more");
  codegen::NetworkProfile p = impl_->net.profile(arrays(inputs), rounds);
  Profile out;
  out.run_us = p.run_us;
  out.kernels_us = p.kernels_us;
  for (const codegen::KernelProfile& k : p.launches)
    out.launches.push_back({k.label, k.kernel, k.us, k.flops, k.bytes, k.precision});
  return out;
}

std::string Network::target() const { return impl_->net.target(); }

int plugin_call_bound_seconds() { return plugin_timeout_seconds(); }

std::vector<std::string> feature_names(const std::string& target) {
  if (target != "llvm" && target != "cuda")
    throw Error("basin::feature_names: unknown target '" + target + "' (llvm or cuda)");
  return relax::feature_names(target == "cuda" ? relax::FeatureSet::Gpu : relax::FeatureSet::Cpu);
}

}  // namespace basin
