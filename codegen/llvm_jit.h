// The LLVM CPU backend's interface: loop IR in, callable kernel out. LLVM headers stay
// inside llvm_emit.cc and llvm_jit.cc.
//
// A kernel is compiled in process by ORC LLJIT for the host CPU (its features, AVX-512
// where present, or the narrower vector instructions BASIN_VECTOR_ISA names), after a
// lean optimization pipeline; float multiply-adds may be contracted into FMAs, so
// results can differ from the interpreter in the last bits.
#pragma once

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/ir/ndarray.h"
#include "core/ir/split_prologue.h"
#include "core/ir/stmt.h"
#include "core/util/error.h"

namespace basin::codegen {

// True when basin was built with LLVM (BASIN_WITH_LLVM and LLVM 16 found).
bool llvm_enabled();

struct LlvmOptions {
  bool contract_fma = true;  // allow fused multiply-add
  bool keep_ir = false;      // keep the optimized LLVM IR as text (llvm_ir())
  int opt_level = 2;         // 2: basin's lean pipeline (llvm_jit.cc); 0, 1, 3: LLVM's O0, O1, O3
  bool keep_object = false;  // keep the machine code as a relocatable object (object())
  bool keep_asm = false;     // keep the machine code as assembly text (assembly())
  // A program emitted with more LLVM instructions than this is refused (Error) before it
  // is optimized; 0: no limit. The measurer sets it while tuning (MeasureOptions).
  int64_t max_instructions = 0;
  // Emit 8-bit groups (kInt8DotPragma) with vpmaddwd even where the CPU has vpdpbusd:
  // what a CPU without VNNI runs, checked on one with it.
  bool int8_without_vnni = false;
  // Emit AMX nests (kAmxBf16Pragma) as AMX-BF16 tile instructions where the CPU has them
  // (HostInfo::amx_bf16); false: as written (vdpbf16ps), what a CPU without AMX runs.
  bool amx_tiles = true;
};

class LlvmKernel {
 public:
  ~LlvmKernel();
  // Runs on arrays in the order of the function's params, after checking dtypes and
  // element counts (RuntimeError on mismatch).
  void run(const std::vector<NDArray*>& args) const;
  // Runs on raw buffer pointers without checks (for timing).
  void run_raw(void* const* args) const;
  // The optimized LLVM IR, as text (empty unless compiled with keep_ir).
  const std::string& llvm_ir() const;
  // The machine code as assembly text (empty unless compiled with keep_asm).
  const std::string& assembly() const;
  double compile_seconds() const;
  // The LLVM instructions emitted for the program, before optimization: basin's own
  // unrolling and per-lane accesses make the size, and the code generator's time grows
  // faster than it (LlvmOptions::max_instructions).
  int64_t emitted_instructions() const;
  // The relocatable object file of the kernel (empty unless compiled with keep_object):
  // what a compiled network saves, and load_llvm_object links again without compiling.
  const std::string& object() const;

  struct Impl;
  explicit LlvmKernel(std::unique_ptr<Impl> impl);

 private:
  std::unique_ptr<Impl> impl_;
};

// Compiles f; throws basin::Error if basin was built without LLVM or f uses something
// the CPU backend cannot run (a GPU barrier).
std::unique_ptr<LlvmKernel> compile_llvm(const LoweredFunc& f, const LlvmOptions& opt = {});

// A constant input's repacking split off a program (core/ir/split_prologue.h) and
// compiled: run once into a buffer of `dtype` and `shape`, which replaces the
// program's param `param`. What a compiled network does when it is compiled, and what
// a network's tuning does before it times a program (MeasureOptions::constant_inputs).
struct ConstantPrologue {
  int param = -1;
  std::unique_ptr<LlvmKernel> kernel;
  DType dtype = DType::f32();
  std::vector<int64_t> shape;
};
// f's first stage that only repacks one of `constant_params`, compiled, with *f left
// without it; nullopt (f unchanged) where there is none.
inline std::optional<ConstantPrologue> compile_constant_prologue(LoweredFunc* f, const std::set<int>& constant_params,
                                                                 const LlvmOptions& opt = {}) {
  std::optional<SplitPrologue> sp = split_constant_prologue(*f, constant_params);
  if (!sp) return std::nullopt;
  ConstantPrologue c;
  const Buffer& packed = sp->prologue.params[1];
  c.param = sp->param;
  c.dtype = packed->dtype;
  for (const Expr& e : packed->shape) {
    if (e.kind() != ExprKind::IntImm) throw InternalError("a packed weight of symbolic shape");
    c.shape.push_back(e->ival);
  }
  c.kernel = compile_llvm(sp->prologue, opt);
  *f = std::move(sp->kernel);
  return c;
}

// A kernel from an object file that compile_llvm made with keep_object (in this or
// another process on the same CPU): linked by the JIT, not compiled. Its run() checks
// nothing (it has no parameter list); use run_raw. Throws basin::Error on a corrupt object.
std::unique_ptr<LlvmKernel> load_llvm_object(const std::string& object);

// The host CPU and its features as LLVM names them ("sapphirerapids +avx512f,..."), as
// this process's kernels are compiled for it (BASIN_VECTOR_ISA's features off);
// compiled networks record it.
std::string llvm_host_cpu();
// The CPU's name alone, of such a string ("sapphirerapids").
inline std::string llvm_cpu_name(const std::string& host_cpu) { return host_cpu.substr(0, host_cpu.find(' ')); }

// The instruction-set features that code compiled for `compiled_for` (an
// llvm_host_cpu() string, maybe another machine's) may use and this process's kernels
// may not (llvm_host_cpu()): none when it runs here. Features count as LLVM resolves
// them (the CPU's own, one implied by another, one turned off with what implies it);
// the ISA features are those llvm_host_cpu() names (not LLVM's tuning flags). A CPU
// this LLVM does not know ("cpu:NAME"), or a feature turned on that llvm_host_cpu()
// does not name, counts as missing.
std::vector<std::string> missing_cpu_features(const std::string& compiled_for);

}  // namespace basin::codegen
