#include "codegen/network.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "codegen/c_printer.h"
#include "codegen/cuda.h"
#include "codegen/llvm_jit.h"
#include "codegen/torch_executor.h"
#include "core/graph/fusion.h"
#include "core/ir/runtime_extent.h"
#include "core/ops/node_ops.h"
#include "core/schedule/lower_sketch.h"
#include "core/schedule/task_analysis.h"
#include "core/util/sha256.h"
#include "core/util/host.h"
#include "core/util/io.h"
#include "core/util/output_file.h"

namespace basin::codegen {

namespace {

// The file: magic, the header's size (8 bytes), the SHA-256 of everything after the
// digest (32 bytes), the header (JSON), the machine code, the weights.
constexpr char kMagic[] = "BASINNET2\n";
constexpr char kOldMagic[] = "BASINNET1\n";
constexpr size_t kDigest = 32;
constexpr int64_t kAlign = 64;

int64_t align_up(int64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// What follows a compiled network's header: machine code and weights, in order. A
// weight that several buckets of a ranged network share is written once.
struct Blob {
  uint64_t size = 0;
  std::vector<std::string_view> chunks;
  std::map<const void*, uint64_t> weight_at;
  uint64_t add(std::string_view b) {
    chunks.push_back(b);
    const uint64_t at = size;
    size += b.size();
    return at;
  }
  uint64_t add_weight(const NDArray& w) {
    auto it = weight_at.find(w.data());
    if (it != weight_at.end()) return it->second;
    return weight_at[w.data()] = add(std::string_view(static_cast<const char*>(w.data()), w.nbytes()));
  }
};

struct AlignedFree {
  void operator()(uint8_t* p) const { std::free(p); }
};

}  // namespace

struct CompiledNetwork::Impl {
  // A tensor's place: in the arena at `offset`, or weight `weight`.
  struct Slot {
    TensorInfo info;
    int weight = -1;
    int64_t offset = 0;
    int64_t bytes() const {
      int64_t n = info.dtype.bytes();
      for (int64_t e : info.shape) n *= e;
      return n;
    }
  };
  struct Kernel {
    std::string label, task_key;
    std::unique_ptr<LlvmKernel> k;  // llvm
    std::string cuda_name;          // cuda: its name in the cubin, and its launch
    GpuLaunch launch;
    double flops = 0;  // of one launch
    // Its parameters (inputs, then the output): element type and bytes. A loaded
    // network's steps are checked against them before anything runs.
    std::vector<std::pair<DType, int64_t>> params;
    // "bf16" where its program multiplies bfloat16 inputs (a CPU bf16 sketch, a GPU
    // tensor core at bf16), "fp16" or "tf32" on the GPU's tensor cores, else "f32".
    std::string precision = "f32";
    // A ranged network's kernel given its iterations at run time
    // (core/ir/runtime_extent.h): that parameter's index in params (-1: none; a
    // launch's args leave it out) and its nests' tables.
    int iter_param = -1;
    std::vector<RuntimeNest> nests;
  };
  struct Step {
    int kernel = 0;
    std::vector<int> args;  // slots: inputs, then the output
    // A ranged network's bucket: the ranged dimension that the output's axis `axis`
    // runs along ("": none), the kernel's iterations for the call being run, and the
    // call's extent along that axis when it is less than the bucket's (-1: none), from
    // which the output's padded positions are cleared after the launch.
    std::string dim;
    int axis = -1;
    std::vector<int32_t> iters;
    int64_t clear_from = -1;
  };
  std::string name = "network";
  std::vector<Slot> slots;
  std::vector<int> input_slots, output_slots;
  // The outputs' names as the model gave them (ONNX graph outputs), which the tensors
  // behind them need not bear (an output can also be a kernel's input, or twice an output).
  std::vector<std::string> output_names;
  std::vector<TensorInfo> input_info, output_info;
  std::vector<Kernel> kernels;
  std::vector<Step> steps;
  std::vector<NDArray> weights;
  int64_t arena_bytes = 0, tensor_bytes = 0;
  int packed_weights = 0;
  std::string host;
  Accuracy accuracy;
  std::string target = "llvm";
  std::string arch, cubin;  // cuda

  // cuda: created on the first run.
  std::unique_ptr<CudaProgram> gpu;
  uint64_t gpu_arena = 0;
  std::vector<uint64_t> gpu_weights;
  std::vector<std::vector<uint64_t>> gpu_args;

  uint64_t gpu_ptr(int slot) const {
    const Slot& s = slots[slot];
    return s.weight >= 0 ? gpu_weights[s.weight] : gpu_arena + static_cast<uint64_t>(s.offset);
  }
  // The module, the device arena, the weights uploaded, each launch's addresses.
  void prepare_gpu() {
    if (gpu) return;
    std::string here = cuda_device_arch();
    if (here != arch)
      throw Error("network '" + name + "' was compiled for " + arch + "; this GPU is " + here +
                  ": compile it again here");
    std::vector<std::pair<std::string, GpuLaunch>> ks;
    for (const Kernel& k : kernels) ks.push_back({k.cuda_name, k.launch});
    auto p = std::make_unique<CudaProgram>(CudaBinary{arch, cubin, ""}, ks);
    gpu_arena = p->alloc(static_cast<size_t>(std::max<int64_t>(arena_bytes, kAlign)));
    gpu_weights.clear();
    for (const NDArray& w : weights) {
      gpu_weights.push_back(p->alloc(w.nbytes()));
      p->upload(gpu_weights.back(), w.data(), w.nbytes());
    }
    gpu = std::move(p);
    gpu_args.clear();
    for (const Step& s : steps) {
      std::vector<uint64_t> a;
      for (int x : s.args) a.push_back(gpu_ptr(x));
      gpu_args.push_back(std::move(a));
    }
  }

  // Empty when every launch passes its kernel tensors of the element types and sizes
  // its parameters take, and writes only the arena; else what is wrong.
  std::string invalid_step() const {
    for (size_t i = 0; i < steps.size(); ++i) {
      const Step& st = steps[i];
      const Kernel& k = kernels[static_cast<size_t>(st.kernel)];
      const std::string where = "launch " + std::to_string(i) + " (" + k.label + ")";
      if (st.args.empty()) return where + " passes no tensors (a kernel writes its last one)";
      const size_t given = k.iter_param >= 0 ? 1 : 0;
      if (st.args.size() + given != k.params.size())
        return where + " passes " + std::to_string(st.args.size() + given) + " tensors to a kernel of " +
               std::to_string(k.params.size()) + " parameters";
      if (k.iter_param >= 0 &&
          (k.iter_param != static_cast<int>(st.args.size()) - 1 ||
           k.params[static_cast<size_t>(k.iter_param)] != std::pair<DType, int64_t>(DType::i32(), 4 * iterations_size(k.nests))))
        return where + ": its iterations parameter does not match its nests";
      for (size_t a = 0; a < st.args.size(); ++a) {
        const Slot& sl = slots[static_cast<size_t>(st.args[a])];
        const auto& param = k.params[a + (k.iter_param >= 0 && static_cast<int>(a) >= k.iter_param ? 1 : 0)];
        if (sl.info.dtype != param.first || sl.bytes() != param.second)
          return where + ": tensor '" + sl.info.name + "' (" + sl.info.dtype.str() + ", " + std::to_string(sl.bytes()) +
                 " bytes) for a parameter of " + param.first.str() + ", " + std::to_string(param.second) + " bytes";
      }
      if (slots[static_cast<size_t>(st.args.back())].weight >= 0) return where + " writes a weight";
    }
    return "";
  }

  std::shared_ptr<uint8_t> arena;  // a ranged network's buckets share one
  std::vector<std::vector<void*>> step_ptrs;

  // A network over ranges of shapes: its buckets (the fields above unused but the
  // name, target, host, arch, accuracy and arena_bytes, the largest bucket's arena).
  std::vector<CompiledNetwork> buckets;
  ShapeRanges ranges;
  std::vector<std::map<std::string, int64_t>> bucket_at;
  bool is_ranged() const { return !buckets.empty(); }
  // The header of the network's file (a bucket's, in a ranged network's file), its
  // machine code and weights added to `blob`; and the network from such a header.
  nlohmann::json header(Blob& blob) const;
  void parse(const nlohmann::json& h, const std::string& data, size_t blob0, const std::string& path,
             std::map<std::pair<uint64_t, uint64_t>, NDArray>& loaded);
  // A ranged network's infos, bucket extents, shared weights and arena from its buckets
  // (InternalError when the buckets do not match the ranges).
  void assemble_ranged();
  // Each bucket's launches given their iterations at run time: the output's axis that a
  // ranged dimension runs along, against a bucket that differs in that dimension alone
  // (the outermost such axis, of any dimension).
  void find_ranged_axes();

  void* ptr(int slot) {
    const Slot& s = slots[slot];
    return s.weight >= 0 ? weights[s.weight].data() : arena.get() + s.offset;
  }
  // The inputs' and outputs' infos from the slots.
  void prepare_infos() {
    input_info.clear();
    output_info.clear();
    for (int s : input_slots) input_info.push_back(slots[s].info);
    for (size_t i = 0; i < output_slots.size(); ++i) {
      output_info.push_back(slots[output_slots[i]].info);
      if (i < output_names.size() && !output_names[i].empty()) output_info.back().name = output_names[i];
    }
  }
  // The arena (`shared` when given: at least arena_bytes) and each launch's argument
  // pointers, once.
  void prepare(std::shared_ptr<uint8_t> shared = nullptr) {
    prepare_infos();
    if (target == "cuda") return;  // device memory on the first run
    // aligned_alloc takes a multiple of the alignment.
    const size_t arena_alloc =
        static_cast<size_t>((std::max<int64_t>(arena_bytes, kAlign) + kAlign - 1) / kAlign * kAlign);
    if (shared) {
      arena = std::move(shared);
    } else {
      auto* a = static_cast<uint8_t*>(std::aligned_alloc(kAlign, arena_alloc));
      if (!a) throw RuntimeError("cannot allocate the network's " + std::to_string(arena_bytes) + "-byte arena");
      std::memset(a, 0, static_cast<size_t>(arena_bytes));
      arena = std::shared_ptr<uint8_t>(a, AlignedFree());
    }
    step_ptrs.clear();
    for (Step& s : steps) {
      std::vector<void*> p;
      for (int a : s.args) p.push_back(ptr(a));
      const Kernel& k = kernels[static_cast<size_t>(s.kernel)];
      if (k.iter_param >= 0) {
        s.iters.assign(static_cast<size_t>(iterations_size(k.nests)), 0);
        runtime_iterations(k.nests, 0, 0, 0, s.iters.data());  // every iteration
        p.insert(p.begin() + k.iter_param, s.iters.data());
      }
      step_ptrs.push_back(std::move(p));
    }
  }

  // A bucket's launches for a call of these extents of the ranged dimensions (nullptr:
  // the bucket's own, every iteration run and nothing cleared).
  void set_call(const std::map<std::string, int64_t>* at) {
    for (Step& st : steps) {
      const Kernel& k = kernels[static_cast<size_t>(st.kernel)];
      if (k.iter_param < 0) continue;
      st.clear_from = -1;
      int64_t stride = 0, extent = 0, n = 0;
      if (at && !st.dim.empty()) {
        const std::vector<int64_t>& shape = slots[static_cast<size_t>(st.args.back())].info.shape;
        extent = shape[static_cast<size_t>(st.axis)];
        stride = 1;
        for (size_t a = static_cast<size_t>(st.axis) + 1; a < shape.size(); ++a) stride *= shape[a];
        n = at->at(st.dim);
        if (n < extent) st.clear_from = n;
      }
      runtime_iterations(k.nests, stride, extent, n, st.iters.data());
    }
  }
  // f() run with the launches set for a call of extents `at`, then set back.
  template <typename F>
  auto at_call(const std::map<std::string, int64_t>& at, F f) {
    set_call(&at);
    try {
      auto r = f();
      set_call(nullptr);
      return r;
    } catch (...) {
      set_call(nullptr);
      throw;
    }
  }
  // Launch i, then its output's padded positions cleared: a skipped iteration left
  // them as the arena held them (anything, a -inf of a mask among them), and a later
  // kernel that reads them (an attention's keys and values, hidden by the mask) must
  // read finite values.
  void launch(size_t i) {
    const Step& st = steps[i];
    kernels[static_cast<size_t>(st.kernel)].k->run_raw(step_ptrs[i].data());
    if (st.clear_from < 0) return;
    const Slot& sl = slots[static_cast<size_t>(st.args.back())];
    const std::vector<int64_t>& shape = sl.info.shape;
    int64_t outer = 1, row = sl.info.dtype.bytes();
    for (int a = 0; a < st.axis; ++a) outer *= shape[static_cast<size_t>(a)];
    for (size_t a = static_cast<size_t>(st.axis) + 1; a < shape.size(); ++a) row *= shape[a];
    const int64_t extent = shape[static_cast<size_t>(st.axis)];
    auto* base = static_cast<uint8_t*>(step_ptrs[i].back());
    for (int64_t o = 0; o < outer; ++o)
      std::memset(base + (o * extent + st.clear_from) * row, 0, static_cast<size_t>((extent - st.clear_from) * row));
  }
};

CompiledNetwork::CompiledNetwork() : impl_(std::make_unique<Impl>()) {}
CompiledNetwork::~CompiledNetwork() = default;
CompiledNetwork::CompiledNetwork(CompiledNetwork&&) noexcept = default;
CompiledNetwork& CompiledNetwork::operator=(CompiledNetwork&&) noexcept = default;

bool input_is_divisor(const graph::Graph& g, int v) {
  const graph::Value& val = g.value(v);
  if (val.constant || val.producer >= 0 || val.dtype.is_float() || val.dtype.is_bool()) return false;
  std::vector<int> work{v};
  std::vector<bool> seen(g.values().size(), false);
  seen[v] = true;
  while (!work.empty()) {
    const int u = work.back();
    work.pop_back();
    for (int c : g.consumers(u)) {
      const graph::Node& nd = g.node(c);
      if ((nd.op == "div" || nd.op == "mod") && nd.inputs.size() == 2 && nd.inputs[1] == u) return true;
      if (graph::is_view_op(nd.op) && !nd.inputs.empty() && nd.inputs[0] == u)
        if (!seen[nd.output]) seen[nd.output] = true, work.push_back(nd.output);
    }
  }
  return false;
}

int64_t input_index_bound(const graph::Graph& g, int v) {
  const graph::Value& val = g.value(v);
  if (val.constant || val.producer >= 0 || !(val.dtype == DType::i64() || val.dtype == DType::i32())) return 0;
  int64_t bound = 0;
  for (int c : g.consumers(v)) {
    const graph::Node& nd = g.node(c);
    if (nd.op != "gather" && nd.op != "embedding" && nd.op != "gather_elements" && nd.op != "gather_nd") continue;
    std::vector<te::Tensor> ph;
    for (int in : nd.inputs) ph.push_back(te::placeholder(g.value(in).name, g.value(in).shape, g.value(in).dtype));
    for (size_t k = 0; k < nd.inputs.size(); ++k) {
      if (nd.inputs[k] != v) continue;
      ops::InputRange r = ops::node_input_range(nd.op, nd.attrs, static_cast<int>(k), ph);
      const auto hi = static_cast<int64_t>(r.hi);
      if (r.lo >= 0 && hi > 0) bound = bound == 0 ? hi : std::min(bound, hi);
    }
  }
  return bound;
}

namespace {}  // namespace

CompiledNetwork CompiledNetwork::compile(const graph::Graph& g, const graph::Partition& p,
                                         const std::vector<ProgramChoice>& choices, const std::string& target,
                                         const std::string& cuda_arch, const std::vector<int64_t>& runtime_extents) {
  const bool cuda = target == "cuda";
  if (!cuda && target != "llvm") throw Error("unknown target '" + target + "' (llvm or cuda)");
  if (choices.size() != p.tasks.size())
    throw InternalError("compile: " + std::to_string(choices.size()) + " programs for " +
                        std::to_string(p.tasks.size()) + " tasks");
  CompiledNetwork net;
  Impl& m = *net.impl_;
  m.name = g.name;
  m.target = target;
  if (cuda) m.arch = cuda_arch.empty() ? cuda_device_arch() : cuda_arch;
  else m.host = llvm_host_cpu();
  // Kernels, one per task (on the GPU, CUDA C of one translation unit). On the CPU, a
  // first stage that only rearranges an input that is constant in every group of the
  // task (a sketch's weight repacking) is split off and run here, once per group: the
  // kernel then reads the packed weight (core/ir/split_prologue.h).
  std::vector<LoweredFunc> gpu_funcs;
  std::vector<ConstantPrologue> prepack(p.tasks.size());
  for (size_t t = 0; t < p.tasks.size(); ++t) {
    const graph::NetworkTask& task = p.tasks[t];
    try {
      std::vector<sched::Sketch> sketches = sched::sketches_of_every_precision(task.graph, target);
      const sched::Sketch& s = sched::find_sketch(sketches, choices[t].sketch);
      LoweredFunc f = sched::lower_config(task.graph, s, choices[t].config);
      // int8: products of 8-bit integers, or 8-bit values alone in and out (a quantized
      // model's max pooling).
      const bool bytes_only =
          std::all_of(f.params.begin(), f.params.end(), [](const Buffer& b) { return b->dtype.is_byte(); });
      const std::string precision = s.bf16_pair >= 0                                    ? "bf16"
                                    : s.rule == sched::SketchRule::GpuMma               ? s.mma_precision
                                    : sched::integer_products(task.graph) || bytes_only ? "int8"
                                                                                        : "f32";
      if (!cuda && !task.constant_inputs.empty())
        if (std::optional<ConstantPrologue> c = compile_constant_prologue(&f, task.constant_inputs))
          prepack[t] = std::move(*c);
      std::optional<RuntimeExtentKernel> rk;
      if (!cuda && !runtime_extents.empty()) rk = with_runtime_iterations(f, runtime_extents);
      if (rk) f = rk->func;
      std::vector<std::pair<DType, int64_t>> params;
      for (const Buffer& b : f.params) {
        int64_t n = b->dtype.bytes();
        for (const Expr& e : b->shape) {
          if (e.kind() != ExprKind::IntImm) throw InternalError("a kernel parameter of symbolic shape");
          n *= e->ival;
        }
        params.push_back({b->dtype, n});
      }
      if (cuda) {
        f.name = "task" + std::to_string(t);
        m.kernels.push_back(
            {task.label, task.key, nullptr, cuda_kernel_name(f), gpu_launch(f), task.flops, params, precision, -1, {}});
        gpu_funcs.push_back(std::move(f));
      } else {
        LlvmOptions lo;
        lo.keep_object = true;
        m.kernels.push_back({task.label, task.key, compile_llvm(f, lo), "", {}, task.flops, params, precision, -1, {}});
        if (rk) {
          m.kernels.back().iter_param = rk->param;
          m.kernels.back().nests = std::move(rk->nests);
        }
      }
    } catch (const Error& e) {
      throw Error("compiling task " + std::to_string(t) + " (" + task.label + "): " + e.what());
    }
  }
  if (cuda && !p.tasks.empty()) m.cubin = compile_cuda(print_cuda_unit(gpu_funcs), m.name, m.arch).cubin;
  // Slots: one per value that is read or written at run time.
  std::vector<int> slot_of(g.values().size(), -1);
  std::vector<int> root(g.values().size(), -1);  // the arena tensor a value lives in (views: their source's)
  std::vector<int64_t> at(g.values().size(), 0);  // where in its root's storage (a slice view's offset)
  auto slot = [&](int v) {
    if (slot_of[v] >= 0) return slot_of[v];
    const graph::Value& val = g.value(v);
    Impl::Slot s;
    s.info = {val.name, val.dtype, val.shape, input_index_bound(g, v), input_is_divisor(g, v)};
    if (val.constant) {
      s.weight = static_cast<int>(m.weights.size());
      m.weights.push_back(val.data);
    }
    slot_of[v] = static_cast<int>(m.slots.size());
    m.slots.push_back(s);
    return slot_of[v];
  };
  // Arena tensors: graph inputs and group outputs; def and last-use step of each.
  struct Live {
    int value;
    int def, last;
  };
  std::vector<Live> live;
  std::map<int, int> live_of_root;
  auto define = [&](int v, int step) {
    root[v] = v;
    live_of_root[v] = static_cast<int>(live.size());
    live.push_back({v, step, step});
  };
  for (int v : g.inputs()) {
    slot(v);
    define(v, -1);
  }
  int step = 0;
  std::map<std::pair<int, int>, int> packed_slot;  // (task, constant value) -> its packed weight's slot
  auto packed = [&](int task, int v) {
    auto it = packed_slot.find({task, v});
    if (it != packed_slot.end()) return it->second;
    const ConstantPrologue& pp = prepack[static_cast<size_t>(task)];
    NDArray src = g.value(v).data;  // shares the constant's storage; the prologue only reads it
    NDArray out(pp.dtype, pp.shape);
    pp.kernel->run({&src, &out});
    Impl::Slot s;
    s.info = {g.value(v).name + ".packed", pp.dtype, pp.shape};
    s.weight = static_cast<int>(m.weights.size());
    m.weights.push_back(std::move(out));
    ++m.packed_weights;
    m.slots.push_back(s);
    const int id = static_cast<int>(m.slots.size()) - 1;
    packed_slot[{task, v}] = id;
    return id;
  };
  for (const graph::FusedGroup& fg : p.groups) {
    const int pre = fg.view || fg.task < 0 ? -1 : prepack[static_cast<size_t>(fg.task)].param;
    for (size_t i = 0; i < fg.inputs.size(); ++i) {
      const int v = fg.inputs[i];
      if (static_cast<int>(i) == pre) continue;  // read through its packed copy
      slot(v);
      if (root[v] >= 0) {
        Live& l = live[live_of_root[root[v]]];
        l.last = std::max(l.last, step);
      }
    }
    if (fg.view) {
      const graph::Value& in = g.value(fg.inputs.at(0));
      if (in.constant) throw InternalError("a view of constant '" + in.name + "' was not folded");
      root[fg.output] = root[fg.inputs[0]];
      at[fg.output] = at[fg.inputs[0]] + fg.view_offset;
      slot(fg.output);
      continue;
    }
    slot(fg.output);
    define(fg.output, step);
    Impl::Step st;
    st.kernel = fg.task;
    for (size_t i = 0; i < fg.inputs.size(); ++i)
      st.args.push_back(static_cast<int>(i) == pre ? packed(fg.task, fg.inputs[i]) : slot_of[fg.inputs[i]]);
    st.args.push_back(slot_of[fg.output]);
    m.steps.push_back(std::move(st));
    ++step;
  }
  for (int v : g.outputs()) {
    slot(v);
    if (root[v] >= 0) live[live_of_root[root[v]]].last = step;  // read after the last launch
  }
  // The plan: in definition order, each tensor takes the smallest free block that
  // fits (free: its last tenant's last reader ran before this tensor's producer), else
  // the arena grows.
  struct Block {
    int64_t offset, size;
    int free_after;
  };
  std::vector<Block> blocks;
  std::map<int, int64_t> offset_of_root;
  for (const Live& l : live) {
    int64_t need = align_up(m.slots[slot_of[l.value]].bytes());
    m.tensor_bytes += need;
    int best = -1;
    for (size_t b = 0; b < blocks.size(); ++b)
      if (blocks[b].free_after < l.def && blocks[b].size >= need && (best < 0 || blocks[b].size < blocks[best].size))
        best = static_cast<int>(b);
    if (best < 0 && !blocks.empty() && blocks.back().free_after < l.def) {
      // The last block is free but small: grow it.
      best = static_cast<int>(blocks.size()) - 1;
      m.arena_bytes += need - blocks[best].size;
      blocks[best].size = need;
    }
    if (best < 0) {
      blocks.push_back({m.arena_bytes, need, 0});
      m.arena_bytes += need;
      best = static_cast<int>(blocks.size()) - 1;
    }
    blocks[best].free_after = l.last;
    offset_of_root[l.value] = blocks[best].offset;
  }
  for (size_t v = 0; v < g.values().size(); ++v)
    if (slot_of[v] >= 0 && root[v] >= 0) m.slots[slot_of[v]].offset = offset_of_root.at(root[v]) + at[v];
  for (int v : g.inputs()) m.input_slots.push_back(slot_of[v]);
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    m.output_slots.push_back(slot_of[g.outputs()[i]]);
    m.output_names.push_back(g.output_name(i));
  }
  const std::string bad = m.invalid_step();
  if (!bad.empty()) throw InternalError("compile: " + bad);
  m.prepare();
  return net;
}

namespace {

// The extent of each ranged dimension in a call on `inputs` (checked: count, dtypes,
// ranks, fixed extents, one extent per dimension, inside its range).
std::map<std::string, int64_t> call_extents(const std::string& name, const ShapeRanges& r,
                                            const std::vector<TensorInfo>& infos, const std::vector<NDArray>& inputs) {
  if (inputs.size() != infos.size())
    throw Error("network '" + name + "' takes " + std::to_string(infos.size()) + " inputs, got " +
                std::to_string(inputs.size()));
  std::map<std::string, int64_t> v;
  std::map<std::string, std::string> from;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorInfo& t = infos[i];
    const std::vector<int64_t>& got = inputs[i].shape();
    std::string want = t.dtype.str() + " [";
    for (size_t a = 0; a < t.shape.size(); ++a)
      want += (a ? ", " : "") + (t.axis_dims[a].empty() ? std::to_string(t.shape[a]) : t.axis_dims[a]);
    want += "]";
    if (inputs[i].dtype() != t.dtype || got.size() != t.shape.size())
      throw Error("input '" + t.name + "' expects " + want + ", got " + inputs[i].dtype().str() + " " + shape_str(got));
    for (size_t a = 0; a < got.size(); ++a) {
      const std::string& d = t.axis_dims[a];
      if (d.empty()) {
        if (got[a] != t.shape[a])
          throw Error("input '" + t.name + "' expects " + want + ", got " + inputs[i].dtype().str() + " " +
                      shape_str(got) + " (axis " + std::to_string(a) + " is fixed)");
        continue;
      }
      auto [it, fresh] = v.emplace(d, got[a]);
      if (fresh) from[d] = t.name;
      else if (it->second != got[a])
        throw Error("'" + d + "' is " + std::to_string(it->second) + " in input '" + from[d] + "' and " +
                    std::to_string(got[a]) + " in input '" + t.name + "'");
    }
  }
  for (const graph::DimRange& d : r.dims) {
    const int64_t x = v.at(d.name);
    if (x < d.lo || x > d.hi)
      throw Error("input '" + from[d.name] + "': '" + d.name + "' = " + std::to_string(x) +
                  " is outside the range the network was compiled for, " + std::to_string(d.lo) + ".." +
                  std::to_string(d.hi));
  }
  return v;
}

}  // namespace

bool CompiledNetwork::is_ranged() const { return impl_->is_ranged(); }
const ShapeRanges& CompiledNetwork::ranges() const { return impl_->ranges; }
int CompiledNetwork::buckets() const { return impl_->is_ranged() ? static_cast<int>(impl_->buckets.size()) : 1; }
CompiledNetwork& CompiledNetwork::bucket(int i) {
  if (!impl_->is_ranged() || i < 0 || i >= buckets()) throw InternalError("bucket " + std::to_string(i) + " of none");
  return impl_->buckets[static_cast<size_t>(i)];
}
std::map<std::string, int64_t> CompiledNetwork::bucket_extents(int i) const {
  if (!impl_->is_ranged()) return {};
  return impl_->bucket_at.at(static_cast<size_t>(i));
}

int CompiledNetwork::dispatch(const std::vector<NDArray>& inputs, std::vector<NDArray>* bucket_inputs,
                              std::map<std::string, int64_t>* extents) const {
  const Impl& m = *impl_;
  if (!m.is_ranged()) {
    if (bucket_inputs) *bucket_inputs = inputs;
    return 0;
  }
  const std::map<std::string, int64_t> v = call_extents(m.name, m.ranges, m.input_info, inputs);
  // The least bucket holding the call: every extent >= the call's, the fewest positions.
  int best = -1;
  double best_size = 0;
  for (size_t b = 0; b < m.buckets.size(); ++b) {
    double size = 1;
    bool holds = true;
    for (const auto& [d, x] : v) {
      const int64_t e = m.bucket_at[b].at(d);
      holds = holds && e >= x;
      size *= static_cast<double>(e);
    }
    if (holds && (best < 0 || size < best_size)) best = static_cast<int>(b), best_size = size;
  }
  if (best < 0) throw InternalError("dispatch: no bucket holds the call");
  if (extents) *extents = v;
  if (bucket_inputs) {
    const CompiledNetwork& bn = m.buckets[static_cast<size_t>(best)];
    bucket_inputs->clear();
    for (size_t i = 0; i < inputs.size(); ++i)
      bucket_inputs->push_back(graph::pad_array(inputs[i], bn.inputs()[i].shape));
    for (const std::string& d : m.ranges.masks) {
      bucket_inputs->push_back(graph::padding_mask(m.bucket_at[static_cast<size_t>(best)].at(d), v.at(d)));
    }
  }
  return best;
}

CompiledNetwork CompiledNetwork::ranged(std::vector<CompiledNetwork> buckets, const ShapeRanges& ranges) {
  if (buckets.empty()) throw InternalError("ranged: no bucket");
  CompiledNetwork net;
  Impl& m = *net.impl_;
  const Impl& top = *buckets.back().impl_;
  m.name = top.name;
  m.target = top.target;
  m.host = top.host;
  m.arch = top.arch;
  m.ranges = ranges;
  m.buckets = std::move(buckets);
  m.assemble_ranged();
  return net;
}

void CompiledNetwork::Impl::find_ranged_axes() {
  // Each bucket's tensors by name (nullptr: two tensors of the name, neither).
  std::vector<std::map<std::string, const TensorInfo*>> by_name(buckets.size());
  for (size_t c = 0; c < buckets.size(); ++c)
    for (const Slot& s : buckets[c].impl_->slots) {
      auto [it, fresh] = by_name[c].emplace(s.info.name, &s.info);
      if (!fresh) it->second = nullptr;
    }
  for (size_t b = 0; b < buckets.size(); ++b) {
    Impl& bi = *buckets[b].impl_;
    for (Step& st : bi.steps) {
      st.dim.clear();
      st.axis = -1;
    }
    for (const graph::DimRange& d : ranges.dims) {
      // The buckets that differ from this one in d alone, the nearest extent first: a
      // small extent's graph can differ in structure (the importer folds more there),
      // and its tensors' names then need not match.
      const std::map<std::string, int64_t>& at = bucket_at[b];
      const int64_t e1 = at.at(d.name);
      std::vector<size_t> others;
      for (size_t c = 0; c < buckets.size(); ++c) {
        bool alone = c != b && bucket_at[c].at(d.name) != e1;
        for (const auto& [name, x] : at)
          if (name != d.name) alone = alone && bucket_at[c].at(name) == x;
        if (alone) others.push_back(c);
      }
      auto distance = [&](size_t c) {
        return std::abs(std::log(static_cast<double>(bucket_at[c].at(d.name)) / static_cast<double>(e1)));
      };
      std::stable_sort(others.begin(), others.end(), [&](size_t x, size_t y) { return distance(x) < distance(y); });
      for (Step& st : bi.steps) {
        if (bi.kernels[static_cast<size_t>(st.kernel)].iter_param < 0) continue;
        const TensorInfo& t1 = bi.slots[static_cast<size_t>(st.args.back())].info;
        for (size_t c : others) {
          const int64_t e2 = bucket_at[c].at(d.name);
          const auto it = by_name[c].find(t1.name);
          const TensorInfo* t2 = it == by_name[c].end() ? nullptr : it->second;
          if (!t2 || t1.shape.size() != t2->shape.size() || t1.dtype != t2->dtype) continue;
          int axis = -1;
          bool pure = true;
          for (size_t a = 0; a < t1.shape.size(); ++a) {
            if (t1.shape[a] == t2->shape[a]) continue;
            if (t1.shape[a] == e1 && t2->shape[a] == e2) {
              if (axis < 0) axis = static_cast<int>(a);
            } else {
              pure = false;  // an axis that grows otherwise (two dimensions flattened into one)
            }
          }
          if (!pure || axis < 0) continue;
          if (st.axis < 0 || axis < st.axis) {
            st.dim = d.name;
            st.axis = axis;
          }
          break;
        }
      }
    }
  }
}

void CompiledNetwork::Impl::assemble_ranged() {
  Impl& m = *this;
  const ShapeRanges& r = m.ranges;
  const size_t n_in = r.input_axes.size();
  graph::ConstantPool pool;
  m.arena_bytes = 0;
  m.bucket_at.clear();
  for (CompiledNetwork& b : m.buckets) {
    Impl& bi = *b.impl_;
    if (bi.is_ranged() || bi.target != m.target || bi.host != m.host || bi.arch != m.arch)
      throw InternalError("ranged: a bucket of another target, or itself ranged");
    if (bi.input_info.size() != n_in + r.masks.size() || bi.output_info.size() != r.output_axes.size())
      throw InternalError("ranged: a bucket's inputs or outputs do not match the ranges");
    std::map<std::string, int64_t> at;
    for (size_t i = 0; i < n_in; ++i) {
      const std::vector<int64_t>& shape = bi.input_info[i].shape;
      if (shape.size() != r.input_axes[i].size()) throw InternalError("ranged: an input's rank differs from its axes'");
      for (size_t a = 0; a < shape.size(); ++a) {
        const std::string& d = r.input_axes[i][a];
        if (d.empty()) continue;
        auto [it, fresh] = at.emplace(d, shape[a]);
        if (!fresh && it->second != shape[a]) throw InternalError("ranged: a bucket's inputs disagree on '" + d + "'");
      }
    }
    for (const graph::DimRange& d : r.dims)
      if (!at.count(d.name)) throw InternalError("ranged: no input carries '" + d.name + "'");
    for (size_t k = 0; k < r.masks.size(); ++k)
      if (bi.input_info[n_in + k].shape != std::vector<int64_t>{at.at(r.masks[k])} ||
          bi.input_info[n_in + k].dtype != DType::f32())
        throw InternalError("ranged: a bucket's mask of '" + r.masks[k] + "' has the wrong shape");
    for (size_t o = 0; o < r.output_axes.size(); ++o)
      if (bi.output_info[o].shape.size() != r.output_axes[o].size())
        throw InternalError("ranged: an output's rank differs from its axes'");
    m.bucket_at.push_back(at);
    for (NDArray& w : bi.weights) pool.share(w);
    m.arena_bytes = std::max(m.arena_bytes, bi.arena_bytes);
  }
  find_ranged_axes();
  // One arena, the largest bucket's; each bucket's pointers again (its weights shared).
  if (m.target == "llvm") {
    const size_t alloc = static_cast<size_t>(align_up(std::max<int64_t>(m.arena_bytes, kAlign)));
    auto* a = static_cast<uint8_t*>(std::aligned_alloc(kAlign, alloc));
    if (!a) throw RuntimeError("cannot allocate the network's " + std::to_string(m.arena_bytes) + "-byte arena");
    std::memset(a, 0, alloc);
    std::shared_ptr<uint8_t> arena(a, AlignedFree());
    for (CompiledNetwork& b : m.buckets) b.impl_->prepare(arena);
  }
  const Impl& top = *m.buckets.back().impl_;
  m.input_info.assign(top.input_info.begin(), top.input_info.begin() + static_cast<std::ptrdiff_t>(n_in));
  for (size_t i = 0; i < n_in; ++i) m.input_info[i].axis_dims = r.input_axes[i];
  m.output_info = top.output_info;
  for (size_t o = 0; o < m.output_info.size(); ++o) m.output_info[o].axis_dims = r.output_axes[o];
}

std::vector<NDArray> CompiledNetwork::run(const std::vector<NDArray>& inputs) {
  Impl& m = *impl_;
  if (m.is_ranged()) {
    std::vector<NDArray> in;
    std::map<std::string, int64_t> v;
    const int b = dispatch(inputs, &in, &v);
    CompiledNetwork& bn = m.buckets[static_cast<size_t>(b)];
    std::vector<NDArray> out = bn.impl_->at_call(v, [&] { return bn.run(in); });
    for (size_t o = 0; o < out.size(); ++o) {
      std::vector<int64_t> shape = out[o].shape();
      for (size_t a = 0; a < shape.size(); ++a)
        if (!m.ranges.output_axes[o][a].empty()) shape[a] = v.at(m.ranges.output_axes[o][a]);
      out[o] = graph::cut_array(out[o], shape);
    }
    return out;
  }
  if (inputs.size() != m.input_slots.size())
    throw Error("network '" + m.name + "' takes " + std::to_string(m.input_slots.size()) + " inputs, got " +
                std::to_string(inputs.size()));
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Impl::Slot& s = m.slots[m.input_slots[i]];
    if (inputs[i].dtype() != s.info.dtype || inputs[i].shape() != s.info.shape)
      throw Error("input '" + s.info.name + "' expects " + s.info.dtype.str() + " " + shape_str(s.info.shape) +
                  ", got " + inputs[i].dtype().str() + " " + shape_str(inputs[i].shape()));
    // Indices outside the table they index are an error, as in ONNX Runtime (the
    // kernels clamp them, so as never to read outside the table, but a clamped index
    // is a wrong answer); negative ones count from the end, as ONNX's Gather says.
    if (s.info.index_bound > 0)
      for (int64_t k = 0; k < inputs[i].numel(); ++k) {
        const int64_t v = inputs[i].get_int(k);
        if (v < -s.info.index_bound || v >= s.info.index_bound)
          throw Error("input '" + s.info.name + "': index " + std::to_string(v) + " (element " + std::to_string(k) +
                      ") is outside [-" + std::to_string(s.info.index_bound) + ", " +
                      std::to_string(s.info.index_bound) + "), the table it indexes");
      }
    if (s.info.divisor)
      for (int64_t k = 0; k < inputs[i].numel(); ++k)
        if (inputs[i].get_int(k) == 0)
          throw Error("input '" + s.info.name + "': integer division by zero (element " + std::to_string(k) +
                      " is 0 and divides)");
  }
  if (m.target == "cuda") {
    m.prepare_gpu();
    for (size_t i = 0; i < inputs.size(); ++i)
      m.gpu->upload(m.gpu_ptr(m.input_slots[i]), inputs[i].data(), inputs[i].nbytes());
    for (size_t i = 0; i < m.steps.size(); ++i) m.gpu->launch(m.steps[i].kernel, m.gpu_args[i]);
    m.gpu->synchronize();
    std::vector<NDArray> out;
    for (int s : m.output_slots) {
      NDArray a(m.slots[s].info.dtype, m.slots[s].info.shape);
      m.gpu->download(a.data(), m.gpu_ptr(s), a.nbytes());
      out.push_back(std::move(a));
    }
    return out;
  }
  for (size_t i = 0; i < inputs.size(); ++i) std::memcpy(m.ptr(m.input_slots[i]), inputs[i].data(), inputs[i].nbytes());
  for (size_t i = 0; i < m.steps.size(); ++i) m.launch(i);
  std::vector<NDArray> out;
  for (int s : m.output_slots) {
    NDArray a(m.slots[s].info.dtype, m.slots[s].info.shape);
    std::memcpy(a.data(), m.ptr(s), a.nbytes());
    out.push_back(std::move(a));
  }
  return out;
}

Timing CompiledNetwork::time(const std::vector<NDArray>& inputs, const TimingOptions& opt) {
  return time_function([&] { run(inputs); }, opt);
}

NetworkProfile CompiledNetwork::profile(const std::vector<NDArray>& inputs, int rounds) {
  Impl& m = *impl_;
  if (m.is_ranged()) {
    std::vector<NDArray> in;
    std::map<std::string, int64_t> v;
    const int b = dispatch(inputs, &in, &v);
    CompiledNetwork& bn = m.buckets[static_cast<size_t>(b)];
    return bn.impl_->at_call(v, [&] { return bn.profile(in, rounds); });
  }
  if (m.target != "llvm")
    throw Error("basin profile times CPU networks only; '" + m.name + "' is compiled for " + m.target);
  if (rounds < 1) throw Error("profile: rounds must be at least 1, got " + std::to_string(rounds));
  using clock = std::chrono::steady_clock;
  auto us = [](clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); };
  NetworkProfile p;
  p.launches.resize(m.steps.size());
  for (size_t i = 0; i < m.steps.size(); ++i) {
    const Impl::Step& st = m.steps[i];
    const Impl::Kernel& k = m.kernels[st.kernel];
    KernelProfile& kp = p.launches[i];
    kp.label = k.label;
    kp.task_key = k.task_key;
    kp.kernel = st.kernel;
    kp.flops = k.flops;
    kp.precision = k.precision;
    for (int a : st.args) kp.bytes += m.slots[a].bytes();
    kp.us = 1e300;
  }
  run(inputs);  // warm-up: the arena, the weights and the code in cache
  p.run_us = p.kernels_us = 1e300;
  for (int r = 0; r < rounds; ++r) {
    // One whole run timed as a whole, then one timed launch by launch.
    auto t0 = clock::now();
    run(inputs);
    p.run_us = std::min(p.run_us, us(clock::now() - t0));
    for (size_t i = 0; i < inputs.size(); ++i)
      std::memcpy(m.ptr(m.input_slots[i]), inputs[i].data(), inputs[i].nbytes());
    double round_us = 0;
    for (size_t i = 0; i < m.steps.size(); ++i) {
      auto a = clock::now();
      m.launch(i);
      const double t = us(clock::now() - a);
      p.launches[i].us = std::min(p.launches[i].us, t);
      round_us += t;
    }
    // The fastest round's sum, as run_us is the fastest whole run: the launches' own
    // minimums, each from its luckiest round, sum to less than any one round does.
    p.kernels_us = std::min(p.kernels_us, round_us);
  }
  return p;
}

const std::string& CompiledNetwork::name() const { return impl_->name; }
int CompiledNetwork::kernels_of_precision(const std::string& precision) const {
  int n = 0;
  for (const CompiledNetwork& b : impl_->buckets) n += b.kernels_of_precision(precision);
  for (const auto& k : impl_->kernels) n += k.precision == precision;
  return n;
}

const std::string& CompiledNetwork::target() const { return impl_->target; }
const std::string& CompiledNetwork::cuda_arch() const { return impl_->arch; }
std::string CompiledNetwork::compiled_for_cpu() const { return llvm_cpu_name(impl_->host); }
const std::vector<TensorInfo>& CompiledNetwork::inputs() const { return impl_->input_info; }
const std::vector<TensorInfo>& CompiledNetwork::outputs() const { return impl_->output_info; }
int CompiledNetwork::kernels() const {
  int n = static_cast<int>(impl_->kernels.size());
  for (const CompiledNetwork& b : impl_->buckets) n += b.kernels();
  return n;
}
int CompiledNetwork::launches() const {
  return impl_->is_ranged() ? impl_->buckets.back().launches() : static_cast<int>(impl_->steps.size());
}
int CompiledNetwork::runtime_extent_launches() const {
  if (!impl_->is_ranged()) return 0;
  int n = 0;
  for (const Impl::Step& st : impl_->buckets.back().impl_->steps) n += !st.dim.empty();
  return n;
}
int64_t CompiledNetwork::arena_bytes() const { return impl_->arena_bytes; }
int CompiledNetwork::packed_weights() const {
  return impl_->is_ranged() ? impl_->buckets.back().packed_weights() : impl_->packed_weights;
}
const Accuracy& CompiledNetwork::accuracy() const { return impl_->accuracy; }
void CompiledNetwork::set_accuracy(const Accuracy& a) { impl_->accuracy = a; }
int64_t CompiledNetwork::tensor_bytes() const {
  return impl_->is_ranged() ? impl_->buckets.back().tensor_bytes() : impl_->tensor_bytes;
}
int64_t CompiledNetwork::weight_bytes() const {
  // Weights that buckets share counted once.
  std::set<const void*> seen;
  int64_t b = 0;
  auto add = [&](const std::vector<NDArray>& ws) {
    for (const NDArray& w : ws)
      if (seen.insert(w.data()).second) b += static_cast<int64_t>(w.nbytes());
  };
  add(impl_->weights);
  for (const CompiledNetwork& n : impl_->buckets) add(n.impl_->weights);
  return b;
}

nlohmann::json CompiledNetwork::Impl::header(Blob& blob) const {
  const Impl& m = *this;
  nlohmann::json h;
  h["version"] = 2;
  h["name"] = m.name;
  h["target"] = m.target;
  h["host_cpu"] = m.host;
  h["arch"] = m.arch;
  h["arena_bytes"] = m.arena_bytes;
  h["packed_weights"] = m.packed_weights;
  h["tensor_bytes"] = m.tensor_bytes;
  if (m.accuracy.measured)
    h["accuracy"] = {{"note", m.accuracy.note},
                     {"max_rel", m.accuracy.max_rel},
                     {"max_abs", m.accuracy.max_abs},
                     {"top1_agree", m.accuracy.top1_agree},
                     {"top1_rows", m.accuracy.top1_rows}};
  if (m.is_ranged()) {
    nlohmann::json dims = nlohmann::json::array();
    for (const graph::DimRange& d : m.ranges.dims) dims.push_back({{"name", d.name}, {"lo", d.lo}, {"hi", d.hi}});
    h["ranges"] = {{"dims", dims},
                   {"input_axes", m.ranges.input_axes},
                   {"output_axes", m.ranges.output_axes},
                   {"masks", m.ranges.masks}};
    h["buckets"] = nlohmann::json::array();
    for (const CompiledNetwork& b : m.buckets) h["buckets"].push_back(b.impl_->header(blob));
    return h;
  }
  // The machine code: each kernel's object (llvm), or the one cubin (cuda).
  h["kernels"] = nlohmann::json::array();
  if (m.target == "cuda") {
    h["cubin"] = {{"offset", blob.add(m.cubin)}, {"size", m.cubin.size()}};
    for (const auto& k : m.kernels)
      h["kernels"].push_back({{"label", k.label},
                              {"task_key", k.task_key},
                              {"name", k.cuda_name},
                              {"flops", k.flops},
                              {"precision", k.precision},
                              {"grid", {k.launch.grid[0], k.launch.grid[1], k.launch.grid[2]}},
                              {"block", {k.launch.block[0], k.launch.block[1], k.launch.block[2]}}});
  } else {
    for (const auto& k : m.kernels) {
      const std::string& code = k.k->object();
      h["kernels"].push_back({{"label", k.label},
                              {"task_key", k.task_key},
                              {"flops", k.flops},
                              {"precision", k.precision},
                              {"offset", blob.add(code)},
                              {"size", code.size()}});
      if (k.iter_param >= 0) {
        nlohmann::json nests = nlohmann::json::array();
        for (const RuntimeNest& n : k.nests) nests.push_back({{"extent", n.extent}, {"first", n.first}, {"last", n.last}});
        h["kernels"].back()["iterations"] = {{"param", k.iter_param}, {"nests", nests}};
      }
    }
  }
  h["weights"] = nlohmann::json::array();
  for (const NDArray& w : m.weights) h["weights"].push_back({{"offset", blob.add_weight(w)}, {"size", w.nbytes()}});
  for (const auto& s : m.slots) {
    h["slots"].push_back({{"name", s.info.name},
                          {"dtype", s.info.dtype.str()},
                          {"shape", s.info.shape},
                          {"weight", s.weight},
                          {"offset", s.offset}});
    if (s.info.index_bound > 0) h["slots"].back()["index_bound"] = s.info.index_bound;
    if (s.info.divisor) h["slots"].back()["divisor"] = true;
  }
  for (size_t i = 0; i < m.kernels.size(); ++i) {
    nlohmann::json ps = nlohmann::json::array();
    for (const auto& [dt, bytes] : m.kernels[i].params) ps.push_back({dt.str(), bytes});
    h["kernels"][i]["params"] = ps;
  }
  h["inputs"] = m.input_slots;
  h["outputs"] = m.output_slots;
  h["output_names"] = m.output_names;
  h["steps"] = nlohmann::json::array();
  for (const auto& s : m.steps) h["steps"].push_back({{"kernel", s.kernel}, {"args", s.args}});
  return h;
}

void CompiledNetwork::save(const std::string& path, const std::vector<std::string>& inputs) const {
  Blob blob;
  const std::string text = impl_->header(blob).dump();
  write_output_file(
      path,
      [&](OutputFile& f) {
        uint64_t n = text.size();
        Sha256 sum;
        sum.update(text);
        for (std::string_view c : blob.chunks) sum.update(c.data(), c.size());
        const std::array<uint8_t, 32> digest = sum.digest();
        f.write(kMagic, sizeof kMagic - 1);
        f.write(&n, sizeof n);
        f.write(digest.data(), digest.size());
        f.write(text);
        for (std::string_view c : blob.chunks) f.write(c.data(), c.size());
      },
      inputs);
}

// Any version's magic ("BASINNET" and a digit): load() says what to do with an old one
// rather than a reader of ONNX calling it invalid.
bool CompiledNetwork::is_compiled_file(const std::string& path) {
  const size_t n = sizeof kMagic - 1;
  std::string head(n, '\0');
  std::ifstream f(path, std::ios::binary);
  return f.read(head.data(), static_cast<std::streamsize>(n)) && head.compare(0, 8, "BASINNET") == 0 &&
         std::isdigit(static_cast<unsigned char>(head[8])) && head[9] == '\n';
}

namespace {

Accuracy accuracy_from(const nlohmann::json& a) {
  Accuracy r;
  r.measured = true;
  r.note = a.at("note").get<std::string>();
  r.max_rel = a.at("max_rel").get<double>();
  r.max_abs = a.at("max_abs").get<double>();
  r.top1_agree = a.at("top1_agree").get<int>();
  r.top1_rows = a.at("top1_rows").get<int>();
  return r;
}

}  // namespace

void CompiledNetwork::Impl::parse(const nlohmann::json& h, const std::string& data, size_t blob0,
                                  const std::string& path, std::map<std::pair<uint64_t, uint64_t>, NDArray>& loaded) {
  Impl& m = *this;
  std::vector<bool> named;  // per weight: whether a tensor is stored in it
  if (h.at("version").get<int>() != 2) throw ParseError("'" + path + "': unsupported version");
  m.name = h.at("name").get<std::string>();
  m.target = h.value("target", "llvm");
  m.host = h.at("host_cpu").get<std::string>();
  m.arch = h.value("arch", "");
  if (m.target != "llvm" && m.target != "cuda") throw ParseError("'" + path + "': unknown target '" + m.target + "'");
  // Machine code for another CPU runs here when it uses no feature this process's
  // kernels may not (a network compiled under BASIN_VECTOR_ISA=avx2 runs on the
  // AVX-512 CPU it was compiled on; one from an AVX-512 machine does not run on AVX2).
  const std::string here = m.target == "llvm" ? llvm_host_cpu() : "";
  if (m.target == "llvm" && m.host != here) {
    const std::vector<std::string> missing = missing_cpu_features(m.host);
    if (!missing.empty()) {
      std::string names;
      for (const std::string& f : missing) names += (names.empty() ? "" : ", ") + f;
      throw Error("'" + path + "' was compiled for CPU '" + llvm_cpu_name(m.host) + "' with instructions this one ('" +
                  llvm_cpu_name(here) + "'" +
                  (this_host().vector_isa != cpu_vector_isa() ? ", BASIN_VECTOR_ISA=" + this_host().vector_isa : "") +
                  ") may not use (" + names + "): compile it again here");
    }
  }
  m.arena_bytes = h.at("arena_bytes").get<int64_t>();
  if (m.arena_bytes < 0 || m.arena_bytes > max_tensor_bytes())
    throw ParseError("'" + path + "': an arena of " + std::to_string(m.arena_bytes) + " bytes");
  m.tensor_bytes = h.at("tensor_bytes").get<int64_t>();
  m.packed_weights = h.value("packed_weights", 0);
  if (h.contains("accuracy")) m.accuracy = accuracy_from(h.at("accuracy"));
  auto bytes = [&](const nlohmann::json& j) {
    uint64_t off = j.at("offset").get<uint64_t>(), size = j.at("size").get<uint64_t>();
    if (off > data.size() - blob0 || size > data.size() - blob0 - off) throw ParseError("'" + path + "' is truncated");
    return std::pair<size_t, size_t>(blob0 + off, size);
  };
  auto params_of = [&](const nlohmann::json& k) {
    std::vector<std::pair<DType, int64_t>> ps;
    for (const auto& p : k.at("params")) {
      const int64_t b = p.at(1).get<int64_t>();
      if (b < 0) throw ParseError("'" + path + "': a kernel parameter of negative size");
      ps.push_back({DType::parse(p.at(0).get<std::string>()), b});
    }
    return ps;
  };
  if (m.target == "cuda") {
    auto [off, size] = bytes(h.at("cubin"));
    m.cubin = data.substr(off, size);
    for (const auto& k : h.at("kernels")) {
      GpuLaunch l;
      auto grid = k.at("grid").get<std::vector<int64_t>>(), block = k.at("block").get<std::vector<int64_t>>();
      if (grid.size() != 3 || block.size() != 3) throw ParseError("'" + path + "': a kernel's launch is malformed");
      for (int d = 0; d < 3; ++d) {
        l.grid[d] = grid[d];
        l.block[d] = block[d];
      }
      m.kernels.push_back({k.at("label").get<std::string>(), k.at("task_key").get<std::string>(), nullptr,
                           k.at("name").get<std::string>(), l, k.value("flops", 0.0), params_of(k),
                           k.value("precision", "f32"), -1, {}});
    }
  } else {
    for (const auto& k : h.at("kernels")) {
      auto [off, size] = bytes(k);
      m.kernels.push_back({k.at("label").get<std::string>(),
                           k.at("task_key").get<std::string>(),
                           load_llvm_object(data.substr(off, size)),
                           "",
                           {},
                           k.value("flops", 0.0),
                           params_of(k),
                           k.value("precision", "f32"),
                           -1,
                           {}});
      if (k.contains("iterations")) {
        // Checked against the launches' arguments with the rest (invalid_step).
        const nlohmann::json& it = k.at("iterations");
        Kernel& kk = m.kernels.back();
        kk.iter_param = it.at("param").get<int>();
        for (const auto& n : it.at("nests")) {
          RuntimeNest rn;
          rn.extent = n.at("extent").get<int64_t>();
          rn.first = n.at("first").get<std::vector<int64_t>>();
          rn.last = n.at("last").get<std::vector<int64_t>>();
          if (rn.extent < 1 || rn.extent > (int64_t{1} << 24) || rn.first.size() != static_cast<size_t>(rn.extent) ||
              rn.last.size() != static_cast<size_t>(rn.extent))
            throw ParseError("'" + path + "': a kernel's iterations are malformed");
          kk.nests.push_back(std::move(rn));
        }
        if (kk.iter_param < 0 || kk.iter_param >= static_cast<int>(kk.params.size()))
          throw ParseError("'" + path + "': a kernel's iterations parameter is out of range");
      }
    }
  }
  std::vector<std::pair<uint64_t, uint64_t>> wb;
  for (const auto& w : h.at("weights")) wb.push_back(bytes(w));
  named.assign(wb.size(), false);
  for (const auto& s : h.at("slots")) {
    Impl::Slot sl;
    sl.info = {s.at("name").get<std::string>(), DType::parse(s.at("dtype").get<std::string>()),
               s.at("shape").get<std::vector<int64_t>>(), s.value("index_bound", int64_t{0}),
               s.value("divisor", false)};
    sl.weight = s.at("weight").get<int>();
    sl.offset = s.at("offset").get<int64_t>();
    // Sizes from the file are bounded before any arithmetic on them.
    int64_t size = sl.info.dtype.bytes();
    for (int64_t e : sl.info.shape) {
      if (e < 0 || (e > 0 && size > (int64_t{1} << 50) / e))
        throw ParseError("'" + path + "': tensor '" + sl.info.name + "' has an invalid shape " +
                         shape_str(sl.info.shape));
      size *= e;
    }
    // Kernels may move 64 and 128 bits at a time (a GPU's vector accesses need them
    // aligned): every arena tensor starts at a multiple of kAlign, as the plan lays it.
    if (sl.weight < 0 && sl.offset % kAlign != 0)
      throw ParseError("'" + path + "': tensor '" + sl.info.name + "' is not aligned to " + std::to_string(kAlign) +
                       " bytes in the arena (offset " + std::to_string(sl.offset) + ")");
    // (offset > arena - bytes, not offset + bytes > arena: a sum near 2^63 would wrap)
    if (sl.weight >= static_cast<int>(wb.size()) || sl.offset < 0 ||
        (sl.weight < 0 && (sl.bytes() > m.arena_bytes || sl.offset > m.arena_bytes - sl.bytes())))
      throw ParseError("'" + path + "': tensor '" + sl.info.name + "' lies outside its storage");
    if (sl.weight >= 0) {
      if (m.weights.empty()) m.weights.resize(wb.size());
      // Bytes that buckets share: one array.
      auto it = loaded.find(wb[sl.weight]);
      if (it == loaded.end() || it->second.dtype() != sl.info.dtype || it->second.shape() != sl.info.shape) {
        NDArray fresh(sl.info.dtype, sl.info.shape);
        if (fresh.nbytes() != wb[sl.weight].second)
          throw ParseError("'" + path + "': weight '" + sl.info.name + "' has the wrong size");
        std::memcpy(fresh.data(), data.data() + wb[sl.weight].first, fresh.nbytes());
        it = loaded.insert_or_assign(wb[sl.weight], fresh).first;
      }
      const NDArray& a = it->second;
      m.weights[sl.weight] = a;
      named[static_cast<size_t>(sl.weight)] = true;
    }
    m.slots.push_back(std::move(sl));
  }
  auto check_slot = [&](int s) {
    if (s < 0 || s >= static_cast<int>(m.slots.size()))
      throw ParseError("'" + path + "': a tensor index is out of range");
    return s;
  };
  for (int s : h.at("inputs").get<std::vector<int>>()) m.input_slots.push_back(check_slot(s));
  for (int s : h.at("outputs").get<std::vector<int>>()) m.output_slots.push_back(check_slot(s));
  if (h.contains("output_names")) {  // files written before outputs kept their names have none
    const auto& names = h.at("output_names");
    if (!names.is_array() || names.size() != m.output_slots.size())
      throw ParseError("'" + path + "': the output names do not match the outputs");
    for (const auto& n : names) {
      if (!n.is_string()) throw ParseError("'" + path + "': an output name is not a string");
      m.output_names.push_back(n.get<std::string>());
    }
  }
  for (const auto& s : h.at("steps")) {
    Impl::Step st;
    st.kernel = s.at("kernel").get<int>();
    if (st.kernel < 0 || st.kernel >= static_cast<int>(m.kernels.size()))
      throw ParseError("'" + path + "': bad kernel index");
    for (int a : s.at("args").get<std::vector<int>>()) st.args.push_back(check_slot(a));
    m.steps.push_back(std::move(st));
  }
  if (std::find(named.begin(), named.end(), false) != named.end())
    throw ParseError("'" + path + "': a weight no tensor names");
  const std::string bad = m.invalid_step();
  if (!bad.empty()) throw ParseError("'" + path + "': " + bad);
}

CompiledNetwork CompiledNetwork::load(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw NotFoundError("cannot open compiled network '" + path + "'");
  std::string data = read_rest(f);
  const size_t magic = sizeof kMagic - 1, head = magic + 8 + kDigest;
  if (data.compare(0, magic, kOldMagic) == 0)
    throw ParseError("'" + path + "' was written by an older basin (format 1): compile the network again");
  if (data.size() < head || data.compare(0, magic, kMagic) != 0)
    throw ParseError("'" + path + "' is not a compiled basin network (bad magic)");
  uint64_t n = 0;
  std::memcpy(&n, data.data() + magic, sizeof n);
  if (n > data.size() - head) throw ParseError("'" + path + "' is truncated (header)");
  if (sha256_bytes(std::string_view(data).substr(head)) != data.substr(magic + 8, kDigest))
    throw ParseError("'" + path + "' is corrupt or truncated (SHA-256 mismatch)");
  const size_t blob0 = head + n;
  CompiledNetwork net;
  Impl& m = *net.impl_;
  std::map<std::pair<uint64_t, uint64_t>, NDArray> loaded;
  try {
    nlohmann::json h = nlohmann::json::parse(data.substr(head, n));
    if (!h.contains("buckets")) {
      m.parse(h, data, blob0, path, loaded);
    } else {
      if (h.at("version").get<int>() != 2) throw ParseError("'" + path + "': unsupported version");
      m.name = h.at("name").get<std::string>();
      m.target = h.value("target", "llvm");
      m.host = h.at("host_cpu").get<std::string>();
      m.arch = h.value("arch", "");
      if (h.contains("accuracy")) m.accuracy = accuracy_from(h.at("accuracy"));
      const nlohmann::json& r = h.at("ranges");
      for (const auto& d : r.at("dims")) {
        graph::DimRange dr{d.at("name").get<std::string>(), d.at("lo").get<int64_t>(), d.at("hi").get<int64_t>()};
        if (dr.lo < 1 || dr.hi < dr.lo) throw ParseError("'" + path + "': the range of '" + dr.name + "' is empty");
        m.ranges.dims.push_back(dr);
      }
      m.ranges.input_axes = r.at("input_axes").get<std::vector<std::vector<std::string>>>();
      m.ranges.output_axes = r.at("output_axes").get<std::vector<std::vector<std::string>>>();
      m.ranges.masks = r.at("masks").get<std::vector<std::string>>();
      for (const auto& bj : h.at("buckets")) {
        CompiledNetwork b;
        b.impl_->parse(bj, data, blob0, path, loaded);
        b.impl_->prepare_infos();
        m.buckets.push_back(std::move(b));
      }
      if (m.buckets.empty()) throw ParseError("'" + path + "': a ranged network without buckets");
    }
  } catch (const nlohmann::json::exception& e) {
    throw ParseError("'" + path + "' has a corrupt header: " + e.what());
  }
  if (m.is_ranged()) {
    try {
      m.assemble_ranged();
    } catch (const InternalError& e) {
      throw ParseError("'" + path + "': its buckets do not match its ranges (" + e.what() + ")");
    }
  } else {
    m.prepare();
  }
  return net;
}

std::vector<NDArray> random_inputs(const std::vector<TensorInfo>& infos) {
  std::vector<NDArray> in;
  uint64_t seed = 1;
  for (const auto& t : infos) {
    bool integer = t.dtype == DType::i64() || t.dtype == DType::i32();
    // Indices within their table (TensorInfo::index_bound); other integers small.
    const int64_t hi = t.index_bound > 0 ? t.index_bound : 100;
    const double lo = integer ? (t.divisor ? 1 : 0) : -1;  // divisors are never 0
    in.push_back(NDArray::random(t.dtype, t.shape, lo, integer ? static_cast<double>(hi) : 1, seed++));
  }
  return in;
}

Accuracy measure_accuracy(const graph::Graph& g, CompiledNetwork& net, const std::vector<NDArray>& inputs,
                          const std::string& inputs_note) {
  Accuracy a;
  std::vector<NDArray> ref;
  try {
    TorchExecutor torch(g);
    ref = torch.run(inputs);
  } catch (const Error& e) {
    a.note = std::string("no float32 reference: ") + e.what();
    return a;
  }
  const std::vector<NDArray> got = net.run(inputs);
  BASIN_CHECK(got.size() == ref.size()) << "the network has " << got.size() << " outputs, the reference " << ref.size();
  for (size_t i = 0; i < got.size(); ++i) {
    const ErrorStats e = compare_arrays(got[i], ref[i]);
    a.max_rel = std::max(a.max_rel, e.max_rel);
    a.max_abs = std::max(a.max_abs, e.max_abs);
    const std::vector<int64_t>& s = ref[i].shape();
    if (a.top1_rows == 0 && s.size() == 2 && s[1] >= 2 && s[0] >= 1 && ref[i].dtype().is_float()) {
      auto argmax = [&](const NDArray& x, int64_t row) {
        int64_t best = 0;
        for (int64_t c = 1; c < s[1]; ++c)
          if (x.get(row * s[1] + c) > x.get(row * s[1] + best)) best = c;
        return best;
      };
      a.top1_rows = static_cast<int>(s[0]);
      for (int64_t r = 0; r < s[0]; ++r) a.top1_agree += argmax(got[i], r) == argmax(ref[i], r);
    }
  }
  a.measured = true;
  a.note = inputs_note;
  return a;
}

}  // namespace basin::codegen
