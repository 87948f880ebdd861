#include "core/expr/expr.h"

#include "core/expr/evaluate.h"

#include <atomic>
#include <cmath>
#include <cstring>
#include <sstream>

#include "core/util/error.h"

namespace basin {

namespace {

std::atomic<int64_t> g_next_id{1};

size_t hash_combine(size_t seed, size_t v) { return seed ^ (v + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2)); }

size_t compute_hash(const ExprNode& n) {
  size_t h = hash_combine(static_cast<size_t>(n.kind), static_cast<size_t>(n.dtype.code));
  h = hash_combine(h, n.dtype.bits * 131 + n.dtype.lanes);
  switch (n.kind) {
    case ExprKind::IntImm:
    case ExprKind::Var:
      h = hash_combine(h, std::hash<int64_t>()(n.ival));
      break;
    case ExprKind::FloatImm: {
      uint64_t bits;
      std::memcpy(&bits, &n.fval, sizeof bits);
      h = hash_combine(h, std::hash<uint64_t>()(bits));
      break;
    }
    case ExprKind::Call:
      h = hash_combine(h, static_cast<size_t>(n.fn));
      break;
    case ExprKind::Load:
      h = hash_combine(h, std::hash<int64_t>()(n.buffer->id));
      break;
    default:
      break;
  }
  for (const Expr& a : n.args) h = hash_combine(h, a->hash);
  return h;
}

Expr finish(std::shared_ptr<ExprNode> n) {
  n->hash = compute_hash(*n);
  return Expr(std::shared_ptr<const ExprNode>(std::move(n)));
}

std::shared_ptr<ExprNode> node(ExprKind k, DType t, std::vector<Expr> args = {}) {
  auto n = std::make_shared<ExprNode>();
  n->kind = k;
  n->dtype = t;
  n->args = std::move(args);
  return n;
}

void check_defined(const Expr& e, const char* what) { BASIN_CHECK(e) << "null operand to " << what; }

bool is_arith(ExprKind k) {
  return k == ExprKind::Add || k == ExprKind::Sub || k == ExprKind::Mul || k == ExprKind::Div ||
         k == ExprKind::FloorDiv || k == ExprKind::FloorMod || k == ExprKind::Min || k == ExprKind::Max;
}
bool is_compare(ExprKind k) {
  return k == ExprKind::EQ || k == ExprKind::NE || k == ExprKind::LT || k == ExprKind::LE || k == ExprKind::GT ||
         k == ExprKind::GE;
}

// Coerces a bare immediate operand to the type of the other operand.
void coerce(Expr& a, Expr& b) {
  if (a.dtype() == b.dtype()) return;
  if (is_const(a) && !is_const(b) && !b.dtype().is_bool()) {
    double v = a.kind() == ExprKind::IntImm ? static_cast<double>(a->ival) : a->fval;
    a = make_const(b.dtype(), v);
  } else if (is_const(b) && !is_const(a) && !a.dtype().is_bool()) {
    double v = b.kind() == ExprKind::IntImm ? static_cast<double>(b->ival) : b->fval;
    b = make_const(a.dtype(), v);
  }
}

}  // namespace

const char* kind_name(ExprKind k) {
  switch (k) {
#define BASIN_X(kind, s, n) \
  case ExprKind::kind:      \
    return #kind;
    BASIN_EXPR_NODES(BASIN_X)
#undef BASIN_X
  }
  return "?";
}

const char* kind_symbol(ExprKind k) {
  switch (k) {
#define BASIN_X(kind, s, n) \
  case ExprKind::kind:      \
    return s;
    BASIN_EXPR_NODES(BASIN_X)
#undef BASIN_X
  }
  return "?";
}

static int kind_arity(ExprKind k) {
  switch (k) {
#define BASIN_X(kind, s, n) \
  case ExprKind::kind:      \
    return n;
    BASIN_EXPR_NODES(BASIN_X)
#undef BASIN_X
  }
  return -1;
}

const char* math_fn_name(MathFn f) {
  switch (f) {
#define BASIN_X(fn, n) \
  case MathFn::fn:     \
    return #fn;
    BASIN_MATH_FNS(BASIN_X)
#undef BASIN_X
  }
  return "?";
}

int math_fn_arity(MathFn f) {
  switch (f) {
#define BASIN_X(fn, n) \
  case MathFn::fn:     \
    return n;
    BASIN_MATH_FNS(BASIN_X)
#undef BASIN_X
  }
  return 1;
}

const char* scope_name(MemScope s) {
  switch (s) {
    case MemScope::Global:
      return "global";
    case MemScope::Local:
      return "local";
    case MemScope::Shared:
      return "shared";
  }
  return "?";
}

Buffer make_buffer(std::string name, DType dtype, std::vector<Expr> shape, MemScope scope,
                   std::weak_ptr<const void> producer) {
  for (const Expr& s : shape) {
    BASIN_CHECK(s && s.dtype().is_int()) << "buffer " << name << " has a non-integer extent";
    int64_t v;
    BASIN_CHECK(!is_const_int(s, &v) || v >= 0) << "buffer " << name << " has extent " << v;
  }
  auto b = std::make_shared<BufferNode>();
  b->id = g_next_id++;
  b->name = std::move(name);
  b->dtype = dtype;
  b->shape = std::move(shape);
  b->scope = scope;
  b->producer = std::move(producer);
  return b;
}

Expr::Expr(int v) : Expr(int_imm(DType::index(), v)) {}
Expr::Expr(int64_t v) : Expr(int_imm(DType::index(), v)) {}
Expr::Expr(double v) : Expr(float_imm(DType::f32(), v)) {}
ExprKind Expr::kind() const { return n_->kind; }
DType Expr::dtype() const { return n_->dtype; }
const Expr& Expr::arg(size_t i) const { return n_->args[i]; }
size_t Expr::num_args() const { return n_->args.size(); }

Var::Var(std::string name, DType t, VarKind kind) {
  auto n = node(ExprKind::Var, t);
  n->ival = g_next_id++;
  n->name = std::move(name);
  n->var_kind = kind;
  static_cast<Expr&>(*this) = finish(std::move(n));
}

Var::Var(const Expr& e) : Expr(e) { BASIN_CHECK(e && e.kind() == ExprKind::Var) << "not a variable: " << e; }

Expr int_imm(DType t, int64_t v) {
  BASIN_CHECK(t.is_int() || t.is_uint() || t.is_bool()) << "int_imm of type " << t.str();
  auto n = node(ExprKind::IntImm, t);
  n->ival = wrap_to(t.element(), v);  // to the bit width
  return finish(std::move(n));
}

Expr float_imm(DType t, double v) {
  BASIN_CHECK(t.is_float()) << "float_imm of type " << t.str();
  auto n = node(ExprKind::FloatImm, t);
  n->fval = t.bits == 32 ? static_cast<double>(static_cast<float>(v)) : v;
  return finish(std::move(n));
}

Expr make_const(DType t, double v) {
  if (t.is_float()) return float_imm(t, v);
  return int_imm(t, static_cast<int64_t>(v));
}

Expr bool_imm(bool v) { return int_imm(DType::boolean(), v); }

Expr make_binary(ExprKind k, Expr a, Expr b) {
  check_defined(a, kind_name(k));
  check_defined(b, kind_name(k));
  BASIN_CHECK(a.dtype() == b.dtype()) << kind_name(k) << " of " << a.dtype().str() << " and " << b.dtype().str() << ": "
                                      << a << " , " << b;
  DType t = a.dtype();
  BASIN_CHECK(!t.is_bf16()) << kind_name(k) << " of bfloat16 operands (a storage type: cast to float32 first)";
  BASIN_CHECK(!t.is_byte()) << kind_name(k) << " of " << t.str() << " operands (a storage type: cast to int32 first)";
  if (is_arith(k)) {
    BASIN_CHECK(!t.is_bool()) << kind_name(k) << " of bool operands";
    if (k == ExprKind::FloorDiv || k == ExprKind::FloorMod)
      BASIN_CHECK(t.is_int()) << kind_name(k) << " needs integer operands, got " << t.str();
  } else if (is_compare(k)) {
    t = DType::boolean().with_lanes(t.lanes);
  } else if (k == ExprKind::And || k == ExprKind::Or) {
    BASIN_CHECK(t.is_bool()) << kind_name(k) << " needs bool operands";
  } else {
    BASIN_CHECK(false) << kind_name(k) << " is not binary";
  }
  return finish(node(k, t, {std::move(a), std::move(b)}));
}

Expr add(Expr a, Expr b) { return make_binary(ExprKind::Add, std::move(a), std::move(b)); }
Expr sub(Expr a, Expr b) { return make_binary(ExprKind::Sub, std::move(a), std::move(b)); }
Expr mul(Expr a, Expr b) { return make_binary(ExprKind::Mul, std::move(a), std::move(b)); }
Expr div(Expr a, Expr b) { return make_binary(ExprKind::Div, std::move(a), std::move(b)); }
Expr floordiv(Expr a, Expr b) { return make_binary(ExprKind::FloorDiv, std::move(a), std::move(b)); }
Expr floormod(Expr a, Expr b) { return make_binary(ExprKind::FloorMod, std::move(a), std::move(b)); }
Expr min(Expr a, Expr b) { return make_binary(ExprKind::Min, std::move(a), std::move(b)); }
Expr max(Expr a, Expr b) { return make_binary(ExprKind::Max, std::move(a), std::move(b)); }
Expr eq(Expr a, Expr b) { return make_binary(ExprKind::EQ, std::move(a), std::move(b)); }
Expr ne(Expr a, Expr b) { return make_binary(ExprKind::NE, std::move(a), std::move(b)); }
Expr lt(Expr a, Expr b) { return make_binary(ExprKind::LT, std::move(a), std::move(b)); }
Expr le(Expr a, Expr b) { return make_binary(ExprKind::LE, std::move(a), std::move(b)); }
Expr gt(Expr a, Expr b) { return make_binary(ExprKind::GT, std::move(a), std::move(b)); }
Expr ge(Expr a, Expr b) { return make_binary(ExprKind::GE, std::move(a), std::move(b)); }
Expr logical_and(Expr a, Expr b) { return make_binary(ExprKind::And, std::move(a), std::move(b)); }
Expr logical_or(Expr a, Expr b) { return make_binary(ExprKind::Or, std::move(a), std::move(b)); }

Expr logical_not(Expr a) {
  check_defined(a, "Not");
  BASIN_CHECK(a.dtype().is_bool()) << "Not of " << a.dtype().str();
  DType t = a.dtype();
  return finish(node(ExprKind::Not, t, {std::move(a)}));
}

Expr select(Expr c, Expr t, Expr f) {
  check_defined(c, "Select");
  check_defined(t, "Select");
  check_defined(f, "Select");
  coerce(t, f);
  BASIN_CHECK(c.dtype().is_bool()) << "Select condition of type " << c.dtype().str();
  BASIN_CHECK(!t.dtype().is_bf16()) << "Select of bfloat16 values (a storage type: cast to float32 first)";
  BASIN_CHECK(t.dtype() == f.dtype()) << "Select branches of " << t.dtype().str() << " and " << f.dtype().str();
  DType ty = t.dtype();
  return finish(node(ExprKind::Select, ty, {std::move(c), std::move(t), std::move(f)}));
}

Expr cast(DType t, Expr a) {
  check_defined(a, "Cast");
  BASIN_CHECK(t.lanes == a.dtype().lanes) << "Cast changes lanes";
  BASIN_CHECK(!(t.is_bf16() || a.dtype().is_bf16()) || (t.is_float() && t.bits == 32) ||
              (a.dtype().is_float() && a.dtype().bits == 32) || t == a.dtype())
      << "Cast between " << a.dtype().str() << " and " << t.str() << " (bfloat16 casts only to and from float32)";
  return finish(node(ExprKind::Cast, t, {std::move(a)}));
}

Expr call(MathFn f, std::vector<Expr> args) {
  BASIN_CHECK(static_cast<int>(args.size()) == math_fn_arity(f))
      << math_fn_name(f) << " takes " << math_fn_arity(f) << " arguments";
  for (const Expr& a : args) {
    check_defined(a, math_fn_name(f));
    BASIN_CHECK(a.dtype().is_float()) << math_fn_name(f) << " of " << a.dtype().str();
    BASIN_CHECK(a.dtype() == args[0].dtype()) << math_fn_name(f) << " of mixed types";
  }
  DType t = args[0].dtype();
  auto n = node(ExprKind::Call, t, std::move(args));
  n->fn = f;
  return finish(std::move(n));
}

Expr load(Buffer b, std::vector<Expr> indices) {
  BASIN_CHECK(b) << "load from a null buffer";
  BASIN_CHECK(indices.size() == b->shape.size() || indices.size() == 1)
      << "load from " << b->name << " with " << indices.size() << " indices, rank " << b->shape.size();
  for (const Expr& i : indices) {
    check_defined(i, "Load");
    BASIN_CHECK(i.dtype().is_int()) << "index of type " << i.dtype().str() << " into " << b->name;
  }
  DType t = b->dtype;
  auto n = node(ExprKind::Load, t, std::move(indices));
  n->buffer = std::move(b);
  return finish(std::move(n));
}

Expr with_args(const Expr& e, std::vector<Expr> args) {
  const ExprNode& n = *e;
  switch (n.kind) {
    case ExprKind::IntImm:
    case ExprKind::FloatImm:
    case ExprKind::Var:
      return e;
    case ExprKind::Not:
      return logical_not(args[0]);
    case ExprKind::Select:
      return select(args[0], args[1], args[2]);
    case ExprKind::Cast:
      return cast(n.dtype, args[0]);
    case ExprKind::Call:
      return call(n.fn, std::move(args));
    case ExprKind::Load:
      return load(n.buffer, std::move(args));
    default:
      return make_binary(n.kind, args[0], args[1]);
  }
}

Expr operator+(Expr a, Expr b) {
  coerce(a, b);
  return add(a, b);
}
Expr operator-(Expr a, Expr b) {
  coerce(a, b);
  return sub(a, b);
}
Expr operator*(Expr a, Expr b) {
  coerce(a, b);
  return mul(a, b);
}
Expr operator/(Expr a, Expr b) {
  coerce(a, b);
  return div(a, b);
}
Expr operator-(Expr a) { return sub(make_const(a.dtype(), 0), a); }
Expr operator<(Expr a, Expr b) {
  coerce(a, b);
  return lt(a, b);
}
Expr operator<=(Expr a, Expr b) {
  coerce(a, b);
  return le(a, b);
}
Expr operator>(Expr a, Expr b) {
  coerce(a, b);
  return gt(a, b);
}
Expr operator>=(Expr a, Expr b) {
  coerce(a, b);
  return ge(a, b);
}
Expr fconst(double v, DType t) { return float_imm(t, v); }

bool is_const_int(const Expr& e, int64_t* v) {
  if (!e || e.kind() != ExprKind::IntImm) return false;
  if (v) *v = e->ival;
  return true;
}
bool is_const_float(const Expr& e, double* v) {
  if (!e || e.kind() != ExprKind::FloatImm) return false;
  if (v) *v = e->fval;
  return true;
}
bool is_const(const Expr& e) { return is_const_int(e) || is_const_float(e); }
bool is_zero(const Expr& e) { return (is_const_int(e) && e->ival == 0) || (is_const_float(e) && e->fval == 0.0); }
bool is_one(const Expr& e) { return (is_const_int(e) && e->ival == 1) || (is_const_float(e) && e->fval == 1.0); }
int64_t const_int(const Expr& e) {
  int64_t v = 0;
  BASIN_CHECK(is_const_int(e, &v)) << "expected an integer constant, got " << e;
  return v;
}

size_t structural_hash(const Expr& e) { return e ? e->hash : 0; }

bool structural_equal(const Expr& a, const Expr& b, const std::unordered_map<int64_t, int64_t>* var_map) {
  if (a.same_as(b)) return true;
  if (!a || !b) return false;
  const ExprNode& x = *a;
  const ExprNode& y = *b;
  if (x.kind != y.kind || x.dtype != y.dtype || x.args.size() != y.args.size()) return false;
  if (!var_map && x.hash != y.hash) return false;
  switch (x.kind) {
    case ExprKind::IntImm:
      if (x.ival != y.ival) return false;
      break;
    case ExprKind::FloatImm:
      if (!(x.fval == y.fval || (std::isnan(x.fval) && std::isnan(y.fval)))) return false;
      break;
    case ExprKind::Var: {
      if (var_map) {
        auto it = var_map->find(x.ival);
        if (it != var_map->end()) return it->second == y.ival;
      }
      return x.ival == y.ival;
    }
    case ExprKind::Call:
      if (x.fn != y.fn) return false;
      break;
    case ExprKind::Load:
      if (x.buffer != y.buffer) return false;
      break;
    default:
      break;
  }
  for (size_t i = 0; i < x.args.size(); ++i)
    if (!structural_equal(x.args[i], y.args[i], var_map)) return false;
  return true;
}

int structural_compare(const Expr& a, const Expr& b) {
  if (a.same_as(b)) return 0;
  const ExprNode& x = *a;
  const ExprNode& y = *b;
  auto cmp = [](auto p, auto q) { return p < q ? -1 : (q < p ? 1 : 0); };
  if (int c = cmp(static_cast<int>(x.kind), static_cast<int>(y.kind))) return c;
  if (int c = cmp(x.dtype.code, y.dtype.code)) return c;
  if (int c = cmp(x.dtype.bits, y.dtype.bits)) return c;
  if (int c = cmp(x.dtype.lanes, y.dtype.lanes)) return c;
  switch (x.kind) {
    case ExprKind::IntImm:
    case ExprKind::Var:
      if (int c = cmp(x.ival, y.ival)) return c;
      break;
    case ExprKind::FloatImm:
      if (int c = cmp(x.fval, y.fval)) return c;
      break;
    case ExprKind::Call:
      if (int c = cmp(static_cast<int>(x.fn), static_cast<int>(y.fn))) return c;
      break;
    case ExprKind::Load:
      if (int c = cmp(x.buffer->id, y.buffer->id)) return c;
      break;
    default:
      break;
  }
  if (int c = cmp(x.args.size(), y.args.size())) return c;
  for (size_t i = 0; i < x.args.size(); ++i)
    if (int c = structural_compare(x.args[i], y.args[i])) return c;
  return 0;
}

void post_order_visit(const Expr& e, const std::function<void(const Expr&)>& f) {
  for (const Expr& a : e->args) post_order_visit(a, f);
  f(e);
}

Expr rewrite_post_order(const Expr& e, const std::function<Expr(const Expr&)>& f) {
  Expr cur = e;
  if (!e->args.empty()) {
    std::vector<Expr> args;
    bool changed = false;
    args.reserve(e->args.size());
    for (const Expr& a : e->args) {
      args.push_back(rewrite_post_order(a, f));
      changed |= !args.back().same_as(a);
    }
    if (changed) cur = with_args(e, std::move(args));
  }
  Expr r = f(cur);
  return r ? r : cur;
}

Expr substitute(const Expr& e, const VarMap& m) {
  if (m.empty()) return e;
  return rewrite_post_order(e, [&](const Expr& x) -> Expr {
    if (x.kind() != ExprKind::Var) return Expr();
    auto it = m.find(x->ival);
    return it == m.end() ? Expr() : it->second;
  });
}

bool uses_var(const Expr& e, const Var& v) {
  if (e.kind() == ExprKind::Var) return e->ival == v.id();
  for (const Expr& a : e->args)
    if (uses_var(a, v)) return true;
  return false;
}

namespace {
void print(std::ostream& os, const Expr& e) {
  if (!e) {
    os << "<null>";
    return;
  }
  const ExprNode& n = *e;
  switch (n.kind) {
    case ExprKind::IntImm:
      if (n.dtype.is_bool()) os << (n.ival ? "true" : "false");
      else if (n.dtype == DType::index()) os << n.ival;
      else os << n.dtype.str() << "(" << n.ival << ")";
      return;
    case ExprKind::FloatImm: {
      std::ostringstream s;
      s.precision(9);
      s << n.fval;
      std::string t = s.str();
      if (t.find_first_of(".einn") == std::string::npos) t += ".0";
      os << t << (n.dtype.bits == 32 ? "f" : "");
      return;
    }
    case ExprKind::Var:
      os << n.name;
      return;
    case ExprKind::Not:
      os << "!";
      print(os, n.args[0]);
      return;
    case ExprKind::Cast:
      os << n.dtype.str() << "(";
      print(os, n.args[0]);
      os << ")";
      return;
    case ExprKind::Min:
    case ExprKind::Max:
    case ExprKind::Select:
    case ExprKind::Call:
      os << (n.kind == ExprKind::Call ? math_fn_name(n.fn) : kind_symbol(n.kind)) << "(";
      for (size_t i = 0; i < n.args.size(); ++i) {
        if (i) os << ", ";
        print(os, n.args[i]);
      }
      os << ")";
      return;
    case ExprKind::Load:
      os << n.buffer->name << "[";
      for (size_t i = 0; i < n.args.size(); ++i) {
        if (i) os << ", ";
        print(os, n.args[i]);
      }
      os << "]";
      return;
    default:
      BASIN_CHECK(kind_arity(n.kind) == 2) << "printer: " << kind_name(n.kind);
      os << "(";
      print(os, n.args[0]);
      os << " " << kind_symbol(n.kind) << " ";
      print(os, n.args[1]);
      os << ")";
      return;
  }
}
}  // namespace

std::string to_string(const Expr& e) {
  std::ostringstream os;
  print(os, e);
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Expr& e) {
  print(os, e);
  return os;
}

}  // namespace basin
