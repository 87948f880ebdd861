// basin's C++ API: load a network, tune it, compile it, save it, load it and run it.
//
//   #include <basin/basin.h>
//   basin::Model model = basin::Model::load("resnet18.onnx");      // or "zoo:resnet18"
//   basin::TuneOptions opt;
//   opt.records = "resnet18.db";                                   // resumable
//   opt.budget_seconds = 120;
//   basin::TuningSession(model, opt).run();
//   basin::Network net = basin::Network::compile(model, opt.records);
//   net.save("resnet18.basin");                                    // runs without the compiler
//   std::vector<basin::Tensor> y = basin::Network::load("resnet18.basin").run({x});
//
// Every user error (a missing or malformed file, a bad option, an input of the wrong
// shape) throws std::runtime_error whose what() is one line naming what is at fault.
// The library is libbasin.so; `find_package(basin)` and `basin::basin` link it. Nothing
// here names basin's internal headers, which are not installed.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace basin {

// An input's or output's description: its name, element type ("float32", "int64",
// "int32", "float64", ...) and shape. An integer input read as indices (a gather, an
// embedding) must hold values in [-index_bound, index_bound) (a negative index counts
// from the end; running refuses others); index_bound is 0 for other inputs. An integer
// input that divides (an integer Div's or Mod's divisor) must hold no zero: running
// refuses one, as ONNX Runtime does.
struct TensorSpec {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  int64_t index_bound = 0;
  bool divisor = false;
  // A network over ranges of shapes (LoadOptions::ranges): per axis, the ranged
  // dimension it carries ("" for a fixed axis; empty for fixed shapes); `shape` is the
  // largest, and run() takes any extents of the ranges.
  std::vector<std::string> dims;
};

// A dense row-major host tensor. Copies share their data (clone() copies it).
class Tensor {
 public:
  Tensor();
  // Zero-filled.
  Tensor(const std::string& dtype, const std::vector<int64_t>& shape);
  // Uniform random values in [lo, hi), deterministic in seed; an integer tensor with an
  // index bound draws indices in [0, index_bound), a divisor no zero (values below 1 are 1).
  static Tensor random(const TensorSpec& spec, double lo = -1, double hi = 1, uint64_t seed = 1);
  // A tensor over memory the caller owns (row-major, contiguous, `shape`'s element count
  // of `dtype`), without a copy: `owner` is kept alive as long as the tensor or a copy of
  // it (null: the caller keeps the memory alive). The Python package passes NumPy
  // arrays and torch tensors through it.
  static Tensor borrow(const std::string& dtype, const std::vector<int64_t>& shape, void* data,
                       std::shared_ptr<void> owner);
  // float32 values in row-major order.
  static Tensor from_floats(const std::vector<float>& values, const std::vector<int64_t>& shape);

  std::string dtype() const;
  const std::vector<int64_t>& shape() const;
  int64_t size() const;  // elements
  size_t bytes() const;
  void* data();
  const void* data() const;
  // Element i (row-major), converted to double, for any element type.
  double at(int64_t i) const;
  Tensor clone() const;

  struct Impl;
  explicit Tensor(std::shared_ptr<Impl> impl);
  const Impl& impl() const { return *impl_; }

 private:
  std::shared_ptr<Impl> impl_;
};

struct LoadOptions {
  // An input's shape (name -> dims) or a symbolic dimension's value (name -> {N}), for
  // models exported with dynamic axes (as `basin --shape NAME=...`).
  std::map<std::string, std::vector<int64_t>> shapes;
  // A symbolic dimension's range of values, name -> {lo, hi} (as `basin --shape
  // NAME=LO..HI`): the network is compiled as shape buckets behind one dispatcher
  // (docs/networks.md, "Ranges of shapes"), tuned at once, each bucket weighted by the
  // values it serves.
  std::map<std::string, std::pair<int64_t, int64_t>> ranges;
};

// A network ready to tune and compile: an ONNX file or a zoo network ("zoo:resnet18"),
// optimized and partitioned into tasks.
class Model {
 public:
  static Model load(const std::string& model, const LoadOptions& options = {});
  const std::string& name() const;
  std::vector<TensorSpec> inputs() const;
  int tasks() const;  // distinct kernels to tune on the CPU

  struct Impl;
  const Impl& impl() const { return *impl_; }

 private:
  std::shared_ptr<Impl> impl_;
};

// A tuning run's state, after each round.
struct Progress {
  int trials = 0;        // programs proposed so far in this run
  int trial_budget = 0;  // TuneOptions::trials; 0 when the budget is in seconds
  double seconds = 0;
  double budget_seconds = 0;        // TuneOptions::budget_seconds; 0 when in trials
  double estimated_latency_us = 0;  // the network with each task's best so far (0 until every task has one)
};

// A batch of programs' features as an estimator reads them (valid during the call only):
// values [batch][stores][features], row-major, each log2(1 + x) of a buffer store's
// feature in feature_names(target) order; mask [batch][stores], 1 for a program's real
// store and 0 for the padding (a program with fewer stores than the batch's largest has
// zero rows there).
struct FeatureBatch {
  int batch = 0, stores = 0, features = 0;
  const float* values = nullptr;
  const float* mask = nullptr;
};

// A latency estimator of one's own (docs/estimators.md, "Estimators in Python"): the
// search asks it to score programs, lower meaning predicted faster, and tells it the
// latencies measured. The gradient search also needs the scores' gradient in the
// features. Each program's score depends on its own features only. Called on the tuning
// thread, one call at a time; an exception stops the tuning run (the records kept).
class Estimator {
 public:
  virtual ~Estimator() = default;
  // The estimator's name in records and logs.
  virtual std::string name() const { return "user"; }
  // One score per program.
  virtual std::vector<double> predict(const FeatureBatch& x) = 0;
  // True when gradient() is implemented: the gradient strategy needs it.
  virtual bool differentiable() const { return false; }
  // d(sum of the scores) / d values: batch x stores x features floats, values' layout.
  virtual std::vector<float> gradient(const FeatureBatch& x);
  // The measured latencies (microseconds) of programs of the task being tuned (the
  // task's programs so far, or its newest ones): learn from them.
  virtual void update(const FeatureBatch& x, const std::vector<double>& latencies_us);
  // False while the scores mean nothing yet: the search then proposes programs at
  // random, and calls update() once 8 programs are measured.
  virtual bool ready() const { return true; }
};

struct TuneOptions {
  std::string records;         // required: where every measured program goes; a second run resumes
  double budget_seconds = 60;  // stop after this wall time, or
  int trials = 0;              // after this many programs in all (when positive, instead of seconds)
  int batch = 16;              // programs measured per round
  int first_batch = 0;         // programs of each task's first round; 0: 256 shared by the tasks, at least 4 each
  std::string strategy = "gradient";  // gradient, annealing, evolutionary, random
  std::string target = "llvm";        // llvm (this CPU) or cuda
  std::string precision;  // "" (the target's default: f32 on llvm, tf32 on cuda), f32, bf16; cuda also tf32, fp16
  uint64_t seed = 1;
  // The latency estimator: "" (the strategy's default), a kind (mlp, gbt, ensemble,
  // roofline) or a file (basin's estimator file or a TorchScript module); or one's own
  // object (custom_estimator, which then takes the place of every task's).
  std::string estimator;
  std::shared_ptr<Estimator> custom_estimator;
  std::function<void(const Progress&)> on_progress;
  std::function<void(const std::string&)> on_log;  // one line per event; none when empty
  // Asked before each program: true stops the run where it is (TuneReport::stopped);
  // every program measured is in the records, and a second run resumes.
  std::function<bool()> stop;
};

struct TuneReport {
  int trials = 0, measured = 0, resumed = 0;
  double seconds = 0;
  double overhead_fraction = 0;     // the share of the time not spent measuring
  double estimated_latency_us = 0;  // 0 when a task has no valid program
  int tasks_without_program = 0;
  bool stopped = false;  // TuneOptions::stop ended the run early
};

// A tuning session: the task scheduler spends the budget across the model's tasks,
// where the network's latency gains most, and records every program measured.
class TuningSession {
 public:
  TuningSession(const Model& model, TuneOptions options);
  TuneReport run();

 private:
  Model model_;
  TuneOptions options_;
};

// One operator tuned alone, as `basin tune-op` does: a named workload ("gemm-4096";
// `basin workloads` lists them) or an operator (`basin ops`) and its parameters.
struct OperatorSpec {
  std::string workload;
  std::string op;
  std::map<std::string, std::string> params;
};

struct OperatorTuneReport {
  std::string task;  // the task's key in the records
  int trials = 0, measured = 0, resumed = 0, errors = 0;
  double seconds = 0;
  double best_latency_us = 0;  // 0 when no valid program ran
  std::string best_sketch, best_config;
  std::string estimator;  // the estimator's kind ("" for none)
  bool stopped = false;
};

// Tunes one operator for options' budget (trials or seconds) with options' strategy and
// estimator, every program measured going to options.records (a second run resumes);
// first_batch is not used. on_progress's estimated_latency_us is the best so far.
OperatorTuneReport tune_operator(const OperatorSpec& op, const TuneOptions& options);

// A compiled network's error against the float32 reference (LibTorch running the same
// graph) on random inputs, measured when it was compiled: what bf16 kernels cost.
struct Accuracy {
  bool measured = false;
  std::string note;  // the inputs, or why it was not measured
  double max_rel_error = 0, max_abs_error = 0;
  int top1_agree = 0, top1_rows = 0;  // a classifier's rows whose argmax agrees (rows 0: not one)
};

// One kernel launch of a network, timed alone (Network::profile).
struct LaunchProfile {
  std::string task;       // the fused subgraph it runs
  int kernel = 0;         // the distinct kernel (launches of one task share it)
  double us = 0;          // the fastest of the rounds
  double flops = 0;       // floating-point operations of one launch
  int64_t bytes = 0;      // every input read and the output written once
  std::string precision;  // what its program multiplies: f32, bf16 (tf32, fp16 on the GPU)
};
struct Profile {
  std::vector<LaunchProfile> launches;  // in run order
  double run_us = 0;                    // the fastest whole run (copies in and out included)
  double kernels_us = 0;                // the fastest launch-by-launch round, summed
};

// A compiled network: its kernels, memory plan and weights.
class Network {
 public:
  // Each task's best program in `records` (empty: none), the default program for a task
  // without one (untuned_tasks() counts them).
  // `precision` as in TuneOptions: only records of its programs are used (fp32 leaves out
  // the tensor-core programs' records, fp16 those of TF32 and BF16 ones).
  static Network compile(const Model& model, const std::string& records = "", const std::string& target = "llvm",
                         const std::string& precision = "");
  // A file written by save() or `basin compile`; it holds machine code, which runs as
  // the user: load only files you trust.
  static Network load(const std::string& path);
  void save(const std::string& path) const;

  std::vector<TensorSpec> inputs() const;
  std::vector<TensorSpec> outputs() const;
  int untuned_tasks() const;
  // Kernels whose programs multiply in bf16 (at precision "bf16" the others kept f32).
  int bf16_kernels() const;
  Accuracy accuracy() const;
  // Outputs for inputs in the network's order; the inputs' types and shapes are checked.
  std::vector<Tensor> run(const std::vector<Tensor>& inputs);
  // The fastest of several timed runs, in microseconds.
  double time_us(const std::vector<Tensor>& inputs);
  // Each launch timed alone, the fastest of `rounds` (the llvm target only).
  Profile profile(const std::vector<Tensor>& inputs, int rounds = 20);
  std::string target() const;  // "llvm" or "cuda"

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

// The features a latency estimator reads for each buffer store of a program, in the
// order of a feature vector (docs/features.md; each is log2(1 + x)); target "llvm"
// (the CPU's set) or "cuda" (the GPU's).
std::vector<std::string> feature_names(const std::string& target = "llvm");

// The seconds one call of a plug-in (a TorchScript estimator's forward, a Python
// estimator's predict, gradient or update) may take before the run gives it up:
// BASIN_PLUGIN_TIMEOUT, a whole number from 1 to 86400, 120 when unset.
int plugin_call_bound_seconds();

}  // namespace basin
