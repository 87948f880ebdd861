#include "core/ir/stmt.h"

#include <sstream>

#include "core/util/error.h"

namespace basin {

const char* stmt_kind_name(StmtKind k) {
  switch (k) {
#define BASIN_X(k)  \
  case StmtKind::k: \
    return #k;
    BASIN_STMT_NODES(BASIN_X)
#undef BASIN_X
  }
  return "?";
}

const char* for_kind_name(ForKind k) {
  switch (k) {
#define BASIN_X(k, s) \
  case ForKind::k:    \
    return s;
    BASIN_FOR_KINDS(BASIN_X)
#undef BASIN_X
  }
  return "?";
}

bool is_gpu_thread(ForKind k) { return k == ForKind::ThreadX || k == ForKind::ThreadY || k == ForKind::ThreadZ; }
bool is_gpu_block(ForKind k) { return k == ForKind::BlockX || k == ForKind::BlockY || k == ForKind::BlockZ; }
bool is_gpu_kind(ForKind k) {
  return is_gpu_thread(k) || k == ForKind::BlockX || k == ForKind::BlockY || k == ForKind::BlockZ ||
         k == ForKind::VThread;
}

StmtKind Stmt::kind() const { return n_->kind; }

namespace {
std::shared_ptr<StmtNode> node(StmtKind k) {
  auto n = std::make_shared<StmtNode>();
  n->kind = k;
  return n;
}
Stmt finish(std::shared_ptr<StmtNode> n) { return Stmt(std::shared_ptr<const StmtNode>(std::move(n))); }
}  // namespace

Stmt make_for(Var v, Expr min, Expr extent, ForKind kind, Stmt body) {
  BASIN_CHECK(v.defined() && min.defined() && extent.defined() && body.defined()) << "incomplete For";
  BASIN_CHECK(v.dtype().is_int() && min.dtype().is_int() && extent.dtype().is_int())
      << "For over non-integers: " << v.name();
  int64_t e;
  BASIN_CHECK(!is_const_int(extent, &e) || e >= 0) << "For " << v.name() << " with extent " << e;
  auto n = node(StmtKind::For);
  n->var = std::move(v);
  n->min = std::move(min);
  n->extent = std::move(extent);
  n->for_kind = kind;
  n->body = {std::move(body)};
  return finish(std::move(n));
}

Stmt make_allocate(Buffer b, Stmt body) {
  BASIN_CHECK(b && body.defined()) << "incomplete Allocate";
  auto n = node(StmtKind::Allocate);
  n->buffer = std::move(b);
  n->body = {std::move(body)};
  return finish(std::move(n));
}

Stmt make_store(Buffer b, std::vector<Expr> indices, Expr value) {
  BASIN_CHECK(b && value.defined()) << "incomplete Store";
  BASIN_CHECK(indices.size() == b->shape.size() || indices.size() == 1)
      << "store to " << b->name << " with " << indices.size() << " indices, rank " << b->shape.size();
  BASIN_CHECK(value.dtype() == b->dtype) << "store of " << value.dtype().str() << " into " << b->name << " of "
                                         << b->dtype.str();
  for (const Expr& i : indices) BASIN_CHECK(i.defined() && i.dtype().is_int()) << "bad index into " << b->name;
  auto n = node(StmtKind::Store);
  n->buffer = std::move(b);
  n->indices = std::move(indices);
  n->value = std::move(value);
  return finish(std::move(n));
}

Stmt make_if(Expr cond, Stmt then_case, Stmt else_case) {
  BASIN_CHECK(cond.defined() && cond.dtype().is_bool()) << "If condition must be bool";
  BASIN_CHECK(then_case.defined()) << "If without a then branch";
  auto n = node(StmtKind::IfThenElse);
  n->cond = std::move(cond);
  n->body = {std::move(then_case)};
  if (else_case.defined()) n->body.push_back(std::move(else_case));
  return finish(std::move(n));
}

Stmt make_seq(std::vector<Stmt> items) {
  std::vector<Stmt> flat;
  for (Stmt& s : items) {
    if (!s.defined()) continue;
    if (s.kind() == StmtKind::Seq) flat.insert(flat.end(), s->body.begin(), s->body.end());
    else flat.push_back(std::move(s));
  }
  if (flat.size() == 1) return flat[0];
  auto n = node(StmtKind::Seq);
  n->body = std::move(flat);
  return finish(std::move(n));
}

Stmt make_barrier() { return finish(node(StmtKind::Barrier)); }

Stmt make_pragma(std::string key, Expr value, Stmt body) {
  BASIN_CHECK(body.defined()) << "Pragma without a body";
  BASIN_CHECK(value.defined() && value.dtype().is_int()) << "Pragma " << key << " needs an integer value";
  auto n = node(StmtKind::Pragma);
  n->key = std::move(key);
  n->pragma_value = value;
  n->body = {std::move(body)};
  return finish(std::move(n));
}

Stmt rewrite_stmt(const Stmt& s, const std::function<Expr(const Expr&)>& expr_fn,
                  const std::function<Stmt(const Stmt&)>& stmt_fn) {
  const StmtNode& n = *s;
  bool changed = false;
  auto ex = [&](const Expr& e) {
    if (!e.defined() || !expr_fn) return e;
    Expr r = expr_fn(e);
    changed |= !r.same_as(e);
    return r;
  };
  auto sub = [&](const Stmt& c) {
    Stmt r = rewrite_stmt(c, expr_fn, stmt_fn);
    changed |= !r.same_as(c);
    return r;
  };
  Stmt out = s;
  switch (n.kind) {
    case StmtKind::For: {
      Expr mn = ex(n.min), ext = ex(n.extent);
      Stmt b = sub(n.body[0]);
      if (changed) out = make_for(n.var, mn, ext, n.for_kind, b);
      break;
    }
    case StmtKind::Allocate: {
      Stmt b = sub(n.body[0]);
      if (changed) out = make_allocate(n.buffer, b);
      break;
    }
    case StmtKind::Store: {
      std::vector<Expr> idx;
      for (const Expr& i : n.indices) idx.push_back(ex(i));
      Expr v = ex(n.value);
      if (changed) out = make_store(n.buffer, idx, v);
      break;
    }
    case StmtKind::IfThenElse: {
      Expr c = ex(n.cond);
      Stmt t = sub(n.body[0]);
      Stmt e = n.body.size() > 1 ? sub(n.body[1]) : Stmt();
      if (changed) out = make_if(c, t, e);
      break;
    }
    case StmtKind::Seq: {
      std::vector<Stmt> items;
      for (const Stmt& c : n.body) items.push_back(sub(c));
      if (changed) out = make_seq(items);
      break;
    }
    case StmtKind::Barrier:
      break;
    case StmtKind::Pragma: {
      Expr v = ex(n.pragma_value);
      Stmt b = sub(n.body[0]);
      if (changed) out = make_pragma(n.key, v, b);
      break;
    }
  }
  if (stmt_fn) {
    Stmt r = stmt_fn(out);
    if (r.defined()) return r;
  }
  return out;
}

void visit_stmt(const Stmt& s, const std::function<void(const Stmt&)>& pre) {
  pre(s);
  for (const Stmt& c : s->body) visit_stmt(c, pre);
}

namespace {
bool equal_rec(const Stmt& a, const Stmt& b, std::unordered_map<int64_t, int64_t>& vars) {
  if (a.same_as(b)) return true;
  const StmtNode& x = *a;
  const StmtNode& y = *b;
  if (x.kind != y.kind || x.body.size() != y.body.size()) return false;
  auto eq = [&](const Expr& p, const Expr& q) {
    if (p.defined() != q.defined()) return false;
    return !p.defined() || structural_equal(p, q, &vars);
  };
  switch (x.kind) {
    case StmtKind::For:
      if (x.for_kind != y.for_kind || !eq(x.min, y.min) || !eq(x.extent, y.extent)) return false;
      if (x.var.dtype() != y.var.dtype()) return false;
      vars[x.var.id()] = y.var.id();
      break;
    case StmtKind::Allocate:
      if (x.buffer != y.buffer) return false;
      break;
    case StmtKind::Store:
      if (x.buffer != y.buffer || x.indices.size() != y.indices.size() || !eq(x.value, y.value)) return false;
      for (size_t i = 0; i < x.indices.size(); ++i)
        if (!eq(x.indices[i], y.indices[i])) return false;
      break;
    case StmtKind::IfThenElse:
      if (!eq(x.cond, y.cond)) return false;
      break;
    case StmtKind::Pragma:
      if (x.key != y.key || !eq(x.pragma_value, y.pragma_value)) return false;
      break;
    default:
      break;
  }
  for (size_t i = 0; i < x.body.size(); ++i)
    if (!equal_rec(x.body[i], y.body[i], vars)) return false;
  return true;
}

void print_buffer_decl(std::ostream& os, const Buffer& b) {
  os << b->name << ": " << b->dtype.str() << "[";
  for (size_t i = 0; i < b->shape.size(); ++i) os << (i ? ", " : "") << b->shape[i];
  os << "]";
}

void print(std::ostream& os, const Stmt& s, int indent) {
  std::string pad(indent * 2, ' ');
  const StmtNode& n = *s;
  switch (n.kind) {
    case StmtKind::For:
      os << pad << "for " << n.var.name() << " in " << n.min << "..";
      if (is_zero(n.min)) os << n.extent;
      else os << (n.min + n.extent);
      if (n.for_kind != ForKind::Serial) os << " (" << for_kind_name(n.for_kind) << ")";
      os << ":\n";
      print(os, n.body[0], indent + 1);
      return;
    case StmtKind::Allocate:
      os << pad << "allocate " << scope_name(n.buffer->scope) << " ";
      print_buffer_decl(os, n.buffer);
      os << "\n";
      print(os, n.body[0], indent);
      return;
    case StmtKind::Store:
      os << pad << n.buffer->name << "[";
      for (size_t i = 0; i < n.indices.size(); ++i) os << (i ? ", " : "") << n.indices[i];
      os << "] = " << n.value << "\n";
      return;
    case StmtKind::IfThenElse:
      os << pad << "if " << n.cond << ":\n";
      print(os, n.body[0], indent + 1);
      if (n.body.size() > 1) {
        os << pad << "else:\n";
        print(os, n.body[1], indent + 1);
      }
      return;
    case StmtKind::Seq:
      for (const Stmt& c : n.body) print(os, c, indent);
      return;
    case StmtKind::Barrier:
      os << pad << "barrier()\n";
      return;
    case StmtKind::Pragma:
      os << pad << "pragma " << n.key << " = " << n.pragma_value << "\n";
      print(os, n.body[0], indent);
      return;
  }
}
}  // namespace

bool structural_equal(const Stmt& a, const Stmt& b) {
  std::unordered_map<int64_t, int64_t> vars;
  return equal_rec(a, b, vars);
}

std::string to_string(const Stmt& s) {
  std::ostringstream os;
  print(os, s, 0);
  return os.str();
}

std::string to_string(const LoweredFunc& f) {
  std::ostringstream os;
  os << "func " << f.name << "(";
  for (size_t i = 0; i < f.params.size(); ++i) {
    if (i) os << ", ";
    print_buffer_decl(os, f.params[i]);
  }
  os << ") {\n";
  print(os, f.body, 1);
  os << "}\n";
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Stmt& s) { return os << to_string(s); }

}  // namespace basin
