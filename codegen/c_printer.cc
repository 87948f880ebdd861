#include "codegen/c_printer.h"

#include <cmath>
#include <functional>
#include <iomanip>
#include <limits>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "core/expr/analyzer.h"
#include "core/expr/evaluate.h"
#include "core/schedule/sketch.h"
#include "core/util/error.h"

namespace basin::codegen {

namespace {

// A name as a C identifier.
std::string c_ident(const std::string& s) {
  std::string r;
  for (char c : s) r += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return r;
}

std::string c_type(DType t) {
  if (t.is_bool()) return "uint8_t";
  if (t.is_float()) return t.bits == 32 ? "float" : "double";
  return (t.is_uint() ? "uint" : "int") + std::to_string(t.bits) + "_t";
}

// The tensor cores' operations for CUDA (sm_80 and later), in a unit whose kernels use
// them. A host that emulates the kernels (tests/codegen/cuda_emulation_test.cc) defines
// BASIN_EMULATED_MMA and its own versions, a warp's 32 threads meeting in the mma.
const char* kTensorCoreHelpers = R"(#ifndef BASIN_EMULATED_MMA
// x rounded to TF32, to nearest with ties away from zero.
static __device__ __forceinline__ float basin_tf32(float x) {
  unsigned u;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(u) : "f"(x));
  return __uint_as_float(u);
}
// x rounded to FP16 and to BF16, to nearest even, as FP32 values.
static __device__ __forceinline__ float basin_fp16(float x) {
  unsigned short h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(x));
  float r;
  asm("cvt.f32.f16 %0, %1;" : "=f"(r) : "h"(h));
  return r;
}
static __device__ __forceinline__ float basin_bf16(float x) {
  unsigned short h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(x));
  return __uint_as_float(((unsigned)h) << 16);
}
// Two values as one register of two halves, the first in the low half.
static __device__ __forceinline__ unsigned basin_pack_fp16(float lo, float hi) {
  unsigned r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
static __device__ __forceinline__ unsigned basin_pack_bf16(float lo, float hi) {
  unsigned r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
// The warp's C[16][8] += A[16][16] * B[16][8] on FP16 or BF16 inputs; each thread holds 4
// elements of C, 8 of A and 4 of B, two to a register (PTX ISA, "Matrix Fragments for
// mma.m16n8k16 with floating point type").
#define BASIN_MMA_K16(T, PTX)                                                                                       \
  static __device__ __forceinline__ void basin_mma_m16n8k16_##T(                                                   \
      float& c0, float& c1, float& c2, float& c3, float a0, float a1, float a2, float a3, float a4, float a5,       \
      float a6, float a7, float b0, float b1, float b2, float b3) {                                                 \
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." PTX "." PTX                                              \
                 ".f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"                          \
                 : "+f"(c0), "+f"(c1), "+f"(c2), "+f"(c3)                                                           \
                 : "r"(basin_pack_##T(a0, a1)), "r"(basin_pack_##T(a2, a3)), "r"(basin_pack_##T(a4, a5)),           \
                   "r"(basin_pack_##T(a6, a7)), "r"(basin_pack_##T(b0, b1)), "r"(basin_pack_##T(b2, b3)));          \
  }
BASIN_MMA_K16(fp16, "f16")
BASIN_MMA_K16(bf16, "bf16")
// The warp's C[16][8] += A[16][8] * B[8][8]; each thread holds 4 elements of C, 4 of A
// and 2 of B (PTX ISA, "Matrix Fragments for mma.m16n8k8", .tf32).
static __device__ __forceinline__ void basin_mma_m16n8k8_tf32(float& c0, float& c1, float& c2, float& c3, float a0,
                                                              float a1, float a2, float a3, float b0, float b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c0), "+f"(c1), "+f"(c2), "+f"(c3)
      : "r"(__float_as_uint(a0)), "r"(__float_as_uint(a1)), "r"(__float_as_uint(a2)), "r"(__float_as_uint(a3)),
        "r"(__float_as_uint(b0)), "r"(__float_as_uint(b1)));
}
#endif
)";

// The memory path's helpers for CUDA: 128-bit loads and stores, 64-bit stores, asynchronous copies to
// shared memory (cp.async, sm_80 and later; a copy whose `full` is false writes zeros
// and reads nothing), their groups. The emulation (BASIN_EMULATED_MMA) has its own.
const char* kMemoryHelpers = R"(#ifndef BASIN_EMULATED_MMA
static __device__ __forceinline__ float4 basin_ld4(const float* p) { return *reinterpret_cast<const float4*>(p); }
static __device__ __forceinline__ void basin_st4(float* p, float4 v) { *reinterpret_cast<float4*>(p) = v; }
static __device__ __forceinline__ void basin_st2(float* p, float2 v) { *reinterpret_cast<float2*>(p) = v; }
static __device__ __forceinline__ void basin_cp_async4(float* dst, const float* src, bool full) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"((unsigned)__cvta_generic_to_shared(dst)),
               "l"(src), "r"(full ? 4 : 0));
}
static __device__ __forceinline__ void basin_cp_async16(float* dst, const float* src, bool full) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"((unsigned)__cvta_generic_to_shared(dst)),
               "l"(src), "r"(full ? 16 : 0));
}
static __device__ __forceinline__ void basin_cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
static __device__ __forceinline__ void basin_cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }
#endif
)";

// A vector loop's lanes: its extent where it starts at 0 and the extent is a constant, else 0.
int64_t vector_lanes(const Stmt& loop) {
  int64_t lanes = 0, lo = 0;
  return is_const_int(loop->extent, &lanes) && is_const_int(loop->min, &lo) && lo == 0 ? lanes : 0;
}
// e at lane i of a vector loop over `lane`.
Expr at_lane(const Expr& e, const Var& lane, int64_t i) {
  VarMap m;
  m[lane.id()] = Expr(i);
  return simplify(substitute(e, m));
}
// Whether index i advances by one from each lane to the next.
bool steps_by_one(const Expr& i, const Var& lane) {
  VarMap next;
  next[lane.id()] = Expr(lane) + Expr(int64_t{1});
  int64_t d = 0;
  return is_const_int(simplify(substitute(i, next) - i), &d) && d == 1;
}

// Whether f uses the tensor cores' helpers (a TF32, FP16 or BF16 rounding or a fragment's nest).
bool uses_tensor_cores(const LoweredFunc& f) {
  bool uses = false;
  visit_stmt(f.body, [&](const Stmt& s) {
    if (s.kind() == StmtKind::Pragma && s->key == sched::kMmaPragma) uses = true;
    auto look = [&](const Expr& e) {
      if (e.defined())
        post_order_visit(e, [&](const Expr& x) { uses |= x.kind() == ExprKind::Call && is_rounding(x->fn); });
    };
    look(s->value);
    look(s->cond);
  });
  return uses;
}

// Whether f uses the memory path's helpers (a vector loop or a cp.async group).
bool uses_memory_path(const LoweredFunc& f) {
  bool uses = false;
  visit_stmt(f.body, [&](const Stmt& s) {
    uses |= (s.kind() == StmtKind::Pragma && s->key == sched::kAsyncCopyPragma) ||
            (s.kind() == StmtKind::For && s->for_kind == ForKind::Vectorized);
  });
  return uses;
}

// The two dialects share expressions and statements; CUDA differs in the prologue
// (NVRTC has no standard headers), the kernel signature, GPU loops (bound to the
// block and thread indices instead of looping) and allocations (registers or shared
// memory of constant size).
enum class Dialect { C, Cuda };

class Printer {
 public:
  explicit Printer(Dialect d = Dialect::C) : d_(d) {}

  // The kernel, after the translation unit's prologue (the integer types and the
  // helpers, once per unit) when `prologue`.
  std::string kernel(const LoweredFunc& f, const GpuLaunch& launch, bool prologue, bool tensor_cores,
                     bool memory_path) {
    os_ << "// generated by basin: " << f.name << ", grid (" << launch.grid[0] << ", " << launch.grid[1] << ", "
        << launch.grid[2] << "), block (" << launch.block[0] << ", " << launch.block[1] << ", " << launch.block[2]
        << ")\n";
    if (prologue)
      os_ << "typedef long long int64_t;\ntypedef int int32_t;\ntypedef unsigned char uint8_t;\ntypedef signed char "
             "int8_t;\n"
          << helpers("static __device__ __forceinline__") << (tensor_cores ? kTensorCoreHelpers : "")
          << (memory_path ? kMemoryHelpers : "") << "\n";
    os_ << "extern \"C\" __global__ void __launch_bounds__(" << launch.block[0] * launch.block[1] * launch.block[2]
        << ") " << c_ident(f.name) << "(";
    block_threads_ = launch.block[0] * launch.block[1] * launch.block[2];
    params(f, "__restrict__");
    os_ << ") {\n";
    stmt(f.body, 1);
    os_ << "}\n";
    return os_.str();
  }

  std::string func(const LoweredFunc& f) {
    os_ << "#include <math.h>\n#include <stdint.h>\n#include <stdlib.h>\n#include <string.h>\n\n"
        << helpers("static inline")
        << "static inline float basin_tf32(float x) { uint32_t u; memcpy(&u, &x, 4); "
           "if ((u & 0x7f800000u) == 0x7f800000u) return x; u = (u + 0x1000u) & 0xffffe000u; "
           "memcpy(&x, &u, 4); return x; }\n"
        << "static inline float basin_fp16(float x) { if (!isfinite(x)) return x; float a = fabsf(x); "
           "if (a >= 65520.0f) return copysignf(INFINITY, x); if (a < 6.103515625e-05f) return "
           "copysignf(nearbyintf(a / 5.9604644775390625e-08f) * 5.9604644775390625e-08f, x); uint32_t u; "
           "memcpy(&u, &x, 4); u = (u + 0xfffu + ((u >> 13) & 1u)) & 0xffffe000u; memcpy(&x, &u, 4); return x; }\n"
        << "static inline float basin_bf16(float x) { if (isnan(x)) return x; uint32_t u; memcpy(&u, &x, 4); "
           "u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u; memcpy(&x, &u, 4); return x; }\n\n"
        << "void " << c_ident(f.name) << "(";
    params(f, "restrict");
    os_ << ") {\n";
    stmt(f.body, 1);
    os_ << "}\n";
    return os_.str();
  }

 private:
  // The IR's floor division and modulo and the sigmoid, as functions with `qual`.
  static std::string helpers(const std::string& qual) {
    return qual +
           // Defined for every pair, as the interpreter: a zero divisor gives 0, a
           // divisor of -1 the wrapped negation (quotient) or 0 (remainder).
           " int64_t basin_div(int64_t a, int64_t b) { return b == 0 ? 0 : b == -1 ? "
           "(int64_t)(0ull - (unsigned long long)a) : a / b; }\n" +
           qual +
           " int64_t basin_floordiv(int64_t a, int64_t b) { if (b == 0) return 0; "
           "if (b == -1) return (int64_t)(0ull - (unsigned long long)a); int64_t q = a / b; "
           "return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q; }\n" +
           qual +
           " int64_t basin_floormod(int64_t a, int64_t b) { if (b == 0 || b == -1) return 0; int64_t r = a % b; "
           "return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r; }\n" +
           qual + " float basin_sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }\n" +
           // Max and min propagate NaN (core/expr/expr.h), unlike C's fmax and fmin.
           qual + " float basin_fmaxf(float a, float b) { return a != a ? a : (b != b ? b : (a > b ? a : b)); }\n" +
           qual + " float basin_fminf(float a, float b) { return a != a ? a : (b != b ? b : (a < b ? a : b)); }\n" +
           qual + " double basin_fmax(double a, double b) { return a != a ? a : (b != b ? b : (a > b ? a : b)); }\n" +
           qual + " double basin_fmin(double a, double b) { return a != a ? a : (b != b ? b : (a < b ? a : b)); }\n";
  }

  void params(const LoweredFunc& f, const char* restrict_kw) {
    for (size_t i = 0; i < f.params.size(); ++i) {
      bool out = false;
      for (int o : f.output_params) out |= o == static_cast<int>(i);
      os_ << (i ? ", " : "") << (out ? "" : "const ") << c_type(f.params[i]->dtype) << "* " << restrict_kw << " "
          << name(f.params[i]);
    }
  }

  std::string name(const Buffer& b) { return c_ident(b->name) + "_" + std::to_string(b->id); }
  std::string var(const ExprNode& n) { return c_ident(n.name) + "_" + std::to_string(n.ival); }

  std::string expr(const Expr& e) {
    const ExprNode& n = *e;
    auto bin = [&](const char* op) { return "(" + expr(n.args[0]) + " " + op + " " + expr(n.args[1]) + ")"; };
    bool f32 = n.dtype.is_float() && n.dtype.bits == 32;
    switch (n.kind) {
      case ExprKind::IntImm:
        return std::to_string(n.ival) + (n.dtype.bits == 64 ? "LL" : "");
      case ExprKind::FloatImm: {
        if (!std::isfinite(n.fval)) {
          // No literal spells infinity or NaN: C has its macros, CUDA its bit casts.
          std::string v =
              std::isnan(n.fval)
                  ? (d_ == Dialect::Cuda
                         ? (f32 ? "__int_as_float(0x7fc00000)" : "__longlong_as_double(0x7ff8000000000000LL)")
                         : std::string(f32 ? "NAN" : "(double)NAN"))
                  : (d_ == Dialect::Cuda
                         ? (f32 ? "__int_as_float(0x7f800000)" : "__longlong_as_double(0x7ff0000000000000LL)")
                         : std::string(f32 ? "INFINITY" : "(double)INFINITY"));
          return std::isinf(n.fval) && n.fval < 0 ? "(-" + v + ")" : v;
        }
        std::ostringstream s;
        s << std::setprecision(std::numeric_limits<double>::max_digits10) << n.fval;
        std::string t = s.str();
        if (t.find_first_of(".eEn") == std::string::npos) t += ".0";
        return t + (f32 ? "f" : "");
      }
      case ExprKind::Var:
        return var(n);
      case ExprKind::Add:
        return bin("+");
      case ExprKind::Sub:
        return bin("-");
      case ExprKind::Mul:
        return bin("*");
      case ExprKind::Div: {
        int64_t d = 0;
        if (n.dtype.is_float() || (is_const_int(n.args[1], &d) && d != 0 && d != -1)) return bin("/");
        return "basin_div(" + expr(n.args[0]) + ", " + expr(n.args[1]) + ")";
      }
      case ExprKind::FloorDiv:
      case ExprKind::FloorMod: {
        // Of a non-negative index by a positive constant, C's division is the floor
        // division (and a division by a constant becomes a multiply); else the helper.
        int64_t d = 0;
        bool plain = is_const_int(n.args[1], &d) && d > 0 && non_negative(n.args[0]);
        const char* op = n.kind == ExprKind::FloorDiv ? " / " : " % ";
        if (plain) return "(" + expr(n.args[0]) + op + expr(n.args[1]) + ")";
        return std::string(n.kind == ExprKind::FloorDiv ? "basin_floordiv(" : "basin_floormod(") + expr(n.args[0]) +
               ", " + expr(n.args[1]) + ")";
      }
      case ExprKind::Min:
      case ExprKind::Max: {
        std::string a = expr(n.args[0]), b = expr(n.args[1]);
        if (n.dtype.is_float())
          return std::string(n.kind == ExprKind::Min ? "basin_fmin" : "basin_fmax") + (f32 ? "f(" : "(") + a + ", " +
                 b + ")";
        return "((" + a + ") " + (n.kind == ExprKind::Min ? "<" : ">") + " (" + b + ") ? (" + a + ") : (" + b + "))";
      }
      case ExprKind::EQ:
        return bin("==");
      case ExprKind::NE:
        return bin("!=");
      case ExprKind::LT:
        return bin("<");
      case ExprKind::LE:
        return bin("<=");
      case ExprKind::GT:
        return bin(">");
      case ExprKind::GE:
        return bin(">=");
      case ExprKind::And:
        return bin("&&");
      case ExprKind::Or:
        return bin("||");
      case ExprKind::Not:
        return "(!" + expr(n.args[0]) + ")";
      case ExprKind::Select:
        return "(" + expr(n.args[0]) + " ? " + expr(n.args[1]) + " : " + expr(n.args[2]) + ")";
      case ExprKind::Cast:
        if (n.dtype.is_byte() && n.args[0].dtype().is_float()) {  // saturating, NaN to 0 (fmax ignores NaN)
          const std::string f = n.args[0].dtype().bits == 32 ? "f" : "";
          const std::string lo = n.dtype.is_uint() ? "0" : "-128", hi = n.dtype.is_uint() ? "255" : "127";
          return "((" + c_type(n.dtype) + ")fmin" + f + "(fmax" + f + "(" + expr(n.args[0]) + ", " + lo + "), " + hi +
                 "))";
        }
        return "((" + c_type(n.dtype) + ")" + expr(n.args[0]) + ")";
      case ExprKind::Call: {
        std::string fn = math_fn_name(n.fn);
        std::string sfx = f32 ? "f" : "";
        std::string a0 = expr(n.args[0]);
        if (n.fn == MathFn::rsqrt) return "(1" + std::string(f32 ? ".0f" : ".0") + " / sqrt" + sfx + "(" + a0 + "))";
        if (n.fn == MathFn::sigmoid) return "basin_sigmoidf(" + a0 + ")";
        if (n.fn == MathFn::pow) return "pow" + sfx + "(" + a0 + ", " + expr(n.args[1]) + ")";
        if (is_rounding(n.fn)) return (f32 ? "basin_" + fn + "(" : "(double)basin_" + fn + "((float)") + a0 + ")";
        return fn + sfx + "(" + a0 + ")";
      }
      case ExprKind::Load: {
        BASIN_CHECK(n.args.size() <= 1) << "print_c expects flattened buffers";
        return name(n.buffer) + "[" + index(n.buffer, n.args) + "]";
      }
    }
    return "?";
  }

  void stmt(const Stmt& s, int depth) {
    const StmtNode& n = *s;
    std::string pad(depth * 2, ' ');
    switch (n.kind) {
      case StmtKind::For: {
        int64_t lo = -1;
        if (is_const_int(n.min, &lo) && lo >= 0) non_negative_vars_.insert(n.var.id());
        // The loop's range, while its body is printed (the per-thread slices' bounds).
        struct Bound {
          Analyzer& a;
          const Var& v;
          ~Bound() { a.unbind(v); }
        } bound{ranges_, n.var};
        ranges_.bind_loop(n.var, n.min, n.extent);
        if (d_ == Dialect::Cuda && is_gpu_kind(n.for_kind) && n.for_kind != ForKind::VThread) {
          // A bound loop is its index; the launch covers its extent exactly (gpu_launch).
          os_ << pad << "{\n"
              << pad << "  const int64_t " << var(*n.var) << " = " << expr(n.min) << " + (int64_t)"
              << for_kind_name(n.for_kind) << ";\n";
          if (is_gpu_thread(n.for_kind)) threads_.push_back(n.var);
          stmt(n.body[0], depth + 1);
          if (is_gpu_thread(n.for_kind)) threads_.pop_back();
          os_ << pad << "}\n";
          return;
        }
        switch (n.for_kind) {
          case ForKind::Parallel:
            if (d_ == Dialect::Cuda) throw Error("a parallel (CPU) loop cannot be printed as CUDA: " + var(*n.var));
            os_ << pad << "#pragma omp parallel for\n";
            break;
          case ForKind::Vectorized:
            if (d_ == Dialect::Cuda && (vector_copy(s, depth) || vector_store(s, depth))) return;
            os_ << pad << (d_ == Dialect::Cuda ? "#pragma unroll\n" : "#pragma omp simd\n");
            break;
          case ForKind::Unrolled:
            os_ << pad << (d_ == Dialect::Cuda ? "#pragma unroll\n" : "#pragma GCC unroll 1024\n");
            break;
          case ForKind::VThread:
            // Virtual threads are the thread's own sub-tiles, interleaved by unrolling.
            if (d_ == Dialect::Cuda) {
              os_ << pad << "#pragma unroll\n";
              break;
            }
            os_ << pad << "/* bound to " << for_kind_name(n.for_kind) << " */\n";
            break;
          case ForKind::Serial:
            break;
          default:
            os_ << pad << "/* bound to " << for_kind_name(n.for_kind) << " */\n";
            break;
        }
        std::string v = var(*n.var);
        os_ << pad << "for (int64_t " << v << " = " << expr(n.min) << "; " << v << " < " << expr(n.min) << " + "
            << expr(n.extent) << "; ++" << v << ") {\n";
        stmt(n.body[0], depth + 1);
        os_ << pad << "}\n";
        return;
      }
      case StmtKind::Allocate: {
        if (d_ == Dialect::Cuda) {
          int64_t count = 1;
          for (const Expr& e : n.buffer->shape) {
            int64_t v = 0;
            if (!is_const_int(e, &v)) throw Error("buffer '" + n.buffer->name + "' has a size unknown at compile time");
            count *= v;
          }
          if (n.buffer->scope == MemScope::Global)
            throw Error("a kernel cannot allocate global buffer '" + n.buffer->name + "'");
          if (n.buffer->scope == MemScope::Local && threads_.empty()) {
            // Allocated in the block, outside the thread loops: each thread's own slice
            // (stmt.h), the thread index its first dimension.
            if (count % block_threads_ != 0)
              throw Error("per-thread buffer '" + n.buffer->name + "' of " + std::to_string(count) +
                          " elements is not split evenly over " + std::to_string(block_threads_) + " threads");
            count /= block_threads_;
            per_thread_[n.buffer.get()] = count;
          }
          os_ << pad << "{\n"
              << pad << "  " << (n.buffer->scope == MemScope::Shared ? "__shared__ __align__(16) " : "")
              << c_type(n.buffer->dtype) << " " << name(n.buffer) << "[" << count << "];  /* "
              << scope_name(n.buffer->scope) << " */\n";
          stmt(n.body[0], depth + 1);
          os_ << pad << "}\n";
          return;
        }
        std::string count = "1";
        for (const Expr& e : n.buffer->shape) count += " * " + expr(e);
        std::string t = c_type(n.buffer->dtype), b = name(n.buffer);
        os_ << pad << "{\n"
            << pad << "  " << t << "* restrict " << b << " = (" << t << "*)aligned_alloc(64, ((" << count
            << ") * sizeof(" << t << ") + 64) & ~(size_t)63);  /* " << scope_name(n.buffer->scope) << " */\n";
        stmt(n.body[0], depth + 1);
        os_ << pad << "  free(" << b << ");\n" << pad << "}\n";
        return;
      }
      case StmtKind::Store: {
        BASIN_CHECK(n.indices.size() <= 1) << "print_c expects flattened buffers";
        if (async_ && n.buffer->scope == MemScope::Shared) {
          Copy c = copy_of(s, Var());
          if (c.ok) {
            os_ << pad << "basin_cp_async4(&" << name(n.buffer) << "[" << index(n.buffer, n.indices) << "], "
                << source(c) << ");\n";
            return;
          }
        }
        os_ << pad << name(n.buffer) << "[" << index(n.buffer, n.indices) << "] = " << expr(n.value) << ";\n";
        return;
      }
      case StmtKind::IfThenElse:
        os_ << pad << "if (" << expr(n.cond) << ") {\n";
        stmt(n.body[0], depth + 1);
        if (n.body.size() > 1) {
          os_ << pad << "} else {\n";
          stmt(n.body[1], depth + 1);
        }
        os_ << pad << "}\n";
        return;
      case StmtKind::Seq:
        for (const Stmt& c : n.body) stmt(c, depth);
        return;
      case StmtKind::Barrier:
        os_ << pad << "__syncthreads();\n";
        return;
      case StmtKind::Pragma:
        os_ << pad << "/* " << n.key << " = " << expr(n.pragma_value) << " */\n";
        if (d_ == Dialect::Cuda && n.key == sched::kMmaPragma) {
          mma(n.body[0], depth);
          return;
        }
        if (d_ == Dialect::Cuda && n.key == sched::kWarpReducePragma) {
          warp_reduce(n.body[0], depth);
          return;
        }
        if (d_ == Dialect::Cuda && n.key == sched::kLaneExchangePragma) {
          lane_exchange(n.body[0], n.pragma_value, depth);
          return;
        }
        // A thread's copies into shared memory of one step (sched::kAsyncCopyPragma):
        // cp.async for each store of a global value (or zero), a plain store for any
        // other, then the group committed and a wait until at most the value are pending.
        if (d_ == Dialect::Cuda && n.key == sched::kAsyncCopyPragma) {
          int64_t pending = 0;
          if (!is_const_int(n.pragma_value, &pending) || pending < 0 || pending > 7)
            throw Error("a cp.async group's wait is not a constant in [0, 7]: " + expr(n.pragma_value));
          async_ = true;
          stmt(n.body[0], depth);
          async_ = false;
          os_ << pad << "basin_cp_async_commit();\n" << pad << "basin_cp_async_wait<" << pending << ">();\n";
          return;
        }
        stmt(n.body[0], depth);
        return;
    }
  }

  // A fragment's nest (sched::kMmaPragma, built by sched's build_gpu_mma) as the warp's
  // fragment loads and one mma.sync, m16n8k8 for TF32 inputs or m16n8k16 for FP16 and
  // BF16 (K = 8 or 16):
  //   for r in [0, 4): for q in [0, K): acc[C(r)] = acc[C(r)] + rnd(A[IA(r, q)]) * rnd(B[IB(r, q)])
  // thread t's C element r is at row l/4 + 8(r/2), column 2(l%4) + r%2 (lane l = t % 32),
  // IA depending on t only through the warp t/32 and l/4, IB only through the warp and
  // l%4. PTX's fragment layouts, g = l/4, c = l%4:
  //   m16n8k8 (tf32):  a_i = A[g + 8(i%2)][c + 4(i/2)], b_i = B[c + 4i][g];
  //   m16n8k16:        a_i = A[g + 8((i/2)%2)][2c + i%2 + 8(i/4)], b_i = B[2c + i%2 + 8(i/2)][g].
  // So a_i is IA at the r of its row (0 or 2) and q its column; b_i is IB at its q with
  // the column g: t = 32(t/32) + l/8, r = (l/4)%2.
  void mma(const Stmt& nest, int depth) {
    auto fail = [&](const std::string& why) {
      throw Error("malformed tensor-core nest (" + why + "):\n" + to_string(nest));
    };
    if (nest.kind() != StmtKind::For || nest->body[0].kind() != StmtKind::For) fail("not two loops");
    const Var r = nest->var, q = nest->body[0]->var;
    const Stmt& st = nest->body[0]->body[0];
    if (st.kind() != StmtKind::Store) fail("not a store");
    const Expr& v = st->value;
    if (v.kind() != ExprKind::Add || v.arg(0).kind() != ExprKind::Load || v.arg(0)->buffer != st->buffer ||
        !structural_equal(v.arg(0).arg(0), st->indices[0]) || v.arg(1).kind() != ExprKind::Mul)
      fail("not an accumulation of a product");
    Expr fa = v.arg(1).arg(0), fb = v.arg(1).arg(1);
    for (const Expr& f : {fa, fb})
      if (f.kind() != ExprKind::Call || !is_rounding(f->fn) || f->fn != fa->fn || f.arg(0).kind() != ExprKind::Load)
        fail("the factors are not loads rounded alike");
    const MathFn rnd = fa->fn;
    const int64_t kdim = rnd == MathFn::tf32 ? 8 : 16;
    int64_t rs = 0, qs = 0;
    if (!is_const_int(nest->extent, &rs) || rs != 4 || !is_const_int(nest->body[0]->extent, &qs) || qs != kdim)
      fail("not 4 x " + std::to_string(kdim) + " products");
    if (threads_.empty()) fail("outside a thread loop");
    const Var t = threads_.back();
    const Expr warp(int64_t{sched::kWarp}), c2(int64_t{2}), c4(int64_t{4}), c8(int64_t{8});
    const Expr lane = floormod(t, warp), g = floordiv(lane, c4), tq = floormod(lane, c4);
    auto at = [&](const Expr& idx, const VarMap& m) { return simplify(substitute(idx, m)); };
    const Buffer& ab = fa.arg(0)->buffer;
    const Buffer& bb = fb.arg(0)->buffer;
    const Expr ia = fa.arg(0).arg(0), ib = fb.arg(0).arg(0);
    const std::string pad(depth * 2, ' '), fn = math_fn_name(rnd);
    const int na = kdim == 8 ? 4 : 8, nb = kdim == 8 ? 2 : 4;
    os_ << pad << "{\n";
    for (int i = 0; i < na; ++i) {
      VarMap m;
      if (kdim == 8) {
        m[r.id()] = Expr(int64_t{2 * (i % 2)});
        m[q.id()] = tq + Expr(int64_t{4 * (i / 2)});
      } else {
        m[r.id()] = Expr(int64_t{2 * ((i / 2) % 2)});
        m[q.id()] = tq * c2 + Expr(int64_t{i % 2 + 8 * (i / 4)});
      }
      os_ << pad << "  const float basin_a" << i << " = basin_" << fn << "(" << name(ab) << "["
          << index(ab, {at(ia, m)}) << "]);\n";
    }
    for (int i = 0; i < nb; ++i) {
      VarMap m;
      m[t.id()] = floordiv(t, warp) * warp + floordiv(lane, c8);
      m[r.id()] = floormod(g, c2);
      m[q.id()] = kdim == 8 ? tq + Expr(int64_t{4 * i}) : tq * c2 + Expr(int64_t{i % 2 + 8 * (i / 2)});
      os_ << pad << "  const float basin_b" << i << " = basin_" << fn << "(" << name(bb) << "["
          << index(bb, {at(ib, m)}) << "]);\n";
    }
    os_ << pad << "  basin_mma_" << (kdim == 8 ? "m16n8k8_" : "m16n8k16_") << fn << "(";
    for (int i = 0; i < 4; ++i) {
      VarMap m;
      m[r.id()] = Expr(int64_t{i});
      os_ << name(st->buffer) << "[" << index(st->buffer, {at(st->indices[0], m)}) << "], ";
    }
    for (int i = 0; i < na; ++i) os_ << "basin_a" << i << ", ";
    for (int i = 0; i < nb; ++i) os_ << "basin_b" << i << (i + 1 < nb ? ", " : ");\n");
    os_ << pad << "}\n";
  }

  // A store that copies a value from global memory as it is, or zero: dst = c1 ? (c2 ?
  // src[J] : 0) : 0 (any number of conditions, none at all). With `lane`, the
  // store's destination and source indices advance by one per lane and the conditions
  // do not depend on it.
  struct Copy {
    bool ok = false;
    Expr cond, src;  // cond undefined: always
  };
  Copy copy_of(const Stmt& st, const Var& lane) {
    Copy c;
    if (st.kind() != StmtKind::Store || st->buffer->dtype != DType::f32() || st->indices.size() != 1) return c;
    Expr v = st->value;
    double zero = 1;
    while (v.kind() == ExprKind::Select && is_const_float(v.arg(2), &zero) && zero == 0.0) {
      c.cond = c.cond.defined() ? logical_and(c.cond, v.arg(0)) : v.arg(0);
      v = v.arg(1);
    }
    if (v.kind() != ExprKind::Load || v->buffer->scope != MemScope::Global || v->args.size() != 1) return c;
    if (lane.defined()) {
      if (c.cond.defined() && uses_var(c.cond, lane)) return c;
      if (!steps_by_one(st->indices[0], lane) || !steps_by_one(v->args[0], lane)) return c;
    }
    c.src = v;
    c.ok = true;
    return c;
  }
  // A copy's source argument and its condition: "c ? &src[J] : src, c" (no address past
  // the buffer is formed where the copy reads nothing).
  std::string source(const Copy& c) {
    const std::string b = name(c.src->buffer), at = "&" + b + "[" + index(c.src->buffer, c.src->args) + "]";
    if (!c.cond.defined()) return at + ", true";
    const std::string cond = expr(c.cond);
    return "(" + cond + ") ? " + at + " : " + b + ", " + cond;
  }
  // A vector loop of 4 lanes over a copy (sched's GpuMma fill, Sketch::mma_vector): one
  // 128-bit access, lane 0's addresses 16-byte aligned (the lowering's promise; the
  // emulation checks it), asynchronous into shared memory inside a cp.async group. False,
  // printing nothing, for any other vector loop.
  bool vector_copy(const Stmt& loop, int depth) {
    if (vector_lanes(loop) != 4) return false;
    const Var lane = loop->var;
    Copy c = copy_of(loop->body[0], lane);
    if (!c.ok) return false;
    const Stmt& st = loop->body[0];
    const Expr dst = at_lane(st->indices[0], lane, 0);
    c.src = at_lane(c.src, lane, 0);
    const std::string pad(depth * 2, ' '), d = "&" + name(st->buffer) + "[" + index(st->buffer, {dst}) + "]";
    if (async_ && st->buffer->scope == MemScope::Shared) {
      os_ << pad << "basin_cp_async16(" << d << ", " << source(c) << ");\n";
      return true;
    }
    const std::string ld = "basin_ld4(&" + name(c.src->buffer) + "[" + index(c.src->buffer, c.src->args) + "])";
    os_ << pad << "basin_st4(" << d << ", "
        << (c.cond.defined() ? "(" + expr(c.cond) + ") ? " + ld + " : make_float4(0.0f, 0.0f, 0.0f, 0.0f)" : ld)
        << ");\n";
    return true;
  }

  // A vector loop of 2 or 4 lanes over one store of computed values to consecutive
  // addresses in global or shared memory (sched's GpuMma write-back,
  // Sketch::mma_store_lanes): each lane's value computed, then one 64- or 128-bit
  // store, lane 0's address aligned to the vector (the lowering's promise; the emulation
  // checks it). False, printing nothing, for any other vector loop.
  bool vector_store(const Stmt& loop, int depth) {
    const int64_t lanes = vector_lanes(loop);
    const Stmt& st = loop->body[0];
    if ((lanes != 2 && lanes != 4) || st.kind() != StmtKind::Store || st->buffer->dtype != DType::f32() ||
        st->indices.size() != 1 || st->buffer->scope == MemScope::Local || !steps_by_one(st->indices[0], loop->var))
      return false;
    const std::string pad(depth * 2, ' '), n = std::to_string(lanes);
    os_ << pad << "basin_st" << n << "(&" << name(st->buffer) << "["
        << index(st->buffer, {at_lane(st->indices[0], loop->var, 0)}) << "], make_float" << n << "(";
    for (int64_t i = 0; i < lanes; ++i) os_ << (i ? ", " : "") << expr(at_lane(st->value, loop->var, i));
    os_ << "));\n";
    return true;
  }

  // A value from the lane's pair (sched::kLaneExchangePragma, value 1; sched's GpuMma
  // write-back of 4 lanes):
  //   dst = select(t % 2 == 0, L[(t + 1) * S + A], L[(t - 1) * S + B])
  // for a per-thread buffer L of S elements per thread, A and B independent of the
  // thread t. Lane t's pair t xor 1 holds the value in its own slice: at A where the
  // pair is odd (t even), at B where it is even. So every lane sends select(t % 2 == 0,
  // L[B], L[A]) of its own slice and receives its pair's by one __shfl_xor_sync.
  void lane_exchange(const Stmt& st, const Expr& mask, int depth) {
    auto fail = [&](const std::string& why) {
      throw Error("malformed lane exchange (" + why + "):\n" + to_string(st));
    };
    int64_t m = 0;
    if (!is_const_int(mask, &m) || m != 1) fail("the pair is not lane xor 1");
    if (threads_.empty()) fail("outside a thread loop");
    if (st.kind() != StmtKind::Store || st->indices.size() != 1) fail("not a store");
    const Var t = threads_.back();
    const Expr& v = st->value;
    const Expr even = eq(floormod(Expr(t), Expr(int64_t{2})), Expr(int64_t{0}));
    if (v.kind() != ExprKind::Select || !structural_equal(simplify(v.arg(0)), simplify(even)))
      fail("not a choice by the lane's parity");
    const Expr& from_odd = v.arg(1);  // read where t is even: the odd pair's
    const Expr& from_even = v.arg(2);
    if (from_odd.kind() != ExprKind::Load || from_even.kind() != ExprKind::Load ||
        from_even->buffer != from_odd->buffer || from_odd->args.size() != 1 || from_even->args.size() != 1)
      fail("not two loads of one buffer");
    const Buffer& src = from_odd->buffer;
    auto it = per_thread_.find(src.get());
    if (it == per_thread_.end()) fail("not a per-thread buffer");
    // The element in the pair's slice: the index less the pair's slice start.
    auto in_pair = [&](const Expr& i, int64_t pair) {
      const Expr rest = simplify(i - (Expr(t) + Expr(pair)) * Expr(it->second));
      if (!in_slice(rest, it->second)) fail("not an element of the pair's slice the same in every lane");
      return rest;
    };
    const Expr a = in_pair(from_odd->args[0], 1), b = in_pair(from_even->args[0], -1);
    const std::string pad(depth * 2, ' '), l = name(src);
    os_ << pad << name(st->buffer) << "[" << index(st->buffer, st->indices) << "] = __shfl_xor_sync(0xffffffffu, ("
        << expr(even) << ") ? " << l << "[" << expr(b) << "] : " << l << "[" << expr(a) << "], 1);\n";
  }

  // A warp's reduction (sched::kWarpReducePragma, built by sched's build_gpu_reduce):
  //   dst[D] = a tree of one combiner (+, max or min) over src[I + i], i < 32
  // as lane l's own value src[I + l], five __shfl_down_sync steps of offsets 16 to 1
  // (the tree is their order: lane 0 ends with it), and lane 0's value broadcast to the
  // warp. I is the first leaf's index; the leaves' indices must be I + i, each i once.
  void warp_reduce(const Stmt& st, int depth) {
    auto fail = [&](const std::string& why) {
      throw Error("malformed warp reduction (" + why + "):\n" + to_string(st));
    };
    if (st.kind() != StmtKind::Store) fail("not a store");
    const Expr& root = st->value;
    const ExprKind op = root.kind();
    if (op != ExprKind::Add && op != ExprKind::Max && op != ExprKind::Min) fail("not a sum, max or min");
    std::vector<Expr> leaves;
    std::function<void(const Expr&)> flatten = [&](const Expr& e) {
      if (e.kind() != op) return leaves.push_back(e);
      flatten(e.arg(0));
      flatten(e.arg(1));
    };
    flatten(root);
    if (leaves.size() != static_cast<size_t>(sched::kWarp) || leaves[0].kind() != ExprKind::Load) fail("not 32 loads");
    const Buffer& src = leaves[0]->buffer;
    const Expr first = leaves[0].arg(0);
    std::vector<bool> seen(sched::kWarp, false);
    for (const Expr& leaf : leaves) {
      int64_t i = -1;
      if (leaf.kind() != ExprKind::Load || leaf->buffer != src || !is_const_int(simplify(leaf.arg(0) - first), &i) ||
          i < 0 || i >= sched::kWarp || seen[i])
        fail("a value is not one of the warp's");
      seen[i] = true;
    }
    if (threads_.empty()) fail("outside a thread loop");
    const DType dt = root.dtype();
    const Expr lane = floormod(threads_.back(), Expr(sched::kWarp));
    const Var v("basin_v", dt), o("basin_o", dt);
    const std::string pad(depth * 2, ' '), type = c_type(dt);
    os_ << pad << "{\n" << pad << "  " << type << " " << expr(v) << " = ";
    os_ << name(src) << "[" << index(src, {simplify(first + lane)}) << "];\n";
    for (int64_t off = sched::kWarp / 2; off >= 1; off /= 2)
      os_ << pad << "  { const " << type << " " << expr(o) << " = __shfl_down_sync(0xffffffffu, " << expr(v) << ", "
          << off << "); " << expr(v) << " = " << expr(with_args(root, {v, o})) << "; }\n";
    os_ << pad << "  " << name(st->buffer) << "[" << index(st->buffer, {st->indices[0]})
        << "] = __shfl_sync(0xffffffffu, " << expr(v) << ", 0);\n"
        << pad << "}\n";
  }

  // True if e is an integer >= 0 wherever it is evaluated: built by +, *, /, %, min and
  // max from non-negative constants and the variables of loops starting at 0 or above.
  bool non_negative(const Expr& e) const {
    const ExprNode& n = *e;
    if (!n.dtype.is_int() || n.dtype.is_bool()) return false;
    switch (n.kind) {
      case ExprKind::IntImm:
        return n.ival >= 0;
      case ExprKind::Var:
        return non_negative_vars_.count(Var(e).id()) > 0;
      case ExprKind::Add:
      case ExprKind::Mul:
      case ExprKind::Min:
      case ExprKind::Max:
        return non_negative(n.args[0]) && non_negative(n.args[1]);
      case ExprKind::FloorDiv:
      case ExprKind::FloorMod: {
        int64_t d = 0;
        return non_negative(n.args[0]) && is_const_int(n.args[1], &d) && d > 0;
      }
      default:
        return false;
    }
  }

  // A flat index; into a per-thread buffer, relative to the thread's own slice: the
  // index must be t * slice + rest with rest independent of the thread variable t (a
  // thread reads only its own registers; another lane's value comes by a lane exchange).
  std::string index(const Buffer& b, const std::vector<Expr>& idx) {
    if (idx.empty()) return "0";
    auto it = per_thread_.find(b.get());
    if (it == per_thread_.end()) return expr(idx[0]);
    if (threads_.empty()) throw Error("per-thread buffer '" + b->name + "' is accessed outside a thread loop");
    const Var& t = threads_.back();
    const Expr rest = simplify(idx[0] - Expr(t) * Expr(it->second));
    if (!in_slice(rest, it->second))
      throw Error("per-thread buffer '" + b->name + "' is accessed outside the thread's own slice: " + expr(idx[0]));
    return expr(rest);
  }
  // Whether an index relative to a slice of n elements is in it wherever the enclosing
  // loops' variables are in their ranges (and it does not depend on the thread).
  bool in_slice(const Expr& rest, int64_t n) const {
    return !uses_var(rest, threads_.back()) && ranges_.bound(rest).within(0, n - 1);
  }

  Dialect d_;
  std::ostringstream os_;
  int64_t block_threads_ = 1;
  std::vector<Var> threads_;                                   // the enclosing thread loops' variables
  bool async_ = false;                                         // inside a cp.async pragma: copies are asynchronous
  std::unordered_map<const BufferNode*, int64_t> per_thread_;  // slice elements
  Analyzer ranges_;                                            // the enclosing loops' ranges
  std::unordered_set<int64_t> non_negative_vars_;              // loop variables whose loop starts at >= 0
};

}  // namespace

std::string print_c(const LoweredFunc& f) { return Printer().func(f); }

GpuLaunch gpu_launch(const LoweredFunc& f) {
  GpuLaunch l;
  std::string err;
  visit_stmt(f.body, [&](const Stmt& s) {
    if (s.kind() != StmtKind::For || !is_gpu_kind(s->for_kind) || !err.empty()) return;
    int64_t* dim = nullptr;
    switch (s->for_kind) {
      case ForKind::BlockX:
        dim = &l.grid[0];
        break;
      case ForKind::BlockY:
        dim = &l.grid[1];
        break;
      case ForKind::BlockZ:
        dim = &l.grid[2];
        break;
      case ForKind::ThreadX:
        dim = &l.block[0];
        break;
      case ForKind::ThreadY:
        dim = &l.block[1];
        break;
      case ForKind::ThreadZ:
        dim = &l.block[2];
        break;
      default:
        return;  // virtual threads are loops inside the thread
    }
    int64_t ext = 0, lo = 0;
    if (!is_const_int(s->extent, &ext) || !is_const_int(s->min, &lo) || lo != 0) {
      err = std::string("the extent of a ") + for_kind_name(s->for_kind) + " loop is not a constant";
      return;
    }
    if (*dim != 1 && *dim != ext) {
      err = std::string(for_kind_name(s->for_kind)) + " loops of different extents (" + std::to_string(*dim) + ", " +
            std::to_string(ext) + ")";
      return;
    }
    *dim = ext;
  });
  if (!err.empty()) throw Error(f.name + ": " + err);
  return l;
}

std::string cuda_kernel_name(const LoweredFunc& f) { return c_ident(f.name); }

std::string print_cuda(const LoweredFunc& f) {
  return Printer(Dialect::Cuda).kernel(f, gpu_launch(f), true, uses_tensor_cores(f), uses_memory_path(f));
}

std::string print_cuda_unit(const std::vector<LoweredFunc>& fs) {
  std::string unit;
  bool tensor_cores = false, memory_path = false;
  for (const LoweredFunc& f : fs) {
    tensor_cores |= uses_tensor_cores(f);
    memory_path |= uses_memory_path(f);
  }
  for (size_t i = 0; i < fs.size(); ++i) {
    try {
      unit += Printer(Dialect::Cuda).kernel(fs[i], gpu_launch(fs[i]), i == 0, tensor_cores, memory_path);
    } catch (const Error& e) {
      throw Error("kernel " + fs[i].name + ": " + e.what());
    }
  }
  return unit;
}

}  // namespace basin::codegen
