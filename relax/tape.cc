#include "relax/tape.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <unordered_map>

#include "core/util/error.h"

namespace basin::relax {

struct Tape::Compiling {
  std::unordered_map<const ExprNode*, int> memo;
  struct Key {
    Op op;
    int a, b, c;
    uint64_t value;
    bool operator==(const Key& o) const { return op == o.op && a == o.a && b == o.b && c == o.c && value == o.value; }
  };
  struct Hash {
    size_t operator()(const Key& k) const {
      uint64_t h = static_cast<uint64_t>(k.op);
      for (uint64_t v :
           {static_cast<uint64_t>(static_cast<uint32_t>(k.a)), static_cast<uint64_t>(static_cast<uint32_t>(k.b)),
            static_cast<uint64_t>(static_cast<uint32_t>(k.c)), k.value})
        h = (h ^ v) * 0x100000001b3ULL;
      return static_cast<size_t>(h ^ (h >> 29));
    }
  };
  std::unordered_map<Key, int, Hash> nodes;
};

Tape::Tape(const std::vector<Expr>& outputs, const std::vector<Var>& inputs, TapeMode mode, double tau)
    : mode_(mode), tau_(tau), n_inputs_(static_cast<int>(inputs.size())) {
  for (const Var& v : inputs) input_ids_.push_back(v.id());
  // The tape keeps no expressions: they are freed with the caller's (on the thread
  // that derived them), not with the tape at the end of a run.
  Compiling cx;
  for (const Expr& e : outputs) outputs_.push_back(compile(e, cx));
  // The constants that only folded nodes read are left behind: the nodes the outputs
  // read, in order, make the tape.
  std::vector<int> index(ops_.size(), -1);
  for (int o : outputs_) index[static_cast<size_t>(o)] = 0;
  for (size_t i = ops_.size(); i-- > 0;)
    if (index[i] == 0)
      for (int j : {ops_[i].a, ops_[i].b, ops_[i].c})
        if (j >= 0) index[static_cast<size_t>(j)] = 0;
  std::vector<Node> live;
  for (size_t i = 0; i < ops_.size(); ++i) {
    if (index[i] < 0) continue;
    Node n = ops_[i];
    for (int* j : {&n.a, &n.b, &n.c})
      if (*j >= 0) *j = index[static_cast<size_t>(*j)];
    index[i] = static_cast<int>(live.size());
    live.push_back(n);
  }
  ops_ = std::move(live);
  for (int& o : outputs_) o = index[static_cast<size_t>(o)];
}

int Tape::push(Node n, Compiling& cx) {
  auto constant = [&](int i) { return i < 0 || ops_[static_cast<size_t>(i)].op == Op::Const; };
  if (n.op != Op::Const && n.op != Op::Input && constant(n.a) && constant(n.b) && constant(n.c)) {
    // Folded by the operation itself, in this tape's mode: the value every row gets.
    auto value = [&](int i) { return i >= 0 ? ops_[static_cast<size_t>(i)].value : 0.0; };
    const double a = value(n.a), b = value(n.b), c = value(n.c);
    double out = 0;
    apply(n, nullptr, &a, &b, &c, &out, 1);
    n = {Op::Const, -1, -1, -1, out};
  }
  uint64_t bits = 0;
  std::memcpy(&bits, &n.value, sizeof bits);
  auto [it, fresh] = cx.nodes.emplace(Compiling::Key{n.op, n.a, n.b, n.c, bits}, static_cast<int>(ops_.size()));
  if (fresh) ops_.push_back(n);
  return it->second;
}

int Tape::compile(const Expr& e, Compiling& cx) {
  auto hit = cx.memo.find(e.get());
  if (hit != cx.memo.end()) return hit->second;
  const ExprNode& n = *e;
  auto node = [&](Node x) { return push(x, cx); };
  auto bin = [&](Op op) { return node({op, compile(n.args[0], cx), compile(n.args[1], cx)}); };
  int r = -1;
  switch (n.kind) {
    case ExprKind::IntImm:
      r = node({Op::Const, -1, -1, -1, static_cast<double>(n.ival)});
      break;
    case ExprKind::FloatImm:
      r = node({Op::Const, -1, -1, -1, n.fval});
      break;
    case ExprKind::Var: {
      int idx = -1;
      for (int i = 0; i < n_inputs_; ++i)
        if (input_ids_[i] == n.ival) idx = i;
      if (idx < 0) throw InternalError("the tape's expressions use variable " + n.name + ", which is not an input");
      r = node({Op::Input, -1, -1, -1, static_cast<double>(idx)});
      break;
    }
    case ExprKind::Add:
      r = bin(Op::Add);
      break;
    case ExprKind::Sub:
      r = bin(Op::Sub);
      break;
    case ExprKind::Mul:
      r = bin(Op::Mul);
      break;
    case ExprKind::Div:
      r = bin(Op::Div);
      break;  // integer Div is exact by contract
    case ExprKind::FloorDiv:
      r = bin(n.dtype.is_float() ? Op::Div : Op::FloorDiv);
      break;
    case ExprKind::FloorMod:
      r = bin(Op::FloorMod);
      break;
    case ExprKind::Min:
      r = bin(Op::Min);
      break;
    case ExprKind::Max:
      r = bin(Op::Max);
      break;
    case ExprKind::LT:
      r = bin(Op::LT);
      break;
    case ExprKind::LE:
      r = bin(Op::LE);
      break;
    case ExprKind::GT:
      r = node({Op::LT, compile(n.args[1], cx), compile(n.args[0], cx)});
      break;
    case ExprKind::GE:
      r = node({Op::LE, compile(n.args[1], cx), compile(n.args[0], cx)});
      break;
    case ExprKind::EQ:
      r = bin(Op::EQ);
      break;
    case ExprKind::NE:
      r = node({Op::Not, bin(Op::EQ)});
      break;
    case ExprKind::And:
      r = bin(Op::And);
      break;
    case ExprKind::Or:
      r = bin(Op::Or);
      break;
    case ExprKind::Not:
      r = node({Op::Not, compile(n.args[0], cx)});
      break;
    case ExprKind::Select:
      r = node({Op::Select, compile(n.args[0], cx), compile(n.args[1], cx), compile(n.args[2], cx)});
      break;
    case ExprKind::Cast: {
      int a = compile(n.args[0], cx);
      // to an integer: truncation toward zero, which the features never need relaxed
      r = n.dtype.is_float() || n.dtype.is_bool() || n.args[0].dtype().is_int()
              ? a
              : node({Op::Select, node({Op::LT, a, node({Op::Const, -1, -1, -1, 0.0})}), node({Op::Ceil, a}),
                      node({Op::Floor, a})});
      break;
    }
    case ExprKind::Call: {
      int a = compile(n.args[0], cx);
      auto k = [&](double v) { return node({Op::Const, -1, -1, -1, v}); };
      auto sigmoid = [&](int x) {  // 1 / (1 + e^-x)
        return node({Op::Div, k(1), node({Op::Add, k(1), node({Op::Exp, node({Op::Sub, k(0), x})})})});
      };
      switch (n.fn) {
        case MathFn::exp:
          r = node({Op::Exp, a});
          break;
        case MathFn::log:
          r = node({Op::Log, a});
          break;
        case MathFn::sqrt:
          r = node({Op::Sqrt, a});
          break;
        case MathFn::pow:
          r = node({Op::Pow, a, compile(n.args[1], cx)});
          break;
        case MathFn::floor:
          r = node({Op::Floor, a});
          break;
        case MathFn::ceil:
          r = node({Op::Ceil, a});
          break;
        case MathFn::fabs:
          r = node({Op::Abs, a});
          break;
        case MathFn::rsqrt:
          r = node({Op::Div, k(1), node({Op::Sqrt, a})});
          break;
        case MathFn::sigmoid:
          r = sigmoid(a);
          break;
        case MathFn::tanh:  // 2 sigmoid(2x) - 1
          r = node({Op::Sub, node({Op::Mul, k(2), sigmoid(node({Op::Mul, k(2), a}))}), k(1)});
          break;
        case MathFn::erf:
          r = node({Op::Erf, a});
          break;
        case MathFn::sin:
          r = node({Op::Sin, a});
          break;
        case MathFn::cos:
          r = node({Op::Cos, a});
          break;
        case MathFn::rint:  // a rounding: the identity, relaxed
        case MathFn::tf32:
        case MathFn::fp16:
        case MathFn::bf16:
          r = a;
          break;
        default:
          throw InternalError(std::string("the tape has no ") + math_fn_name(n.fn));
      }
      break;
    }
    case ExprKind::Load:
      throw InternalError("the tape cannot evaluate a buffer load: " + to_string(e));
  }
  cx.memo[e.get()] = r;
  return r;
}

namespace {
double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
}  // namespace

void Tape::forward(const double* x, int batch, double* y) {
  batch_ = batch;
  // Every entry of the batch's range is written by run(), so the buffer only grows: a
  // resize to a larger batch would zero-fill it first, and the gradient search
  // alternates batches of its seeds with batches of thousands of candidates (session
  // 46: that zero-filling was a tenth of the proposal's time).
  if (val_.size() < ops_.size() * batch) val_.resize(ops_.size() * batch);
  run(x, batch, val_.data(), y);
}

void Tape::evaluate(const double* x, int batch, double* y) const {
  thread_local std::vector<double> scratch;
  const int rows = std::min(batch, kChunk);
  if (scratch.size() < ops_.size() * rows) scratch.resize(ops_.size() * rows);
  for (int start = 0; start < batch; start += kChunk) {
    const int n = std::min(kChunk, batch - start);
    run(x + static_cast<size_t>(start) * n_inputs_, n, scratch.data(),
        y + static_cast<size_t>(start) * outputs_.size());
  }
}

void Tape::apply(const Node& n, const double* x, const double* a, const double* b, const double* c, double* out,
                 int batch) const {
  const bool relaxed = mode_ == TapeMode::Relaxed;
  const double tau = tau_;
  // One switch per operation, then a plain loop over the batch (the compiler
  // vectorizes most of them); the per-element switch cost more than the arithmetic.
  auto each = [&](auto f) {
    for (int k = 0; k < batch; ++k) out[k] = f(k);
  };
  switch (n.op) {
    case Op::Const:
      std::fill(out, out + batch, n.value);
      break;
    case Op::Input: {
      const int col = static_cast<int>(n.value);
      each([&](int k) { return x[k * n_inputs_ + col]; });
      break;
    }
    case Op::Add:
      each([&](int k) { return a[k] + b[k]; });
      break;
    case Op::Sub:
      each([&](int k) { return a[k] - b[k]; });
      break;
    case Op::Mul:
      each([&](int k) { return a[k] * b[k]; });
      break;
    case Op::Div:
      each([&](int k) { return a[k] / b[k]; });
      break;
    case Op::FloorDiv:
      if (relaxed) each([&](int k) { return a[k] / b[k]; });
      else each([&](int k) { return std::floor(a[k] / b[k]); });
      break;
    case Op::FloorMod:
      each([&](int k) { return a[k] - b[k] * std::floor(a[k] / b[k]); });
      break;
    case Op::Min:
      each([&](int k) { return std::min(a[k], b[k]); });
      break;
    case Op::Max:
      each([&](int k) { return std::max(a[k], b[k]); });
      break;
    case Op::LT:
      if (relaxed) each([&](int k) { return sigmoid((b[k] - a[k]) / tau); });
      else each([&](int k) { return static_cast<double>(a[k] < b[k]); });
      break;
    case Op::LE:
      if (relaxed) each([&](int k) { return sigmoid((b[k] - a[k]) / tau); });
      else each([&](int k) { return static_cast<double>(a[k] <= b[k]); });
      break;
    case Op::EQ:
      if (relaxed) {
        each([&](int k) {
          double d = (a[k] - b[k]) / tau;
          return std::exp(-d * d);
        });
      } else {
        each([&](int k) { return static_cast<double>(a[k] == b[k]); });
      }
      break;
    case Op::And:
      if (relaxed) each([&](int k) { return a[k] * b[k]; });
      else each([&](int k) { return static_cast<double>(a[k] != 0 && b[k] != 0); });
      break;
    case Op::Or:
      if (relaxed) each([&](int k) { return a[k] + b[k] - a[k] * b[k]; });
      else each([&](int k) { return static_cast<double>(a[k] != 0 || b[k] != 0); });
      break;
    case Op::Not:
      if (relaxed) each([&](int k) { return 1.0 - a[k]; });
      else each([&](int k) { return static_cast<double>(a[k] == 0); });
      break;
    case Op::Select:
      if (relaxed) each([&](int k) { return a[k] * b[k] + (1.0 - a[k]) * c[k]; });
      else each([&](int k) { return a[k] != 0 ? b[k] : c[k]; });
      break;
    case Op::Exp:
      each([&](int k) { return std::exp(a[k]); });
      break;
    case Op::Log:
      each([&](int k) { return std::log(a[k]); });
      break;
    case Op::Sqrt:
      each([&](int k) { return std::sqrt(a[k]); });
      break;
    case Op::Pow:
      each([&](int k) { return std::pow(a[k], b[k]); });
      break;
    case Op::Floor:
      if (relaxed) each([&](int k) { return a[k]; });
      else each([&](int k) { return std::floor(a[k]); });
      break;
    case Op::Ceil:
      if (relaxed) each([&](int k) { return a[k]; });
      else each([&](int k) { return std::ceil(a[k]); });
      break;
    case Op::Abs:
      each([&](int k) { return std::abs(a[k]); });
      break;
    case Op::Erf:
      each([&](int k) { return std::erf(a[k]); });
      break;
    case Op::Sin:
      each([&](int k) { return std::sin(a[k]); });
      break;
    case Op::Cos:
      each([&](int k) { return std::cos(a[k]); });
      break;
  }
}

void Tape::run(const double* x, int batch, double* val, double* y) const {
  for (size_t i = 0; i < ops_.size(); ++i) {
    const Node& n = ops_[i];
    const double* a = n.a >= 0 ? &val[n.a * batch] : nullptr;
    const double* b = n.b >= 0 ? &val[n.b * batch] : nullptr;
    const double* c = n.c >= 0 ? &val[n.c * batch] : nullptr;
    apply(n, x, a, b, c, &val[i * batch], batch);
  }
  const size_t no = outputs_.size();
  for (size_t o = 0; o < no; ++o) {
    const double* v = &val[outputs_[o] * batch];
    for (int k = 0; k < batch; ++k) y[k * no + o] = v[k];
  }
}

void Tape::backward(const double* grad_y, double* grad_x) {
  int batch = batch_;
  adj_.assign(ops_.size() * batch, 0.0);
  for (int k = 0; k < batch; ++k)
    for (size_t o = 0; o < outputs_.size(); ++o) adj_[outputs_[o] * batch + k] += grad_y[k * outputs_.size() + o];
  for (int k = 0; k < batch * n_inputs_; ++k) grad_x[k] = 0;
  bool relaxed = mode_ == TapeMode::Relaxed;
  for (size_t i = ops_.size(); i-- > 0;) {
    const Node& n = ops_[i];
    const double* g = &adj_[i * batch];
    const double* v = &val_[i * batch];
    const double* a = n.a >= 0 ? &val_[n.a * batch] : nullptr;
    const double* b = n.b >= 0 ? &val_[n.b * batch] : nullptr;
    const double* c = n.c >= 0 ? &val_[n.c * batch] : nullptr;
    double* ga = n.a >= 0 ? &adj_[n.a * batch] : nullptr;
    double* gb = n.b >= 0 ? &adj_[n.b * batch] : nullptr;
    double* gc = n.c >= 0 ? &adj_[n.c * batch] : nullptr;
    // One switch per operation, then a loop over the batch, as in run(). An entry whose
    // adjoint is zero adds nothing (not even 0 times an infinite slope).
    auto each = [&](auto f) {
      for (int k = 0; k < batch; ++k)
        if (g[k] != 0) f(k, g[k]);
    };
    switch (n.op) {
      case Op::Const:
        break;
      case Op::Input: {
        const int col = static_cast<int>(n.value);
        each([&](int k, double gk) { grad_x[k * n_inputs_ + col] += gk; });
        break;
      }
      case Op::Add:
        each([&](int k, double gk) {
          ga[k] += gk;
          gb[k] += gk;
        });
        break;
      case Op::Sub:
        each([&](int k, double gk) {
          ga[k] += gk;
          gb[k] -= gk;
        });
        break;
      case Op::Mul:
        each([&](int k, double gk) {
          ga[k] += gk * b[k];
          gb[k] += gk * a[k];
        });
        break;
      case Op::Div:
      case Op::FloorDiv:  // relaxed: the exact quotient; exact mode: the same slope (a subgradient)
        each([&](int k, double gk) {
          ga[k] += gk / b[k];
          gb[k] -= gk * a[k] / (b[k] * b[k]);
        });
        break;
      case Op::FloorMod:
        each([&](int k, double gk) {
          ga[k] += gk;
          gb[k] -= gk * std::floor(a[k] / b[k]);
        });
        break;
      case Op::Min:
        each([&](int k, double gk) { (a[k] <= b[k] ? ga : gb)[k] += gk; });
        break;
      case Op::Max:
        each([&](int k, double gk) { (a[k] >= b[k] ? ga : gb)[k] += gk; });
        break;
      case Op::LT:
      case Op::LE:
        if (relaxed)
          each([&](int k, double gk) {
            double d = v[k] * (1 - v[k]) / tau_;
            ga[k] -= gk * d;
            gb[k] += gk * d;
          });
        break;
      case Op::EQ:
        if (relaxed)
          each([&](int k, double gk) {
            double d = -2.0 * (a[k] - b[k]) / (tau_ * tau_) * v[k];
            ga[k] += gk * d;
            gb[k] -= gk * d;
          });
        break;
      case Op::And:
        if (relaxed)
          each([&](int k, double gk) {
            ga[k] += gk * b[k];
            gb[k] += gk * a[k];
          });
        break;
      case Op::Or:
        if (relaxed)
          each([&](int k, double gk) {
            ga[k] += gk * (1 - b[k]);
            gb[k] += gk * (1 - a[k]);
          });
        break;
      case Op::Not:
        if (relaxed) each([&](int k, double gk) { ga[k] -= gk; });
        break;
      case Op::Select:
        if (relaxed)
          each([&](int k, double gk) {
            ga[k] += gk * (b[k] - c[k]);
            gb[k] += gk * a[k];
            gc[k] += gk * (1 - a[k]);
          });
        else each([&](int k, double gk) { (a[k] != 0 ? gb : gc)[k] += gk; });
        break;
      case Op::Exp:
        each([&](int k, double gk) { ga[k] += gk * v[k]; });
        break;
      case Op::Log:
        each([&](int k, double gk) { ga[k] += gk / a[k]; });
        break;
      case Op::Sqrt:
        each([&](int k, double gk) { ga[k] += gk * 0.5 / v[k]; });
        break;
      case Op::Pow:
        each([&](int k, double gk) {
          ga[k] += gk * b[k] * std::pow(a[k], b[k] - 1);
          if (a[k] > 0) gb[k] += gk * v[k] * std::log(a[k]);
        });
        break;
      case Op::Floor:
      case Op::Ceil:
        if (relaxed) each([&](int k, double gk) { ga[k] += gk; });
        break;
      case Op::Abs:
        each([&](int k, double gk) { ga[k] += gk * (a[k] < 0 ? -1.0 : 1.0); });
        break;
      case Op::Erf:  // 2 / sqrt(pi) e^(-x^2)
        each([&](int k, double gk) { ga[k] += gk * 1.1283791670955126 * std::exp(-a[k] * a[k]); });
        break;
      case Op::Sin:
        each([&](int k, double gk) { ga[k] += gk * std::cos(a[k]); });
        break;
      case Op::Cos:
        each([&](int k, double gk) { ga[k] += gk * -std::sin(a[k]); });
        break;
    }
  }
}

}  // namespace basin::relax
