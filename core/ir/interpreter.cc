#include "core/ir/interpreter.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <unordered_map>

#include "core/expr/analyzer.h"
#include "core/expr/evaluate.h"
#include "core/util/error.h"

namespace basin {

namespace {

struct BufSlot {
  uint8_t* data = nullptr;
  int64_t numel = 0;
};

struct Frame {
  int64_t* iv;
  BufSlot* bufs;
};

struct IE {
  virtual ~IE() = default;
  virtual int64_t ev(Frame& fr) const = 0;
};
template <typename T>
struct FE {
  virtual ~FE() = default;
  virtual T ev(Frame& fr) const = 0;
};
struct SE {
  virtual ~SE() = default;
  virtual void run(Frame& fr) const = 0;
};
using IEP = std::unique_ptr<IE>;
template <typename T>
using FEP = std::unique_ptr<FE<T>>;
using SEP = std::unique_ptr<SE>;

template <typename F>
struct IFn final : IE {
  F f;
  explicit IFn(F fn) : f(std::move(fn)) {}
  int64_t ev(Frame& fr) const override { return f(fr); }
};
template <typename T, typename F>
struct FFn final : FE<T> {
  F f;
  explicit FFn(F fn) : f(std::move(fn)) {}
  T ev(Frame& fr) const override { return f(fr); }
};
template <typename F>
struct SFn final : SE {
  F f;
  explicit SFn(F fn) : f(std::move(fn)) {}
  void run(Frame& fr) const override { f(fr); }
};
template <typename F>
IEP mk_i(F f) {
  return std::make_unique<IFn<F>>(std::move(f));
}
template <typename T, typename F>
FEP<T> mk_f(F f) {
  return std::make_unique<FFn<T, F>>(std::move(f));
}
template <typename F>
SEP mk_s(F f) {
  return std::make_unique<SFn<F>>(std::move(f));
}

[[noreturn]] void out_of_bounds(const BufferNode* b, int64_t i, int64_t n, bool write) {
  throw RuntimeError(std::string("out-of-bounds ") + (write ? "write to '" : "read of '") + b->name +
                     "' at flat index " + std::to_string(i) + " (size " + std::to_string(n) + ")");
}

inline int64_t wrap(int64_t v, int bits) { return bits >= 64 ? v : wrap_int(v, bits); }

template <typename T>
T math(MathFn f, T a, T b) {
  switch (f) {
    case MathFn::exp:
      return std::exp(a);
    case MathFn::log:
      return std::log(a);
    case MathFn::sqrt:
      return std::sqrt(a);
    case MathFn::rsqrt:
      return T(1) / std::sqrt(a);
    case MathFn::pow:
      return std::pow(a, b);
    case MathFn::sigmoid:
      return T(1) / (T(1) + std::exp(-a));
    case MathFn::tanh:
      return std::tanh(a);
    case MathFn::erf:
      return std::erf(a);
    case MathFn::fabs:
      return std::fabs(a);
    case MathFn::floor:
      return std::floor(a);
    case MathFn::ceil:
      return std::ceil(a);
    case MathFn::rint:
      return std::nearbyint(a);
    case MathFn::sin:
      return std::sin(a);
    case MathFn::cos:
      return std::cos(a);
    case MathFn::tf32:
      return static_cast<T>(round_to_tf32(static_cast<float>(a)));
    case MathFn::fp16:
      return static_cast<T>(round_to_fp16(static_cast<float>(a)));
    case MathFn::bf16:
      return static_cast<T>(round_to_bf16(static_cast<float>(a)));
  }
  return a;
}

class Compiler {
 public:
  std::unordered_map<int64_t, int> var_slot;
  std::unordered_map<const BufferNode*, int> buf_slot;
  int n_vars = 0;

  int slot_of_buffer(const BufferNode* b) {
    auto it = buf_slot.find(b);
    if (it == buf_slot.end()) throw RuntimeError("buffer '" + b->name + "' is neither a parameter nor allocated");
    return it->second;
  }

  // Row-major flat index of a multi-dimensional access.
  static Expr flat_index(const Buffer& b, const std::vector<Expr>& idx) {
    if (idx.size() == 1) return idx[0];
    if (idx.empty()) return Expr(0);
    Expr flat = idx[0];
    for (size_t i = 1; i < idx.size(); ++i) flat = flat * b->shape[i] + idx[i];
    return flat;
  }

  // Index arithmetic is mostly affine in loop variables: one node evaluates
  // c0 + sum(c_k * v_k) instead of a tree of additions and multiplications.
  IEP affine(const Expr& e) {
    LinearForm f = Analyzer().linear_form(e);
    if (f.terms.empty() || f.terms.size() > 8) return nullptr;
    std::vector<std::pair<int, int64_t>> t;
    for (const auto& [term, c] : f.terms) {
      if (term.kind() != ExprKind::Var || !var_slot.count(term->ival)) return nullptr;
      t.emplace_back(var_slot.at(term->ival), c);
    }
    int64_t c0 = f.constant;
    auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
    switch (t.size()) {
      case 1: {
        auto [s0, k0] = t[0];
        if (k0 == 1) return mk_i([s0, c0, u](Frame& fr) { return static_cast<int64_t>(u(fr.iv[s0]) + u(c0)); });
        return mk_i([s0, k0, c0, u](Frame& fr) { return static_cast<int64_t>(u(fr.iv[s0]) * u(k0) + u(c0)); });
      }
      case 2: {
        auto [s0, k0] = t[0];
        auto [s1, k1] = t[1];
        return mk_i(
            [=](Frame& fr) { return static_cast<int64_t>(u(fr.iv[s0]) * u(k0) + u(fr.iv[s1]) * u(k1) + u(c0)); });
      }
      case 3: {
        auto [s0, k0] = t[0];
        auto [s1, k1] = t[1];
        auto [s2, k2] = t[2];
        return mk_i([=](Frame& fr) {
          return static_cast<int64_t>(u(fr.iv[s0]) * u(k0) + u(fr.iv[s1]) * u(k1) + u(fr.iv[s2]) * u(k2) + u(c0));
        });
      }
      default: {
        auto terms = t;
        return mk_i([terms, c0, u](Frame& fr) {
          uint64_t acc = u(c0);
          for (const auto& [s, k] : terms) acc += u(fr.iv[s]) * u(k);
          return static_cast<int64_t>(acc);
        });
      }
    }
  }

  IEP ci(const Expr& e) {
    const ExprNode& n = *e;
    BASIN_CHECK(!n.dtype.is_float()) << "integer compile of " << e;
    int bits = n.dtype.is_bool() ? 64 : n.dtype.bits;
    if (bits == 64 && n.dtype.is_int() &&
        (n.kind == ExprKind::Add || n.kind == ExprKind::Sub || n.kind == ExprKind::Mul))
      if (IEP a = affine(e)) return a;
    switch (n.kind) {
      case ExprKind::IntImm: {
        int64_t v = n.ival;
        return mk_i([v](Frame&) { return v; });
      }
      case ExprKind::Var: {
        auto it = var_slot.find(n.ival);
        if (it == var_slot.end()) throw RuntimeError("unbound variable '" + n.name + "'");
        int s = it->second;
        return mk_i([s](Frame& fr) { return fr.iv[s]; });
      }
      case ExprKind::Add:
      case ExprKind::Sub:
      case ExprKind::Mul: {
        int64_t c;
        if (n.kind != ExprKind::Sub && is_const_int(n.args[1], &c) && bits == 64) {
          IEP a = ci(n.args[0]);
          if (n.kind == ExprKind::Add)
            return mk_i([a = std::move(a), c](Frame& fr) {
              return static_cast<int64_t>(static_cast<uint64_t>(a->ev(fr)) + static_cast<uint64_t>(c));
            });
          return mk_i([a = std::move(a), c](Frame& fr) {
            return static_cast<int64_t>(static_cast<uint64_t>(a->ev(fr)) * static_cast<uint64_t>(c));
          });
        }
        IEP a = ci(n.args[0]), b = ci(n.args[1]);
        ExprKind k = n.kind;
        return mk_i([a = std::move(a), b = std::move(b), k, bits](Frame& fr) {
          uint64_t x = static_cast<uint64_t>(a->ev(fr)), y = static_cast<uint64_t>(b->ev(fr));
          uint64_t r = k == ExprKind::Add ? x + y : (k == ExprKind::Sub ? x - y : x * y);
          return wrap(static_cast<int64_t>(r), bits);
        });
      }
      case ExprKind::Div:
      case ExprKind::FloorDiv:
      case ExprKind::FloorMod: {
        IEP a = ci(n.args[0]), b = ci(n.args[1]);
        ExprKind k = n.kind;
        return mk_i([a = std::move(a), b = std::move(b), k, bits](Frame& fr) {
          int64_t x = a->ev(fr), y = b->ev(fr);
          if (y == 0) return int64_t{0};  // defined: a zero divisor gives 0 (codegen/llvm_emit.cc)
          if (y == -1)
            return wrap(k == ExprKind::FloorMod ? 0 : static_cast<int64_t>(0 - static_cast<uint64_t>(x)), bits);
          if (k == ExprKind::Div) return x / y;
          return k == ExprKind::FloorDiv ? floordiv_int(x, y) : floormod_int(x, y);
        });
      }
      case ExprKind::Min:
      case ExprKind::Max: {
        IEP a = ci(n.args[0]), b = ci(n.args[1]);
        if (n.kind == ExprKind::Min)
          return mk_i([a = std::move(a), b = std::move(b)](Frame& fr) { return std::min(a->ev(fr), b->ev(fr)); });
        return mk_i([a = std::move(a), b = std::move(b)](Frame& fr) { return std::max(a->ev(fr), b->ev(fr)); });
      }
      case ExprKind::EQ:
      case ExprKind::NE:
      case ExprKind::LT:
      case ExprKind::LE:
      case ExprKind::GT:
      case ExprKind::GE: {
        DType t = n.args[0].dtype();
        if (t == DType::f32()) return compare<float>(n);
        if (t.is_float()) return compare<double>(n);
        return compare_int(n);
      }
      case ExprKind::And: {
        IEP a = ci(n.args[0]), b = ci(n.args[1]);
        return mk_i([a = std::move(a), b = std::move(b)](Frame& fr) -> int64_t { return a->ev(fr) && b->ev(fr); });
      }
      case ExprKind::Or: {
        IEP a = ci(n.args[0]), b = ci(n.args[1]);
        return mk_i([a = std::move(a), b = std::move(b)](Frame& fr) -> int64_t { return a->ev(fr) || b->ev(fr); });
      }
      case ExprKind::Not: {
        IEP a = ci(n.args[0]);
        return mk_i([a = std::move(a)](Frame& fr) -> int64_t { return !a->ev(fr); });
      }
      case ExprKind::Select: {
        IEP c = ci(n.args[0]), a = ci(n.args[1]), b = ci(n.args[2]);
        return mk_i([c = std::move(c), a = std::move(a), b = std::move(b)](Frame& fr) {
          return c->ev(fr) ? a->ev(fr) : b->ev(fr);
        });
      }
      case ExprKind::Cast: {
        DType from = n.args[0].dtype();
        bool to_bool = n.dtype.is_bool();
        // bfloat16 values are carried as their 16 bits (a storage type: DType::bf16).
        if (n.dtype.is_bf16()) {
          if (from.is_bf16()) return ci(n.args[0]);
          FEP<float> a = cf<float>(n.args[0]);
          return mk_i([a = std::move(a)](Frame& fr) -> int64_t { return bf16_bits(a->ev(fr)); });
        }
        const DType to = n.dtype.element();
        if (from.is_float()) {
          auto conv = [to, to_bool](double v) -> int64_t {
            if (to_bool) return v != 0;
            if (to.is_byte()) return saturate_to_byte(to, v);
            if (!std::isfinite(v)) throw RuntimeError("cast of a non-finite float to an integer");
            return wrap_to(to, static_cast<int64_t>(v));
          };
          if (from == DType::f32()) {
            FEP<float> a = cf<float>(n.args[0]);
            return mk_i([a = std::move(a), conv](Frame& fr) { return conv(a->ev(fr)); });
          }
          FEP<double> a = cf<double>(n.args[0]);
          return mk_i([a = std::move(a), conv](Frame& fr) { return conv(a->ev(fr)); });
        }
        IEP a = ci(n.args[0]);
        return mk_i([a = std::move(a), to](Frame& fr) -> int64_t { return wrap_to(to, a->ev(fr)); });
      }
      case ExprKind::Load: {
        int s = slot_of_buffer(n.buffer.get());
        IEP idx = ci(flat_index(n.buffer, n.args));
        const BufferNode* b = n.buffer.get();
        DType t = b->dtype;
        return mk_i([s, idx = std::move(idx), b, t](Frame& fr) -> int64_t {
          int64_t i = idx->ev(fr);
          const BufSlot& bs = fr.bufs[s];
          if (static_cast<uint64_t>(i) >= static_cast<uint64_t>(bs.numel)) out_of_bounds(b, i, bs.numel, false);
          if (t.is_bool()) return bs.data[i] != 0;
          if (t.is_bf16()) return reinterpret_cast<const uint16_t*>(bs.data)[i];
          if (t.bits == 8) return t.is_uint() ? bs.data[i] : static_cast<int8_t>(bs.data[i]);
          if (t.bits == 32) return reinterpret_cast<const int32_t*>(bs.data)[i];
          return reinterpret_cast<const int64_t*>(bs.data)[i];
        });
      }
      default:
        break;
    }
    BASIN_CHECK(false) << "interpreter cannot evaluate " << e << " as an integer";
    return nullptr;
  }

  template <typename T>
  IEP compare(const ExprNode& n) {
    FEP<T> a = cf<T>(n.args[0]), b = cf<T>(n.args[1]);
    ExprKind k = n.kind;
    return mk_i([a = std::move(a), b = std::move(b), k](Frame& fr) -> int64_t {
      T x = a->ev(fr), y = b->ev(fr);
      switch (k) {
        case ExprKind::EQ:
          return x == y;
        case ExprKind::NE:
          return x != y;
        case ExprKind::LT:
          return x < y;
        case ExprKind::LE:
          return x <= y;
        case ExprKind::GT:
          return x > y;
        default:
          return x >= y;
      }
    });
  }

  IEP compare_int(const ExprNode& n) {
    IEP a = ci(n.args[0]), b = ci(n.args[1]);
    switch (n.kind) {
      case ExprKind::EQ:
        return mk_i([a = std::move(a), b = std::move(b)](Frame& fr) -> int64_t { return a->ev(fr) == b->ev(fr); });
      case ExprKind::NE:
        return mk_i([a = std::move(a), b = std::move(b)](Frame& fr) -> int64_t { return a->ev(fr) != b->ev(fr); });
      case ExprKind::LT:
        return mk_i([a = std::move(a), b = std::move(b)](Frame& fr) -> int64_t { return a->ev(fr) < b->ev(fr); });
      case ExprKind::LE:
        return mk_i([a = std::move(a), b = std::move(b)](Frame& fr) -> int64_t { return a->ev(fr) <= b->ev(fr); });
      case ExprKind::GT:
        return mk_i([a = std::move(a), b = std::move(b)](Frame& fr) -> int64_t { return a->ev(fr) > b->ev(fr); });
      default:
        return mk_i([a = std::move(a), b = std::move(b)](Frame& fr) -> int64_t { return a->ev(fr) >= b->ev(fr); });
    }
  }

  template <typename T>
  FEP<T> cf(const Expr& e) {
    const ExprNode& n = *e;
    BASIN_CHECK((n.dtype.is_float() && (n.dtype.bits == 32) == std::is_same_v<T, float>))
        << "float compile of " << e << " as " << sizeof(T) * 8 << " bits";
    switch (n.kind) {
      case ExprKind::FloatImm: {
        T v = static_cast<T>(n.fval);
        return mk_f<T>([v](Frame&) { return v; });
      }
      case ExprKind::Add:
      case ExprKind::Sub:
      case ExprKind::Mul:
      case ExprKind::Div:
      case ExprKind::Min:
      case ExprKind::Max: {
        FEP<T> a = cf<T>(n.args[0]), b = cf<T>(n.args[1]);
        switch (n.kind) {
          case ExprKind::Add:
            return mk_f<T>([a = std::move(a), b = std::move(b)](Frame& fr) { return a->ev(fr) + b->ev(fr); });
          case ExprKind::Sub:
            return mk_f<T>([a = std::move(a), b = std::move(b)](Frame& fr) { return a->ev(fr) - b->ev(fr); });
          case ExprKind::Mul:
            return mk_f<T>([a = std::move(a), b = std::move(b)](Frame& fr) { return a->ev(fr) * b->ev(fr); });
          case ExprKind::Div:
            return mk_f<T>([a = std::move(a), b = std::move(b)](Frame& fr) { return a->ev(fr) / b->ev(fr); });
          case ExprKind::Min:
            return mk_f<T>([a = std::move(a), b = std::move(b)](Frame& fr) {
              const T x = a->ev(fr), y = b->ev(fr);  // NaN propagates (expr.h)
              return std::isnan(x) ? x : std::isnan(y) ? y : (x < y ? x : y);
            });
          default:
            return mk_f<T>([a = std::move(a), b = std::move(b)](Frame& fr) {
              const T x = a->ev(fr), y = b->ev(fr);
              return std::isnan(x) ? x : std::isnan(y) ? y : (x > y ? x : y);
            });
        }
      }
      case ExprKind::Select: {
        IEP c = ci(n.args[0]);
        FEP<T> a = cf<T>(n.args[1]), b = cf<T>(n.args[2]);
        return mk_f<T>([c = std::move(c), a = std::move(a), b = std::move(b)](Frame& fr) {
          return c->ev(fr) ? a->ev(fr) : b->ev(fr);
        });
      }
      case ExprKind::Cast: {
        DType from = n.args[0].dtype();
        if (from == DType::f32()) {
          FEP<float> a = cf<float>(n.args[0]);
          return mk_f<T>([a = std::move(a)](Frame& fr) { return static_cast<T>(a->ev(fr)); });
        }
        if (from.is_float()) {
          FEP<double> a = cf<double>(n.args[0]);
          return mk_f<T>([a = std::move(a)](Frame& fr) { return static_cast<T>(a->ev(fr)); });
        }
        if (from.is_bf16()) {
          IEP a = ci(n.args[0]);
          return mk_f<T>(
              [a = std::move(a)](Frame& fr) { return static_cast<T>(bf16_value(static_cast<uint16_t>(a->ev(fr)))); });
        }
        IEP a = ci(n.args[0]);
        return mk_f<T>([a = std::move(a)](Frame& fr) { return static_cast<T>(a->ev(fr)); });
      }
      case ExprKind::Call: {
        MathFn f = n.fn;
        FEP<T> a = cf<T>(n.args[0]);
        if (n.args.size() == 2) {
          FEP<T> b = cf<T>(n.args[1]);
          return mk_f<T>(
              [a = std::move(a), b = std::move(b), f](Frame& fr) { return math<T>(f, a->ev(fr), b->ev(fr)); });
        }
        switch (f) {  // the common ones without a switch at run time
          case MathFn::exp:
            return mk_f<T>([a = std::move(a)](Frame& fr) { return std::exp(a->ev(fr)); });
          case MathFn::sqrt:
            return mk_f<T>([a = std::move(a)](Frame& fr) { return std::sqrt(a->ev(fr)); });
          default:
            return mk_f<T>([a = std::move(a), f](Frame& fr) { return math<T>(f, a->ev(fr), T(0)); });
        }
      }
      case ExprKind::Load: {
        int s = slot_of_buffer(n.buffer.get());
        IEP idx = ci(flat_index(n.buffer, n.args));
        const BufferNode* b = n.buffer.get();
        return mk_f<T>([s, idx = std::move(idx), b](Frame& fr) {
          int64_t i = idx->ev(fr);
          const BufSlot& bs = fr.bufs[s];
          if (static_cast<uint64_t>(i) >= static_cast<uint64_t>(bs.numel)) out_of_bounds(b, i, bs.numel, false);
          return reinterpret_cast<const T*>(bs.data)[i];
        });
      }
      default:
        break;
    }
    BASIN_CHECK(false) << "interpreter cannot evaluate " << e << " as a float";
    return nullptr;
  }

  SEP cs(const Stmt& s) {
    const StmtNode& n = *s;
    switch (n.kind) {
      case StmtKind::For: {
        IEP mn = ci(n.min), ext = ci(n.extent);
        if (var_slot.count(n.var.id())) throw RuntimeError("loop variable '" + n.var.name() + "' bound twice");
        int slot = n_vars++;
        var_slot[n.var.id()] = slot;
        SEP body = cs(n.body[0]);
        var_slot.erase(n.var.id());
        return mk_s([mn = std::move(mn), ext = std::move(ext), body = std::move(body), slot](Frame& fr) {
          int64_t lo = mn->ev(fr), hi = lo + ext->ev(fr);
          for (int64_t i = lo; i < hi; ++i) {
            fr.iv[slot] = i;
            body->run(fr);
          }
        });
      }
      case StmtKind::Allocate: {
        std::vector<IEP> extents;
        for (const Expr& x : n.buffer->shape) extents.push_back(ci(x));
        int slot = static_cast<int>(buf_slot.size());
        if (buf_slot.count(n.buffer.get())) throw RuntimeError("buffer '" + n.buffer->name + "' allocated twice");
        buf_slot[n.buffer.get()] = slot;
        SEP body = cs(n.body[0]);
        buf_slot.erase(n.buffer.get());
        DType t = n.buffer->dtype;
        auto ext = std::make_shared<std::vector<IEP>>(std::move(extents));
        return mk_s([ext, body = std::move(body), slot, t](Frame& fr) {
          int64_t numel = 1;
          for (const IEP& x : *ext) numel *= x->ev(fr);
          if (numel < 0) throw RuntimeError("allocation of negative size");
          std::vector<uint64_t> mem((static_cast<size_t>(numel) * t.bytes() + 7) / 8 + 1);
          uint8_t* p = reinterpret_cast<uint8_t*>(mem.data());
          if (t == DType::f32())
            std::fill_n(reinterpret_cast<float*>(p), numel, std::numeric_limits<float>::quiet_NaN());
          else if (t == DType::f64())
            std::fill_n(reinterpret_cast<double*>(p), numel, std::numeric_limits<double>::quiet_NaN());
          else if (t.is_bf16()) std::fill_n(reinterpret_cast<uint16_t*>(p), numel, uint16_t{0x7FC0});  // NaN
          else std::memset(p, 0xA5, static_cast<size_t>(numel) * t.bytes());
          BufSlot saved = fr.bufs[slot];
          fr.bufs[slot] = {p, numel};
          body->run(fr);
          fr.bufs[slot] = saved;
        });
      }
      case StmtKind::Store: {
        int slot = slot_of_buffer(n.buffer.get());
        IEP idx = ci(flat_index(n.buffer, n.indices));
        const BufferNode* b = n.buffer.get();
        DType t = b->dtype;
        auto check = [b](int64_t i, const BufSlot& bs) {
          if (static_cast<uint64_t>(i) >= static_cast<uint64_t>(bs.numel)) out_of_bounds(b, i, bs.numel, true);
        };
        // The update of a reduction, buf[i] = buf[i] + v: the index is computed once.
        if (t == DType::f32() && n.value.kind() == ExprKind::Add && n.value.arg(0).kind() == ExprKind::Load &&
            n.value.arg(0)->buffer == n.buffer && n.indices.size() == 1 && n.value.arg(0)->args.size() == 1 &&
            structural_equal(n.value.arg(0)->args[0], n.indices[0])) {
          FEP<float> v = cf<float>(n.value.arg(1));
          return mk_s([slot, idx = std::move(idx), v = std::move(v), check](Frame& fr) {
            int64_t i = idx->ev(fr);
            check(i, fr.bufs[slot]);
            float* p = reinterpret_cast<float*>(fr.bufs[slot].data) + i;
            float x = *p;  // read before evaluating v, as the expression's order says
            *p = x + v->ev(fr);
          });
        }
        if (t == DType::f32()) {
          FEP<float> v = cf<float>(n.value);
          return mk_s([slot, idx = std::move(idx), v = std::move(v), check](Frame& fr) {
            int64_t i = idx->ev(fr);
            float x = v->ev(fr);
            check(i, fr.bufs[slot]);
            reinterpret_cast<float*>(fr.bufs[slot].data)[i] = x;
          });
        }
        if (t == DType::f64()) {
          FEP<double> v = cf<double>(n.value);
          return mk_s([slot, idx = std::move(idx), v = std::move(v), check](Frame& fr) {
            int64_t i = idx->ev(fr);
            double x = v->ev(fr);
            check(i, fr.bufs[slot]);
            reinterpret_cast<double*>(fr.bufs[slot].data)[i] = x;
          });
        }
        IEP v = ci(n.value);
        return mk_s([slot, idx = std::move(idx), v = std::move(v), check, t](Frame& fr) {
          int64_t i = idx->ev(fr);
          int64_t x = v->ev(fr);
          check(i, fr.bufs[slot]);
          uint8_t* p = fr.bufs[slot].data;
          if (t.is_bool()) p[i] = x != 0;
          else if (t.is_bf16()) reinterpret_cast<uint16_t*>(p)[i] = static_cast<uint16_t>(x);
          else if (t.bits == 8) p[i] = static_cast<uint8_t>(x);
          else if (t.bits == 32) reinterpret_cast<int32_t*>(p)[i] = static_cast<int32_t>(x);
          else reinterpret_cast<int64_t*>(p)[i] = x;
        });
      }
      case StmtKind::IfThenElse: {
        IEP c = ci(n.cond);
        SEP t = cs(n.body[0]);
        SEP e = n.body.size() > 1 ? cs(n.body[1]) : nullptr;
        return mk_s([c = std::move(c), t = std::move(t), e = std::move(e)](Frame& fr) {
          if (c->ev(fr)) t->run(fr);
          else if (e) e->run(fr);
        });
      }
      case StmtKind::Seq: {
        auto items = std::make_shared<std::vector<SEP>>();
        for (const Stmt& c : n.body) items->push_back(cs(c));
        return mk_s([items](Frame& fr) {
          for (const SEP& x : *items) x->run(fr);
        });
      }
      case StmtKind::Pragma:
        return cs(n.body[0]);
      case StmtKind::Barrier:
        // Barriers separate a block's thread loops (stmt.h), which run one after
        // another: nothing is left to wait for.
        return mk_s([](Frame&) {});
    }
    return nullptr;
  }
};

}  // namespace

struct Interpreter::Impl {
  LoweredFunc func;
  SEP body;
  int n_vars = 0;
  int n_bufs = 0;
};

Interpreter::Interpreter(const LoweredFunc& f) : impl_(std::make_unique<Impl>()) {
  impl_->func = f;
  Compiler c;
  for (size_t i = 0; i < f.params.size(); ++i) c.buf_slot[f.params[i].get()] = static_cast<int>(i);
  // Allocations take slots after the parameters; count the deepest nesting generously.
  int allocs = 0;
  visit_stmt(f.body, [&](const Stmt& s) { allocs += s.kind() == StmtKind::Allocate; });
  impl_->body = c.cs(f.body);
  impl_->n_vars = c.n_vars;
  impl_->n_bufs = static_cast<int>(f.params.size()) + allocs;
}

Interpreter::~Interpreter() = default;
Interpreter::Interpreter(Interpreter&&) noexcept = default;
Interpreter& Interpreter::operator=(Interpreter&&) noexcept = default;

void Interpreter::run(const std::vector<NDArray*>& args) const {
  const LoweredFunc& f = impl_->func;
  if (args.size() != f.params.size())
    throw RuntimeError("'" + f.name + "' takes " + std::to_string(f.params.size()) + " buffers, got " +
                       std::to_string(args.size()));
  std::vector<int64_t> iv(impl_->n_vars + 1);
  std::vector<BufSlot> bufs(impl_->n_bufs + 1);
  for (size_t i = 0; i < args.size(); ++i) {
    const Buffer& b = f.params[i];
    if (args[i]->dtype() != b->dtype)
      throw RuntimeError("buffer '" + b->name + "' expects " + b->dtype.str() + ", got " + args[i]->dtype().str());
    int64_t numel = 1;
    for (const Expr& e : b->shape) numel *= const_int(e);
    if (numel != args[i]->numel())
      throw RuntimeError("buffer '" + b->name + "' expects " + std::to_string(numel) + " elements, got " +
                         std::to_string(args[i]->numel()));
    bufs[i] = {static_cast<uint8_t*>(args[i]->data()), numel};
  }
  Frame fr{iv.data(), bufs.data()};
  impl_->body->run(fr);
}

void interpret(const LoweredFunc& f, const std::vector<NDArray*>& args) { Interpreter(f).run(args); }

}  // namespace basin
