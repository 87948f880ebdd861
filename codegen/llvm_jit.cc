// Compiles the emitted module for the host CPU: basin's pipeline with the host's target
// machine (so that vectorization sees AVX-512), machine code as an object file, linked
// by ORC LLJIT. compile_llvm may run on several threads at once (the measurer compiles
// a batch on every core): each thread has its own target machine, and only linking,
// which touches the shared JIT, takes its lock.
#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/Mangling.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Object/ELFObjectFile.h>
#include <llvm/Object/ObjectFile.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/CommandLine.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/Transforms/Utils/Cloning.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>
#include <unistd.h>
#include <sstream>
#include <string>
#include <vector>

#include "codegen/cpu_runtime.h"
#include "codegen/llvm_emit.h"
#include "core/ir/pass.h"
#include "core/util/error.h"
#include "core/util/host.h"
#include "core/util/parse.h"

namespace basin::codegen {

namespace {

// One JIT per process, made on first use: creating it costs milliseconds, which every
// candidate would otherwise pay. Each kernel lives in its own JITDylib (linked against
// the main one, which resolves libc, libm and the runtime) and is removed with its
// kernel. `mu` guards the JIT: adding, linking and removing kernels.
struct SharedJit {
  std::mutex mu;
  std::unique_ptr<llvm::orc::LLJIT> jit;
  std::unique_ptr<llvm::orc::JITTargetMachineBuilder> jtmb;  // the host's, for each thread's target machine
  int64_t next_id = 0;
};

SharedJit& shared_jit();
// The calling thread's target machine: a target machine is not safe to share between
// threads that compile at once (its subtargets are cached in it); each thread makes
// one on its first compilation.
llvm::TargetMachine& thread_target_machine();

}  // namespace

struct LlvmKernel::Impl {
  llvm::orc::JITDylib* dylib = nullptr;
  void (*entry)(void* const*) = nullptr;
  std::string ir;
  std::string assembly;
  std::string object;
  double compile_seconds = 0;
  int64_t emitted_instructions = 0;
  std::vector<Buffer> params;
  ~Impl() {
    if (!dylib) return;
    SharedJit& s = shared_jit();
    std::lock_guard<std::mutex> l(s.mu);
    llvm::consumeError(s.jit->getExecutionSession().removeJITDylib(*dylib));
  }
};

LlvmKernel::LlvmKernel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
LlvmKernel::~LlvmKernel() = default;

void LlvmKernel::run(const std::vector<NDArray*>& args) const {
  const auto& params = impl_->params;
  if (args.size() != params.size())
    throw RuntimeError("kernel takes " + std::to_string(params.size()) + " buffers, got " +
                       std::to_string(args.size()));
  std::vector<void*> ptrs;
  for (size_t i = 0; i < args.size(); ++i) {
    int64_t numel = 1;
    for (const Expr& e : params[i]->shape) numel *= const_int(e);
    if (args[i]->dtype() != params[i]->dtype || args[i]->numel() != numel)
      throw RuntimeError("buffer '" + params[i]->name + "' expects " + std::to_string(numel) + " " +
                         params[i]->dtype.str() + " elements, got " + std::to_string(args[i]->numel()) + " " +
                         args[i]->dtype().str());
    ptrs.push_back(args[i]->data());
  }
  impl_->entry(ptrs.data());
}

void LlvmKernel::run_raw(void* const* args) const { impl_->entry(args); }
const std::string& LlvmKernel::llvm_ir() const { return impl_->ir; }
const std::string& LlvmKernel::assembly() const { return impl_->assembly; }
double LlvmKernel::compile_seconds() const { return impl_->compile_seconds; }
int64_t LlvmKernel::emitted_instructions() const { return impl_->emitted_instructions; }
const std::string& LlvmKernel::object() const { return impl_->object; }

bool llvm_enabled() { return true; }

namespace {

[[noreturn]] void fail(const std::string& what, llvm::Error e) {
  std::string msg;
  llvm::raw_string_ostream os(msg);
  os << e;
  os.flush();
  throw Error("LLVM: " + what + ": " + msg);
}

template <typename T>
T take(llvm::Expected<T> v, const std::string& what) {
  if (!v) fail(what, v.takeError());
  return std::move(*v);
}

// basin vectorizes and unrolls loops itself, so O3's loop vectorizer, SLP vectorizer,
// partial and runtime unrolling and the scalar-evolution passes behind them are
// compile time without benefit; the default pipeline keeps what the emitted code
// needs: inlining of the outlined bodies (noalias scopes), SROA (accumulators into
// registers), CSE and instruction combining, reassociation and GVN (the unrolled steps
// share their address arithmetic), LICM, LLVM's full unrolling of the small
// constant-trip loops that basin's unroll depth left as loops (a packing stage's
// innermost loop, a tiling level between the reduction loops), and SROA again once
// addresses are constant. With the full unrolling, resnet18-c12's
// packed programs ran 1.1 to 2.4 times faster with it, 59 programs of five workloads
// 4.5% faster (geometric mean), for 1 to 5 ms more compile time (docs/PERFORMANCE.md@6bf7154,
// "Small loops unrolled by LLVM"). O3's partial and runtime unrolling and loop rotation made some
// GEMM programs 10 to 85% slower and were left out. Loop strength reduction runs in
// the code generator. BASIN_LLVM_PIPELINE overrides it (opt syntax).
const char* kPipeline =
    "always-inline,function(sroa,early-cse,instcombine,reassociate,gvn,simplifycfg,loop-mssa(licm),"
    "loop(loop-unroll-full),sroa,instcombine)";

void optimize(llvm::Module& m, llvm::TargetMachine& tm, int level) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PassBuilder pb(&tm);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::ModulePassManager mpm;
  if (level == 2 || std::getenv("BASIN_LLVM_PIPELINE")) {
    const char* text = std::getenv("BASIN_LLVM_PIPELINE");
    if (llvm::Error e = pb.parsePassPipeline(mpm, text ? text : kPipeline))
      fail("parsing the pass pipeline", std::move(e));
  } else {
    llvm::OptimizationLevel ol = level >= 3   ? llvm::OptimizationLevel::O3
                                 : level == 1 ? llvm::OptimizationLevel::O1
                                              : llvm::OptimizationLevel::O0;
    mpm = level == 0 ? pb.buildO0DefaultPipeline(ol) : pb.buildPerModuleDefaultPipeline(ol);
  }
  mpm.run(m, mam);
}

// The code generator's schedulers build a dependence graph per basic block, and in a
// block with thousands of loads and stores (a fully unrolled register tile too large for
// the registers, its accumulators on the stack) each memory access gained an edge to
// every earlier one: one resnet18-c2 program spent 4.7 of its 5 s of compile time
// there (docs/PERFORMANCE.md@6bf7154, "Compile time"). Past 200 pending memory
// accesses (LLVM's default: 1000) the graph builder now chains them through one
// barrier node instead: that program compiles in 0.9 s. Of 84 programs of six
// workloads, the 72 with smaller blocks (every task's fastest among them) got the same
// machine code; the 12 others ran as fast within their noise, one GEMM program 5.4
// times faster.
const std::vector<std::string> kLlvmDefaults = {"-dag-maps-huge-region=200"};

SharedJit& shared_jit() {
  static SharedJit* s = [] {
    // LLVM's own options: basin's defaults, then BASIN_LLVM_ARGS (for experiments,
    // "-enable-misched=false"; an option named twice takes its last value).
    std::vector<std::string> words{"basin"};
    words.insert(words.end(), kLlvmDefaults.begin(), kLlvmDefaults.end());
    const char* env = std::getenv("BASIN_LLVM_ARGS");
    const std::string extra = env ? env : "";
    std::istringstream in(extra);
    for (std::string w; in >> w;) words.push_back(w);
    std::vector<const char*> argv;
    for (const std::string& w : words) argv.push_back(w.c_str());
    if (!llvm::cl::ParseCommandLineOptions(static_cast<int>(argv.size()), argv.data(), "", &llvm::errs()))
      throw Error("BASIN_LLVM_ARGS='" + extra + "' is refused by LLVM (its message is above)");
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    auto* j = new SharedJit;  // lives for the process (kernels may outlive statics)
    llvm::orc::JITTargetMachineBuilder jtmb = take(llvm::orc::JITTargetMachineBuilder::detectHost(), "host detection");
    jtmb.setCodeGenOptLevel(llvm::CodeGenOpt::Aggressive);
    // BASIN_VECTOR_ISA narrower than the CPU's (HostInfo::vector_isa): the wider sets'
    // features off. LLVM turns off with a feature every feature that implies it, so
    // -avx512f takes AVX-512's extensions (bw, vl, ...) and -avx takes AVX2, FMA and
    // AVX-512: the code keeps to 16 registers of 32 bytes (ymm) or of 16 (xmm).
    const std::string& isa = this_host().vector_isa;
    if (isa != cpu_vector_isa()) {
      if (isa == "avx2") jtmb.getFeatures().AddFeature("avx512f", false);
      else if (isa == "sse") jtmb.getFeatures().AddFeature("avx", false);
    }
    j->jtmb = std::make_unique<llvm::orc::JITTargetMachineBuilder>(jtmb);
    j->jit = take(llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(std::move(jtmb)).create(), "JIT");
    llvm::orc::JITDylib& main = j->jit->getMainJITDylib();
    // libm and libc (expf, aligned_alloc, ...) come from the running process.
    main.addGenerator(
        take(llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(j->jit->getDataLayout().getGlobalPrefix()),
             "process symbols"));
    // The runtime the kernels call, by address (the binary need not export it).
    llvm::orc::MangleAndInterner mangle(j->jit->getExecutionSession(), j->jit->getDataLayout());
    llvm::orc::SymbolMap runtime;
    runtime[mangle("basin_parallel_for")] = llvm::JITEvaluatedSymbol::fromPointer(
        &basin_parallel_for, llvm::JITSymbolFlags::Exported | llvm::JITSymbolFlags::Callable);
    if (llvm::Error e = main.define(llvm::orc::absoluteSymbols(std::move(runtime))))
      fail("defining the runtime symbols", std::move(e));
    return j;
  }();
  return *s;
}

llvm::TargetMachine& thread_target_machine() {
  thread_local std::unique_ptr<llvm::TargetMachine> tm;
  if (!tm) tm = take(shared_jit().jtmb->createTargetMachine(), "target machine");
  return *tm;
}

// m compiled by tm's code generator into a file of `type` (`what` names it in errors).
std::string machine_code(llvm::TargetMachine& tm, llvm::Module& m, llvm::CodeGenFileType type, const char* what) {
  llvm::SmallVector<char, 0> buf;
  llvm::raw_svector_ostream os(buf);
  llvm::legacy::PassManager pm;
  if (tm.addPassesToEmitFile(pm, os, nullptr, type))
    throw Error(std::string("LLVM: the target machine cannot emit ") + what);
  pm.run(m);
  return std::string(buf.data(), buf.size());
}

// BASIN_PERF_MAP set: the functions of a linked kernel object (the entry and its
// parallel bodies) appended to /tmp/perf-PID.map, where `perf report` finds the names
// of JIT code. The linker keeps an object's text section whole, so each function lies
// at the entry's address plus its offset from the entry in the object.
void write_perf_map(const LlvmKernel::Impl& impl, uint64_t entry, int64_t id) {
  auto obj = llvm::object::ObjectFile::createObjectFile(
      llvm::MemoryBufferRef(llvm::StringRef(impl.object.data(), impl.object.size()), "kernel.o"));
  if (!obj) {
    llvm::consumeError(obj.takeError());
    return;
  }
  struct Fn {
    std::string name;
    uint64_t offset, size;
  };
  std::vector<Fn> fns;
  uint64_t entry_offset = 0;
  bool found = false;
  for (const llvm::object::SymbolRef& sym : (*obj)->symbols()) {
    llvm::Expected<llvm::object::SymbolRef::Type> type = sym.getType();
    llvm::Expected<llvm::StringRef> name = sym.getName();
    llvm::Expected<uint64_t> offset = sym.getValue();
    if (!type || !name || !offset || *type != llvm::object::SymbolRef::ST_Function) {
      if (!type) llvm::consumeError(type.takeError());
      if (!name) llvm::consumeError(name.takeError());
      if (!offset) llvm::consumeError(offset.takeError());
      continue;
    }
    const uint64_t size = llvm::object::ELFSymbolRef(sym).getSize();
    if (*name == "basin_kernel") {
      entry_offset = *offset;
      found = true;
    }
    fns.push_back({name->str(), *offset, size});
  }
  if (!found) return;
  const std::string path = "/tmp/perf-" + std::to_string(getpid()) + ".map";
  if (FILE* out = std::fopen(path.c_str(), "a")) {
    for (const Fn& f : fns)
      std::fprintf(out, "%llx %llx kernel%lld:%s\n", static_cast<unsigned long long>(entry + f.offset - entry_offset),
                   static_cast<unsigned long long>(f.size), static_cast<long long>(id), f.name.c_str());
    std::fclose(out);
  }
}

// `object` into a new JITDylib of the shared JIT, linked: impl's dylib and entry.
void link_object(SharedJit& sj, LlvmKernel::Impl& impl, const std::string& what) {
  std::lock_guard<std::mutex> l(sj.mu);
  llvm::orc::ExecutionSession& es = sj.jit->getExecutionSession();
  impl.dylib = &es.createBareJITDylib("kernel" + std::to_string(++sj.next_id));
  impl.dylib->addToLinkOrder(sj.jit->getMainJITDylib());
  if (llvm::Error e = sj.jit->addObjectFile(*impl.dylib, llvm::MemoryBuffer::getMemBufferCopy(impl.object, "kernel.o")))
    fail(what, std::move(e));
  llvm::orc::ExecutorAddr addr = take(sj.jit->lookup(*impl.dylib, "basin_kernel"), "looking up the kernel");
  impl.entry = addr.toPtr<void (*)(void* const*)>();
  if (std::getenv("BASIN_PERF_MAP")) write_perf_map(impl, addr.getValue(), sj.next_id);
}

}  // namespace

std::unique_ptr<LlvmKernel> compile_llvm(const LoweredFunc& f, const LlvmOptions& options) {
  auto t0 = std::chrono::steady_clock::now();
  SharedJit& sj = shared_jit();
  LlvmOptions opt = options;
  if (const char* lvl = std::getenv("BASIN_LLVM_OPT")) opt.opt_level = std::atoi(lvl);  // for experiments
  // Quantized arithmetic (a kernel reading or writing 8-bit integers) rounds each float
  // operation as the graph writes it: a multiply-add fused where the reference rounds
  // twice moves a value across a rounding tie of the next quantization, a step that later
  // layers carry to the outputs.
  for (const Buffer& b : f.params)
    if (b->dtype.is_byte()) opt.contract_fma = false;
  auto impl = std::make_unique<LlvmKernel::Impl>();
  impl->params = f.params;
  llvm::TargetMachine& tm = thread_target_machine();

  auto ctx = std::make_unique<llvm::LLVMContext>();
  const std::string entry = "basin_kernel";
  // The backend's own passes (core/ir/pass.h).
  const LoweredFunc g = prepare_for_backend(f);
  std::unique_ptr<llvm::Module> mod = emit_llvm_module(g, *ctx, opt, entry);
  mod->setDataLayout(tm.createDataLayout());
  mod->setTargetTriple(tm.getTargetTriple().str());
  for (llvm::Function& fn : *mod) {
    if (fn.isDeclaration()) continue;
    fn.addFnAttr("target-cpu", tm.getTargetCPU());
    fn.addFnAttr("target-features", tm.getTargetFeatureString());
  }
  for (const llvm::Function& fn : *mod) impl->emitted_instructions += fn.getInstructionCount();
  if (opt.max_instructions > 0 && impl->emitted_instructions > opt.max_instructions)
    throw Error("too large to compile: " + std::to_string(impl->emitted_instructions) +
                " LLVM instructions emitted, over the limit of " + std::to_string(opt.max_instructions) +
                " (the unrolled steps times the per-lane loads and stores of accesses with a stride; a smaller "
                "unroll depth or register tile makes fewer)");
  auto t1 = std::chrono::steady_clock::now();
  optimize(*mod, tm, opt.opt_level);
  auto t2 = std::chrono::steady_clock::now();
  if (opt.keep_ir) {
    llvm::raw_string_ostream os(impl->ir);
    mod->print(os, nullptr);
    os.flush();
  }

  // The same machine code as assembly text, from a copy of the module (code
  // generation changes the module it runs on).
  if (opt.keep_asm) impl->assembly = machine_code(tm, *llvm::CloneModule(*mod), llvm::CGFT_AssemblyFile, "assembly");
  // Machine code as an object file (what the JIT's own compile layer would make, on
  // this thread's target machine), then linked.
  impl->object = machine_code(tm, *mod, llvm::CGFT_ObjectFile, "object files");
  mod.reset();
  ctx.reset();
  link_object(sj, *impl, "adding the object");
  if (!opt.keep_object) std::string().swap(impl->object);
  impl->compile_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (std::getenv("BASIN_DEBUG_LLVM"))
    std::fprintf(stderr, "[llvm] emit %.1f ms, optimize %.1f ms, codegen %.1f ms\n",
                 std::chrono::duration<double, std::milli>(t1 - t0).count(),
                 std::chrono::duration<double, std::milli>(t2 - t1).count(),
                 impl->compile_seconds * 1e3 - std::chrono::duration<double, std::milli>(t2 - t0).count());
  return std::make_unique<LlvmKernel>(std::move(impl));
}

std::unique_ptr<LlvmKernel> load_llvm_object(const std::string& object) {
  auto t0 = std::chrono::steady_clock::now();
  (void)this_host();  // probing asks for the AMX tile registers, which a kernel may use
  SharedJit& sj = shared_jit();
  auto impl = std::make_unique<LlvmKernel::Impl>();
  impl->object = object;
  link_object(sj, *impl, "loading a kernel object");
  impl->compile_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return std::make_unique<LlvmKernel>(std::move(impl));
}

std::string llvm_host_cpu() {
  llvm::TargetMachine& tm = thread_target_machine();
  return tm.getTargetCPU().str() + " " + tm.getTargetFeatureString().str();
}

std::vector<std::string> missing_cpu_features(const std::string& compiled_for) {
  llvm::TargetMachine& tm = thread_target_machine();
  const llvm::MCSubtargetInfo& here = *tm.getMCSubtargetInfo();
  // The ISA features: those the host's detection names (with + or -).
  std::set<std::string> known;
  for (const std::string& f : split_list(tm.getTargetFeatureString().str()))
    if (f.size() > 1) known.insert(f.substr(1));
  const size_t space = compiled_for.find(' ');
  const std::string cpu = llvm_cpu_name(compiled_for);
  std::vector<std::string> missing;
  if (!here.isCPUStringValid(cpu)) missing.push_back("cpu:" + cpu);
  // Those features as the other machine listed them (others it turned on are missing:
  // this host does not name them, and LLVM might not know them).
  std::string features;
  for (const std::string& f : split_list(space == std::string::npos ? "" : compiled_for.substr(space + 1))) {
    if (f.size() < 2 || (f[0] != '+' && f[0] != '-')) continue;
    if (known.count(f.substr(1))) features += (features.empty() ? "" : ",") + f;
    else if (f[0] == '+') missing.push_back(f.substr(1));
  }
  if (!missing.empty()) return missing;
  const std::unique_ptr<llvm::MCSubtargetInfo> there(
      tm.getTarget().createMCSubtargetInfo(tm.getTargetTriple().str(), cpu, features));
  if (!there) return {"cpu:" + cpu};
  for (const std::string& name : known)
    if (there->checkFeatures("+" + name) && !here.checkFeatures("+" + name)) missing.push_back(name);
  return missing;
}

}  // namespace basin::codegen
