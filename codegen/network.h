// The network runtime (DESIGN.md, "Codegen and measurement"): a compiled network is
// its kernels (one per task, shared by every group of that task), a static memory plan
// (one arena; intermediate tensors share space once the last reader of the earlier
// one has run; views alias their input), the weights, and the list of kernel launches.
// It runs without the compiler: saved to one file (the kernels as relocatable machine
// code, the plan as JSON, the weights as raw bytes) and loaded again by the JIT's
// linker alone, with no lowering, no LLVM optimization and no code generation. On the
// cuda target the kernels are one cubin, and the arena and the weights live on the GPU.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "codegen/timing.h"
#include "core/graph/fusion.h"
#include "core/graph/graph.h"
#include "core/graph/shape_range.h"
#include "core/ir/ndarray.h"
#include "core/schedule/sketch.h"

namespace basin::codegen {

// The program of one task: a sketch (by name) and its configuration. `tuned` is false
// for an untuned task compiled with the sketch's default configuration.
struct ProgramChoice {
  std::string sketch;
  sched::Config config;
  bool tuned = false;
};

struct TensorInfo {
  std::string name;
  DType dtype = DType::f32();
  std::vector<int64_t> shape;
  // An integer input read as indices (gather, embedding): its values must lie in
  // [-index_bound, index_bound) (a negative one counts from the end; run() refuses
  // others); 0 when it is not one.
  int64_t index_bound = 0;
  // An integer input that divides (Div's divisor, Mod's): run() refuses a zero in it,
  // as ONNX Runtime does (the kernels define x / 0 as 0, never trapping).
  bool divisor = false;
  // A network over ranges of shapes: per axis, the ranged dimension it carries ("" for a
  // fixed axis; empty for a network of fixed shapes). `shape` is then the largest.
  std::vector<std::string> axis_dims;
};

// What a network over ranges of shapes (core/graph/shape_range.h) serves: the ranged
// dimensions, the axes of the model's inputs and outputs that carry them, and the
// dimensions whose padded positions its buckets mask (their inputs after the model's).
struct ShapeRanges {
  std::vector<graph::DimRange> dims;
  std::vector<std::vector<std::string>> input_axes, output_axes;
  std::vector<std::string> masks;
};

// The bound of an integer graph input read as indices: the least extent its gathers and
// embeddings index (ops::node_input_range), 0 when none reads it so.
int64_t input_index_bound(const graph::Graph& g, int v);

// Whether an integer graph input is a divisor (of a div or mod, directly or through views).
bool input_is_divisor(const graph::Graph& g, int v);

// One kernel launch of a network as `basin profile` reports it.
struct KernelProfile {
  std::string label, task_key;
  int kernel = 0;                 // index of the distinct kernel (launches of one task share it)
  double us = 0;                  // the fastest of the rounds
  double flops = 0;               // floating-point operations of one launch
  int64_t bytes = 0;              // its tensors' sizes: every input read and the output written once
  std::string precision = "f32";  // what its program multiplies: f32, bf16 (tf32, fp16 on the GPU)
};
// A compiled network's outputs against the float32 reference, LibTorch running the same
// graph (codegen/torch_executor.h), on the same inputs: the error a lower precision
// (bf16 kernels) costs, and a check of every kernel in any precision.
struct Accuracy {
  bool measured = false;
  // What it was measured on ("random inputs", "the given inputs"), or why it was not.
  std::string note;
  double max_rel = 0;  // over every output: the largest |difference| over the output's largest |value|
  double max_abs = 0;
  // Classifiers (an output [N, C], C >= 2, the first such): rows whose argmax agrees
  // with the reference's, of top1_rows (0: not a classifier).
  int top1_agree = 0, top1_rows = 0;
};

struct NetworkProfile {
  std::vector<KernelProfile> launches;  // in run order
  double run_us = 0;                    // the fastest whole run (copies in and out included)
  double kernels_us = 0;                // the fastest launch-by-launch round, summed
};

class CompiledNetwork {
 public:
  CompiledNetwork();
  ~CompiledNetwork();
  CompiledNetwork(CompiledNetwork&&) noexcept;
  CompiledNetwork& operator=(CompiledNetwork&&) noexcept;

  // Lowers and compiles every task of the partition with its program (choices[i] for
  // p.tasks[i]) and plans memory. Throws basin::Error naming the task that fails.
  // target "llvm": this CPU; "cuda": every kernel CUDA C in one NVRTC translation unit
  // for cuda_arch (empty: the GPU here), run on GPU 0 with the arena and the weights in
  // device memory (compiling needs no GPU when cuda_arch is given; running does).
  // `runtime_extents` (a bucket of a network over ranges of shapes, the llvm target:
  // its extents of the ranged dimensions): each kernel takes its iterations at run time
  // where it can (core/ir/runtime_extent.h), so that a call below the bucket's extents
  // runs only the iterations its real positions need (ranged() finds the axes).
  static CompiledNetwork compile(const graph::Graph& g, const graph::Partition& p,
                                 const std::vector<ProgramChoice>& choices, const std::string& target = "llvm",
                                 const std::string& cuda_arch = "", const std::vector<int64_t>& runtime_extents = {});
  // A network over ranges of shapes: `buckets` (the buckets of ranged_model, in its
  // order, each compiled from its bucket's graph) behind one dispatcher. A call runs on
  // the least bucket that holds it: its inputs padded with zeros, each mask 0 at real
  // positions and -inf at padded ones, its outputs cut back to the call's extents. The
  // buckets share one arena (the largest) and their weights of equal contents. A
  // bucket's kernel compiled with runtime_extents whose output has an axis that a
  // ranged dimension runs along (found against a bucket that differs in that dimension
  // alone: the output's tensor of the same name there differs on that axis only, by
  // the two buckets' extents) runs on a call only the iterations that write a real
  // position, and its output's padded positions are then cleared to zero.
  static CompiledNetwork ranged(std::vector<CompiledNetwork> buckets, const ShapeRanges& ranges);
  bool is_ranged() const;
  const ShapeRanges& ranges() const;  // empty dims for a network of fixed shapes
  int buckets() const;                // 1 for a network of fixed shapes
  CompiledNetwork& bucket(int i);     // a ranged network's bucket i
  // Each ranged dimension's extent in bucket i.
  std::map<std::string, int64_t> bucket_extents(int i) const;
  // The bucket a call on `inputs` runs on, and its inputs as that bucket takes them
  // (padded, the masks after them); a network of fixed shapes: 0 and the inputs
  // checked; `extents` (when given) receives the call's extent of each ranged
  // dimension. Throws Error naming the input for a shape outside the ranges.
  int dispatch(const std::vector<NDArray>& inputs, std::vector<NDArray>* bucket_inputs,
               std::map<std::string, int64_t>* extents = nullptr) const;

  // Throws ParseError for a file that is not a compiled network or is corrupt, and
  // Error for one compiled for another CPU.
  static CompiledNetwork load(const std::string& path);
  // True when the file starts like a compiled network (its magic), whatever else it holds.
  static bool is_compiled_file(const std::string& path);
  // Written by core/util/output_file.h's rules; `inputs` are the paths it must not
  // replace (the model, the records).
  void save(const std::string& path, const std::vector<std::string>& inputs = {}) const;

  // Outputs in the network's order for inputs in its order (checked: dtype and shape).
  std::vector<NDArray> run(const std::vector<NDArray>& inputs);
  // Times run() on these inputs (the copies in and out included).
  Timing time(const std::vector<NDArray>& inputs, const TimingOptions& opt = TimingOptions::full());
  // Each launch timed alone (steady clock around the call, fastest of `rounds`), and
  // whole runs; the llvm target only.
  NetworkProfile profile(const std::vector<NDArray>& inputs, int rounds);

  const std::string& name() const;
  // The distinct kernels whose programs multiply in `precision` ("f32", "bf16", ...):
  // at --precision bf16 the others kept float32 (faster, or no bfloat16 form).
  int kernels_of_precision(const std::string& precision) const;
  const std::string& target() const;     // "llvm" or "cuda"
  const std::string& cuda_arch() const;  // "sm_90" for the cuda target
  // The CPU it was compiled, and its kernels tuned, for (llvm target: LLVM's name,
  // "znver4"; its features in the file).
  std::string compiled_for_cpu() const;
  const std::vector<TensorInfo>& inputs() const;
  const std::vector<TensorInfo>& outputs() const;
  int kernels() const;           // distinct kernels (of every bucket)
  int launches() const;          // kernel calls per run (of the largest bucket)
  // A ranged network's launches (of the largest bucket) that run only the iterations a
  // call's real positions need (`compile`'s runtime_extents); 0 for fixed shapes.
  int runtime_extent_launches() const;
  int64_t arena_bytes() const;   // the memory plan's arena (the buckets': the largest)
  int64_t tensor_bytes() const;  // the intermediate tensors' sizes summed (no reuse)
  int64_t weight_bytes() const;
  // Its error against the float32 reference, measured when it was compiled
  // (measure_accuracy; saved with it). Not measured: measured == false.
  const Accuracy& accuracy() const;
  void set_accuracy(const Accuracy& a);
  // Weights packed when the network was compiled (a kernel's first stage that
  // rearranged a constant input, run once instead of on every call).
  int packed_weights() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Inputs of these types and shapes, the same for every call: floats uniform in [-1, 1),
// indices within their table (TensorInfo::index_bound), other integers in [0, 100).
std::vector<NDArray> random_inputs(const std::vector<TensorInfo>& infos);

// Runs `net` and the float32 reference (LibTorch on `g`, the graph `net` was compiled
// from) on `inputs` and compares their outputs. A graph LibTorch cannot run gives
// measured == false and the reason in note.
Accuracy measure_accuracy(const graph::Graph& g, CompiledNetwork& net, const std::vector<NDArray>& inputs,
                          const std::string& inputs_note);

}  // namespace basin::codegen
