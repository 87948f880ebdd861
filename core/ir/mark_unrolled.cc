#include "core/ir/mark_unrolled.h"

#include <algorithm>

#include "core/util/error.h"

namespace basin {

namespace {

constexpr int64_t kMany = int64_t{1} << 40;

struct Marker {
  int64_t max_step = -1;  // -1: outside any unroll pragma

  // Returns the rewritten statement and its steps (kMany when not constant).
  std::pair<Stmt, int64_t> visit(const Stmt& s) {
    const StmtNode& n = *s;
    switch (n.kind) {
      case StmtKind::For: {
        auto [body, steps] = visit(n.body[0]);
        int64_t ext = 0;
        bool constant = is_const_int(n.extent, &ext);
        int64_t total = n.for_kind == ForKind::Vectorized ? steps
                        : constant ? std::min(kMany, std::max<int64_t>(ext, 0) * steps)
                                   : kMany;
        ForKind kind = n.for_kind;
        if (kind == ForKind::Serial && constant && max_step >= 0 && total <= max_step) kind = ForKind::Unrolled;
        if (kind == n.for_kind && body.same_as(n.body[0])) return {s, total};
        return {make_for(n.var, n.min, n.extent, kind, body), total};
      }
      case StmtKind::Pragma: {
        if (n.key != "auto_unroll_max_step") {
          auto [b, steps] = visit(n.body[0]);
          return {b.same_as(n.body[0]) ? s : make_pragma(n.key, n.pragma_value, b), steps};
        }
        int64_t v = 0;
        BASIN_CHECK(is_const_int(n.pragma_value, &v)) << "unroll depth is not constant: " << n.pragma_value;
        int64_t saved = max_step;
        max_step = v;
        auto [b, steps] = visit(n.body[0]);
        max_step = saved;
        return {b.same_as(n.body[0]) ? s : make_pragma(n.key, n.pragma_value, b), steps};
      }
      case StmtKind::Seq: {
        std::vector<Stmt> items;
        int64_t total = 0;
        bool changed = false;
        for (const Stmt& c : n.body) {
          auto [b, steps] = visit(c);
          changed |= !b.same_as(c);
          items.push_back(b);
          total = std::min(kMany, total + steps);
        }
        return {changed ? make_seq(items) : s, total};
      }
      case StmtKind::Allocate: {
        auto [b, steps] = visit(n.body[0]);
        return {b.same_as(n.body[0]) ? s : make_allocate(n.buffer, b), steps};
      }
      case StmtKind::IfThenElse: {
        auto [t, ts] = visit(n.body[0]);
        Stmt e;
        int64_t es = 0;
        if (n.body.size() > 1) std::tie(e, es) = visit(n.body[1]);
        bool same = t.same_as(n.body[0]) && (n.body.size() < 2 || e.same_as(n.body[1]));
        return {same ? s : make_if(n.cond, t, e), std::max(ts, es)};
      }
      case StmtKind::Store:
      case StmtKind::Barrier: return {s, 1};
    }
    return {s, 1};
  }
};

}  // namespace

Stmt mark_unrolled(const Stmt& s) { return Marker{}.visit(s).first; }

}  // namespace basin
