// Expressions: immutable nodes behind shared handles, built only through factories
// that check their invariants.
//
// What the expression language means:
// - Integers are two's-complement with wrap-around on overflow at their bit width.
// - Div on floats is IEEE division. Div on integers truncates toward zero and is meant
//   for divisions known to be exact; FloorDiv and FloorMod round toward negative
//   infinity (Python semantics: floormod(a, b) has the sign of b). Integer division is
//   defined for every operand pair, so that no kernel traps: a zero divisor gives 0
//   (quotient and remainder, as numpy), a divisor of -1 the wrapped negation and a
//   zero remainder (INT_MIN / -1 is INT_MIN). Folding constants refuses a zero divisor
//   (a model dividing by a constant 0 is an error when it is loaded).
// - Float operations round to their own type (float32 ops are float32 ops); nothing is
//   reassociated; Call uses the C math library of the element type.
// - Select(c, a, b) evaluates only the chosen operand, so a guarded out-of-range load
//   in the other operand is never performed (padding relies on this).
// - Operands are evaluated left to right; nothing has side effects.
// - Variables have identity; their name is only a hint for printing.
//
// The node list is declared once (BASIN_EXPR_NODES) and every dispatch derives from it.
// All nodes share one representation (ExprNode): a kind, a dtype, operands, and the
// payload of the few kinds that have one. A pass that changes nothing returns the
// original node, so untouched subtrees stay shared.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/expr/dtype.h"

namespace basin {

// X(Kind, printed symbol, arity; -1 for variable arity)
#define BASIN_EXPR_NODES(X) \
  X(IntImm, "int", 0)       \
  X(FloatImm, "float", 0)   \
  X(Var, "var", 0)          \
  X(Add, "+", 2)            \
  X(Sub, "-", 2)            \
  X(Mul, "*", 2)            \
  X(Div, "/", 2)            \
  X(FloorDiv, "//", 2)      \
  X(FloorMod, "%", 2)       \
  X(Min, "min", 2)          \
  X(Max, "max", 2)          \
  X(EQ, "==", 2)            \
  X(NE, "!=", 2)            \
  X(LT, "<", 2)             \
  X(LE, "<=", 2)            \
  X(GT, ">", 2)             \
  X(GE, ">=", 2)            \
  X(And, "&&", 2)           \
  X(Or, "||", 2)            \
  X(Not, "!", 1)            \
  X(Select, "select", 3)    \
  X(Cast, "cast", 1)        \
  X(Call, "call", -1)       \
  X(Load, "load", -1)

enum class ExprKind : uint8_t {
#define BASIN_X(k, s, n) k,
  BASIN_EXPR_NODES(BASIN_X)
#undef BASIN_X
};
const char* kind_name(ExprKind k);
const char* kind_symbol(ExprKind k);

// Math functions callable through Call. X(name, arity)
// tf32 rounds a float32 to the TF32 format of NVIDIA's tensor cores (10 mantissa bits),
// to nearest with ties away from zero, as PTX's cvt.rna.tf32.f32 does; a float64 is
// rounded to float32 first (round_to_tf32). fp16 and bf16 round a float32 to the
// nearest IEEE half or bfloat16 value (ties to even, overflow to infinity), as PTX's
// cvt.rn.f16.f32 and cvt.rn.bf16.f32 do (round_to_fp16, round_to_bf16).
// rint rounds to the nearest integer, ties to even (C's rint in the default rounding
// mode, numpy's and ONNX's round).
#define BASIN_MATH_FNS(X) \
  X(exp, 1)               \
  X(log, 1)               \
  X(sqrt, 1)              \
  X(rsqrt, 1)             \
  X(pow, 2)               \
  X(sigmoid, 1)           \
  X(tanh, 1)              \
  X(erf, 1)               \
  X(fabs, 1)              \
  X(floor, 1)             \
  X(ceil, 1)              \
  X(rint, 1)              \
  X(sin, 1)               \
  X(cos, 1)               \
  X(tf32, 1)              \
  X(fp16, 1)              \
  X(bf16, 1)

enum class MathFn : uint8_t {
#define BASIN_X(f, n) f,
  BASIN_MATH_FNS(BASIN_X)
#undef BASIN_X
};
const char* math_fn_name(MathFn f);
int math_fn_arity(MathFn f);

// Loop variables and schedule knobs are both variables, told apart by kind.
enum class VarKind : uint8_t { Index, Knob, Param };

// Memory scope of a buffer.
enum class MemScope : uint8_t { Global, Local, Shared };
const char* scope_name(MemScope s);

struct ExprNode;
class Expr;

// A named, typed, shaped region of memory. Identity is the node's address; `id` is a
// stable number for printing and hashing. `producer` is set by core/te for tensors so
// that a tensor read can find the operation that computes it.
struct BufferNode {
  int64_t id;
  std::string name;
  DType dtype;
  std::vector<Expr> shape;
  MemScope scope;
  std::weak_ptr<const void> producer;
};
using Buffer = std::shared_ptr<const BufferNode>;
Buffer make_buffer(std::string name, DType dtype, std::vector<Expr> shape, MemScope scope = MemScope::Global,
                   std::weak_ptr<const void> producer = {});

// Handle to an immutable expression node. A default-constructed Expr is null.
class Expr {
 public:
  Expr() = default;
  Expr(int v);      // NOLINT: an int64 immediate, for index arithmetic
  Expr(int64_t v);  // NOLINT
  Expr(double v);   // NOLINT: a float32 immediate (operators coerce it to the other operand's type)
  explicit Expr(std::shared_ptr<const ExprNode> n) : n_(std::move(n)) {}

  const ExprNode* get() const { return n_.get(); }
  const ExprNode* operator->() const { return n_.get(); }
  const ExprNode& operator*() const { return *n_; }
  explicit operator bool() const { return n_ != nullptr; }
  bool defined() const { return n_ != nullptr; }
  bool same_as(const Expr& o) const { return n_ == o.n_; }

  ExprKind kind() const;
  DType dtype() const;
  const Expr& arg(size_t i) const;
  size_t num_args() const;

 private:
  std::shared_ptr<const ExprNode> n_;
};

struct ExprNode {
  ExprKind kind;
  DType dtype;
  std::vector<Expr> args;
  int64_t ival = 0;  // IntImm value; Var identity
  double fval = 0;   // FloatImm value
  std::string name;  // Var name hint
  VarKind var_kind = VarKind::Index;
  MathFn fn = MathFn::exp;  // Call
  Buffer buffer;            // Load
  size_t hash = 0;          // structural hash, computed at construction
};

// A variable handle: an Expr whose node is a Var.
class Var : public Expr {
 public:
  Var() = default;
  explicit Var(std::string name, DType t = DType::index(), VarKind kind = VarKind::Index);
  explicit Var(const Expr& e);  // checks that e is a Var
  int64_t id() const { return get()->ival; }
  const std::string& name() const { return get()->name; }
};

// ---- factories (each checks its invariants) ----
Expr int_imm(DType t, int64_t v);
Expr float_imm(DType t, double v);
Expr make_const(DType t, double v);  // an immediate of any scalar type
Expr bool_imm(bool v);
Expr make_binary(ExprKind k, Expr a, Expr b);
Expr add(Expr a, Expr b);
Expr sub(Expr a, Expr b);
Expr mul(Expr a, Expr b);
Expr div(Expr a, Expr b);
Expr floordiv(Expr a, Expr b);
Expr floormod(Expr a, Expr b);
// On floats, min and max propagate NaN (as ONNX Runtime and PyTorch do): NaN where
// either operand is NaN, else the smaller (larger) operand; a ReLU, a clip, a max
// pooling or a max reduction of a NaN is NaN. Every evaluator (the interpreter, the
// simplifier's folding, LLVM, the printed CUDA C) keeps this rule.
Expr min(Expr a, Expr b);
Expr max(Expr a, Expr b);
Expr eq(Expr a, Expr b);
Expr ne(Expr a, Expr b);
Expr lt(Expr a, Expr b);
Expr le(Expr a, Expr b);
Expr gt(Expr a, Expr b);
Expr ge(Expr a, Expr b);
Expr logical_and(Expr a, Expr b);
Expr logical_or(Expr a, Expr b);
Expr logical_not(Expr a);
Expr select(Expr cond, Expr t, Expr f);
Expr cast(DType t, Expr a);
Expr call(MathFn f, std::vector<Expr> args);
Expr load(Buffer b, std::vector<Expr> indices);
// Rebuilds a node of e's kind and payload with new operands (mutators use this).
Expr with_args(const Expr& e, std::vector<Expr> args);

// Operators coerce a bare immediate to the other operand's type, so that `x * 2` and
// `f + 1.0` read naturally; otherwise the operand types must agree.
Expr operator+(Expr a, Expr b);
Expr operator-(Expr a, Expr b);
Expr operator*(Expr a, Expr b);
Expr operator/(Expr a, Expr b);
Expr operator-(Expr a);
Expr operator<(Expr a, Expr b);
Expr operator<=(Expr a, Expr b);
Expr operator>(Expr a, Expr b);
Expr operator>=(Expr a, Expr b);
Expr fconst(double v, DType t = DType::f32());

// ---- queries ----
bool is_const_int(const Expr& e, int64_t* v = nullptr);
bool is_const_float(const Expr& e, double* v = nullptr);
bool is_const(const Expr& e);
bool is_zero(const Expr& e);
bool is_one(const Expr& e);
// Integer value of e, which must be an integer immediate (internal check otherwise).
int64_t const_int(const Expr& e);

// ---- structure ----
size_t structural_hash(const Expr& e);
// Structural equality; variables compare by identity unless `var_map` (from the left
// side's variable ids to the right side's) says otherwise.
bool structural_equal(const Expr& a, const Expr& b, const std::unordered_map<int64_t, int64_t>* var_map = nullptr);
// A total order consistent with structural equality, used for canonical ordering.
int structural_compare(const Expr& a, const Expr& b);

// Visits every node below and including e, children first.
void post_order_visit(const Expr& e, const std::function<void(const Expr&)>& f);
// Replaces variables by id.
using VarMap = std::unordered_map<int64_t, Expr>;
Expr substitute(const Expr& e, const VarMap& m);
// True if e uses the variable.
bool uses_var(const Expr& e, const Var& v);

// Rewrites bottom-up: `f` sees each node after its operands were rewritten and returns
// a replacement or a null Expr to keep it. Unchanged subtrees are returned as is.
Expr rewrite_post_order(const Expr& e, const std::function<Expr(const Expr&)>& f);

std::string to_string(const Expr& e);
std::ostream& operator<<(std::ostream& os, const Expr& e);

struct ExprHash {
  size_t operator()(const Expr& e) const { return structural_hash(e); }
};
struct ExprEqual {
  bool operator()(const Expr& a, const Expr& b) const { return structural_equal(a, b); }
};

}  // namespace basin
