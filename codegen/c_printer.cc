#include "codegen/c_printer.h"

#include <iomanip>
#include <limits>
#include <sstream>
#include <unordered_map>

#include "core/util/error.h"

namespace basin::codegen {

namespace {

std::string c_type(DType t) {
  if (t.is_bool()) return "uint8_t";
  if (t.is_float()) return t.bits == 32 ? "float" : "double";
  return "int" + std::to_string(t.bits) + "_t";
}

class Printer {
 public:
  std::string func(const LoweredFunc& f) {
    os_ << "#include <math.h>\n#include <stdint.h>\n#include <stdlib.h>\n\n"
        << "static inline int64_t basin_floordiv(int64_t a, int64_t b) { int64_t q = a / b; "
           "return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q; }\n"
        << "static inline int64_t basin_floormod(int64_t a, int64_t b) { int64_t r = a % b; "
           "return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r; }\n"
        << "static inline float basin_sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }\n\n"
        << "void " << ident(f.name) << "(";
    for (size_t i = 0; i < f.params.size(); ++i) {
      bool out = false;
      for (int o : f.output_params) out |= o == static_cast<int>(i);
      os_ << (i ? ", " : "") << (out ? "" : "const ") << c_type(f.params[i]->dtype) << "* restrict "
          << name(f.params[i]);
    }
    os_ << ") {\n";
    stmt(f.body, 1);
    os_ << "}\n";
    return os_.str();
  }

 private:
  static std::string ident(const std::string& s) {
    std::string r;
    for (char c : s) r += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
    return r;
  }
  std::string name(const Buffer& b) { return ident(b->name) + "_" + std::to_string(b->id); }
  std::string var(const ExprNode& n) { return ident(n.name) + "_" + std::to_string(n.ival); }

  std::string expr(const Expr& e) {
    const ExprNode& n = *e;
    auto bin = [&](const char* op) { return "(" + expr(n.args[0]) + " " + op + " " + expr(n.args[1]) + ")"; };
    bool f32 = n.dtype.is_float() && n.dtype.bits == 32;
    switch (n.kind) {
      case ExprKind::IntImm: return std::to_string(n.ival) + (n.dtype.bits == 64 ? "LL" : "");
      case ExprKind::FloatImm: {
        std::ostringstream s;
        s << std::setprecision(std::numeric_limits<double>::max_digits10) << n.fval;
        std::string t = s.str();
        if (t.find_first_of(".eEn") == std::string::npos) t += ".0";
        return t + (f32 ? "f" : "");
      }
      case ExprKind::Var: return var(n);
      case ExprKind::Add: return bin("+");
      case ExprKind::Sub: return bin("-");
      case ExprKind::Mul: return bin("*");
      case ExprKind::Div: return bin("/");
      case ExprKind::FloorDiv: return "basin_floordiv(" + expr(n.args[0]) + ", " + expr(n.args[1]) + ")";
      case ExprKind::FloorMod: return "basin_floormod(" + expr(n.args[0]) + ", " + expr(n.args[1]) + ")";
      case ExprKind::Min:
      case ExprKind::Max: {
        std::string a = expr(n.args[0]), b = expr(n.args[1]);
        if (n.dtype.is_float()) return std::string(n.kind == ExprKind::Min ? "fmin" : "fmax") + (f32 ? "f(" : "(") + a + ", " + b + ")";
        return "((" + a + ") " + (n.kind == ExprKind::Min ? "<" : ">") + " (" + b + ") ? (" + a + ") : (" + b + "))";
      }
      case ExprKind::EQ: return bin("==");
      case ExprKind::NE: return bin("!=");
      case ExprKind::LT: return bin("<");
      case ExprKind::LE: return bin("<=");
      case ExprKind::GT: return bin(">");
      case ExprKind::GE: return bin(">=");
      case ExprKind::And: return bin("&&");
      case ExprKind::Or: return bin("||");
      case ExprKind::Not: return "(!" + expr(n.args[0]) + ")";
      case ExprKind::Select:
        return "(" + expr(n.args[0]) + " ? " + expr(n.args[1]) + " : " + expr(n.args[2]) + ")";
      case ExprKind::Cast: return "((" + c_type(n.dtype) + ")" + expr(n.args[0]) + ")";
      case ExprKind::Call: {
        std::string fn = math_fn_name(n.fn);
        std::string sfx = f32 ? "f" : "";
        std::string a0 = expr(n.args[0]);
        if (n.fn == MathFn::rsqrt) return "(1" + std::string(f32 ? ".0f" : ".0") + " / sqrt" + sfx + "(" + a0 + "))";
        if (n.fn == MathFn::sigmoid) return "basin_sigmoidf(" + a0 + ")";
        if (n.fn == MathFn::pow) return "pow" + sfx + "(" + a0 + ", " + expr(n.args[1]) + ")";
        return fn + sfx + "(" + a0 + ")";
      }
      case ExprKind::Load: {
        std::string idx = n.args.empty() ? "0" : expr(n.args[0]);
        BASIN_CHECK(n.args.size() <= 1) << "print_c expects flattened buffers";
        return name(n.buffer) + "[" + idx + "]";
      }
    }
    return "?";
  }

  void stmt(const Stmt& s, int depth) {
    const StmtNode& n = *s;
    std::string pad(depth * 2, ' ');
    switch (n.kind) {
      case StmtKind::For: {
        switch (n.for_kind) {
          case ForKind::Parallel: os_ << pad << "#pragma omp parallel for\n"; break;
          case ForKind::Vectorized: os_ << pad << "#pragma omp simd\n"; break;
          case ForKind::Unrolled: os_ << pad << "#pragma GCC unroll 1024\n"; break;
          case ForKind::Serial: break;
          default: os_ << pad << "/* bound to " << for_kind_name(n.for_kind) << " */\n"; break;
        }
        std::string v = var(*n.var);
        os_ << pad << "for (int64_t " << v << " = " << expr(n.min) << "; " << v << " < " << expr(n.min) << " + "
            << expr(n.extent) << "; ++" << v << ") {\n";
        stmt(n.body[0], depth + 1);
        os_ << pad << "}\n";
        return;
      }
      case StmtKind::Allocate: {
        std::string count = "1";
        for (const Expr& e : n.buffer->shape) count += " * " + expr(e);
        std::string t = c_type(n.buffer->dtype), b = name(n.buffer);
        os_ << pad << "{\n" << pad << "  " << t << "* restrict " << b << " = (" << t << "*)aligned_alloc(64, ((" << count
            << ") * sizeof(" << t << ") + 64) & ~(size_t)63);  /* " << scope_name(n.buffer->scope) << " */\n";
        stmt(n.body[0], depth + 1);
        os_ << pad << "  free(" << b << ");\n" << pad << "}\n";
        return;
      }
      case StmtKind::Store: {
        BASIN_CHECK(n.indices.size() <= 1) << "print_c expects flattened buffers";
        os_ << pad << name(n.buffer) << "[" << (n.indices.empty() ? "0" : expr(n.indices[0])) << "] = " << expr(n.value)
            << ";\n";
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
      case StmtKind::Barrier: os_ << pad << "__syncthreads();\n"; return;
      case StmtKind::Pragma:
        os_ << pad << "/* " << n.key << " = " << expr(n.pragma_value) << " */\n";
        stmt(n.body[0], depth);
        return;
    }
  }

  std::ostringstream os_;
};

}  // namespace

std::string print_c(const LoweredFunc& f) { return Printer().func(f); }

}  // namespace basin::codegen
