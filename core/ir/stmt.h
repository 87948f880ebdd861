// Loop IR statements: the program form that lowering produces, passes transform,
// backends compile and the interpreter runs.
//
// What a statement means:
// - For runs its body for var = min, min+1, ..., min+extent-1. The kind is a promise
//   or a binding, never a change of meaning: parallel, vectorized and unrolled loops
//   compute what the serial loop computes (iterations of a parallel or vectorized loop
//   must not depend on each other); GPU kinds bind the loop to blocks, threads or
//   virtual threads.
// - Allocate makes a buffer that lives for its body; its contents start undefined (the
//   interpreter fills floats with NaN so that a read before a write shows).
// - Store writes value at a flat (or, before flattening, multi-dimensional) index;
//   every access must be in bounds.
// - Barrier synchronizes the threads of a GPU block. GPU code is written in phases:
//   a block loop's body runs on every thread of the block; a thread loop inside it is
//   each thread's own iteration; a Barrier sits in the block, between thread loops,
//   never inside one. Run one thread after another (the interpreter), a phase then
//   computes what the threads compute together. A Local buffer allocated in the block
//   outside the thread loops is per thread: its first dimension is the thread index,
//   and every access indexes it by the enclosing thread loop's variable.
// - Pragma attaches a key/value hint (e.g. "auto_unroll_max_step") to its body; the
//   value is an integer expression, constant once knobs have values.
// - The Pragma kBf16DotPragma marks one store of a pair of bfloat16 products,
//     acc[I] = (acc[I] + f32(a[i + 1]) * f32(b[j + 1])) + f32(a[i]) * f32(b[j]),
//   a and b bfloat16 buffers: what AVX512-BF16's vdpbf16ps computes per float32 lane
//   (the products are exact in float32). Inside a vectorized loop whose lanes read
//   acc contiguously, a's pair the same for every lane and b's pairs side by side
//   (lane l at j + 2l), the LLVM backend emits it as that instruction where the CPU
//   has it; the interpreter, and every other backend, run the store as written.
// - The Pragma kInt8DotPragma marks one store of a group of four 8-bit products,
//     acc[I] = (((acc[I] + i32(a[i]) * i32(b[j])) + i32(a[i + 1]) * i32(b[j + 1]))
//              + i32(a[i + 2]) * i32(b[j + 2])) + i32(a[i + 3]) * i32(b[j + 3]),
//   acc int32, a uint8 and b int8 buffers: what vpdpbusd (AVX512-VNNI, AVX-VNNI)
//   computes per int32 lane (every sum wraps as int32 does, so the order is free).
//   Inside a vectorized loop whose lanes read acc contiguously, a's group the same for
//   every lane and b's groups side by side (lane l at j + 4l), the LLVM backend emits
//   it as that instruction where the CPU has it, else (AVX2, AVX-512) as vpmaddwd on
//   the bytes widened to 16 bits; elsewhere the store runs as written.
// - The Pragma kAmxBf16Pragma marks a product of bfloat16 tiles accumulated in float32
//   (AMX-BF16), the nest
//     for kb < KB: for tm < TM: for tn < TN: for kp < 16: for r < 16:
//       for c < 16 (vectorized): kBf16DotPragma store
//         acc[R(tm) + r, C(tn) + c] += a[A(kb, tm) + r * sa + 2 kp + q] * b[B(kb, tn) + kp * 32 + 2 c + q]
//   (q = 1 then 0, every index affine): C tiles of 16 x 16 float32 in acc, A tiles of 16
//   rows of 16 pairs, B tiles of 16 pairs of rows of 16 columns' pairs. Where the CPU has
//   AMX-BF16 (HostInfo::amx_bf16) the LLVM backend loads the TM x TN accumulator tiles,
//   runs the kb loop as TM + TN tile loads and TM x TN tdpbf16ps per step (the tiles
//   live in tile registers, TM x TN + TM + TN <= 8) and stores them back; elsewhere the
//   nest runs as written (vdpbf16ps where the CPU has that). The pragma's value 0 says
//   acc holds zeros where the nest starts (the tiles then start as tilezero instead of
//   loads of what was just stored); 1 that it holds partial sums to add to.
// - The Pragma kAmxInt8Pragma marks the same nest over 8-bit groups (AMX-INT8),
//     for kb < KB: for tm < TM: for tn < TN: for kp < 16: for r < 16:
//       for c < 16 (vectorized): kInt8DotPragma store
//         acc[R(tm) + r, C(tn) + c] += sum over q < 4 of
//             i32(a[A(kb, tm) + r * sa + 4 kp + q]) * i32(b[B(kb, tn) + kp * 64 + 4 c + q])
//   acc int32, a uint8 and b int8: C tiles of 16 x 16 int32, A tiles of 16 rows of 16
//   groups of 4, B tiles of 16 groups of rows of 16 columns' groups. Where the CPU has
//   AMX-INT8 (HostInfo::amx_int8) the LLVM backend runs it as kAmxBf16Pragma's nest with
//   tdpbusd; elsewhere as written (vpdpbusd where the CPU has that). Exact: int32 sums
//   wrap alike in any order. The value means what kAmxBf16Pragma's does.
// The node list is declared once (BASIN_STMT_NODES); all nodes share StmtNode.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/expr/expr.h"

namespace basin {

#define BASIN_STMT_NODES(X) \
  X(For)                    \
  X(Allocate)               \
  X(Store)                  \
  X(IfThenElse)             \
  X(Seq)                    \
  X(Barrier)                \
  X(Pragma)

enum class StmtKind : uint8_t {
#define BASIN_X(k) k,
  BASIN_STMT_NODES(BASIN_X)
#undef BASIN_X
};
const char* stmt_kind_name(StmtKind k);

#define BASIN_FOR_KINDS(X)                                                                          \
  X(Serial, "serial")                                                                               \
  X(Parallel, "parallel")                                                                           \
  X(Vectorized, "vectorized")                                                                       \
  X(Unrolled, "unrolled")                                                                           \
  X(BlockX, "blockIdx.x") X(BlockY, "blockIdx.y") X(BlockZ, "blockIdx.z") X(ThreadX, "threadIdx.x") \
      X(ThreadY, "threadIdx.y") X(ThreadZ, "threadIdx.z") X(VThread, "vthread")

enum class ForKind : uint8_t {
#define BASIN_X(k, s) k,
  BASIN_FOR_KINDS(BASIN_X)
#undef BASIN_X
};
const char* for_kind_name(ForKind k);
bool is_gpu_thread(ForKind k);  // threadIdx.*
bool is_gpu_block(ForKind k);   // blockIdx.* (a Barrier sits inside one, outside thread loops)
bool is_gpu_kind(ForKind k);

struct StmtNode;
class Stmt {
 public:
  Stmt() = default;
  explicit Stmt(std::shared_ptr<const StmtNode> n) : n_(std::move(n)) {}
  const StmtNode* get() const { return n_.get(); }
  const StmtNode* operator->() const { return n_.get(); }
  const StmtNode& operator*() const { return *n_; }
  explicit operator bool() const { return n_ != nullptr; }
  bool defined() const { return n_ != nullptr; }
  bool same_as(const Stmt& o) const { return n_ == o.n_; }
  StmtKind kind() const;

 private:
  std::shared_ptr<const StmtNode> n_;
};

struct StmtNode {
  StmtKind kind;
  // For
  Var var;
  Expr min, extent;
  ForKind for_kind = ForKind::Serial;
  // Allocate (the buffer it makes) and Store (the buffer it writes)
  Buffer buffer;
  // Store
  std::vector<Expr> indices;
  Expr value;
  // IfThenElse
  Expr cond;
  // Pragma
  std::string key;
  Expr pragma_value;  // an integer expression (a knob variable in symbolic lowering)
  // For/Allocate/Pragma: {body}; IfThenElse: {then} or {then, else}; Seq: the items
  std::vector<Stmt> body;
};

inline constexpr const char* kBf16DotPragma = "bf16.dot2";
inline constexpr const char* kInt8DotPragma = "int8.dot4";
inline constexpr const char* kAmxBf16Pragma = "amx.bf16";
inline constexpr const char* kAmxInt8Pragma = "amx.int8";

Stmt make_for(Var v, Expr min, Expr extent, ForKind kind, Stmt body);
Stmt make_allocate(Buffer b, Stmt body);
Stmt make_store(Buffer b, std::vector<Expr> indices, Expr value);
Stmt make_if(Expr cond, Stmt then_case, Stmt else_case = Stmt());
// Flattens nested sequences; a sequence of one statement is that statement.
Stmt make_seq(std::vector<Stmt> items);
Stmt make_barrier();
Stmt make_pragma(std::string key, Expr value, Stmt body);

// A lowered kernel: buffers in argument order (inputs, then outputs) and its body.
struct LoweredFunc {
  std::string name;
  std::vector<Buffer> params;
  std::vector<int> output_params;  // indices into params of the outputs
  Stmt body;
};

// Rebuilds a statement bottom-up: `expr_fn` rewrites every expression, `stmt_fn` sees
// each statement after its children were rebuilt and may return a replacement (or a
// null Stmt to keep it). Unchanged subtrees are returned as is.
Stmt rewrite_stmt(const Stmt& s, const std::function<Expr(const Expr&)>& expr_fn,
                  const std::function<Stmt(const Stmt&)>& stmt_fn = nullptr);
void visit_stmt(const Stmt& s, const std::function<void(const Stmt&)>& pre);

// Structural equality; loop variables bound consistently on both sides compare equal.
bool structural_equal(const Stmt& a, const Stmt& b);

std::string to_string(const Stmt& s);
std::string to_string(const LoweredFunc& f);
std::ostream& operator<<(std::ostream& os, const Stmt& s);

}  // namespace basin
