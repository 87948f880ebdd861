#include "core/ir/split_prologue.h"

#include <vector>

namespace basin {

namespace {

struct Access {
  std::set<const BufferNode*> reads, writes;
};

Access accesses(const Stmt& s) {
  Access a;
  auto loads = [&](const Expr& e) {
    if (!e.defined()) return;
    post_order_visit(e, [&](const Expr& x) {
      if (x.kind() == ExprKind::Load) a.reads.insert(x->buffer.get());
    });
  };
  visit_stmt(s, [&](const Stmt& t) {
    loads(t->min);
    loads(t->extent);
    loads(t->value);
    loads(t->cond);
    for (const Expr& i : t->indices) loads(i);
    if (t.kind() == StmtKind::Store) a.writes.insert(t->buffer.get());
  });
  return a;
}

}  // namespace

std::optional<SplitPrologue> split_constant_prologue(const LoweredFunc& f, const std::set<int>& constant_params) {
  // The allocations at the top, then the stages.
  std::vector<Buffer> allocs;
  Stmt cur = f.body;
  while (cur.defined() && cur.kind() == StmtKind::Allocate && cur->body.size() == 1) {
    allocs.push_back(cur->buffer);
    cur = cur->body[0];
  }
  if (!cur.defined() || allocs.empty()) return std::nullopt;
  std::vector<Stmt> stages = cur.kind() == StmtKind::Seq ? cur->body : std::vector<Stmt>{cur};
  if (stages.size() < 2) return std::nullopt;
  std::vector<Access> acc;
  for (const Stmt& s : stages) acc.push_back(accesses(s));
  for (size_t k = 0; k < stages.size(); ++k) {
    const Access& a = acc[k];
    if (a.writes.size() != 1 || a.reads.size() != 1) continue;
    const BufferNode* out = *a.writes.begin();
    const BufferNode* in = *a.reads.begin();
    int alloc = -1, param = -1;
    for (size_t i = 0; i < allocs.size(); ++i)
      if (allocs[i].get() == out && allocs[i]->scope == MemScope::Global) alloc = static_cast<int>(i);
    for (size_t i = 0; i < f.params.size(); ++i)
      if (f.params[i].get() == in) param = static_cast<int>(i);
    if (alloc < 0 || param < 0 || !constant_params.count(param)) continue;
    bool alone = true;
    for (int o : f.output_params) alone &= o != param;
    for (size_t j = 0; j < stages.size() && alone; ++j) {
      if (j == k) continue;
      alone &= !acc[j].writes.count(out) && !acc[j].reads.count(in) && !acc[j].writes.count(in);
      if (j < k) alone &= !acc[j].reads.count(out);
    }
    if (!alone) continue;
    SplitPrologue sp;
    sp.param = param;
    sp.prologue.name = f.name + "_prologue";
    sp.prologue.params = {f.params[static_cast<size_t>(param)], allocs[static_cast<size_t>(alloc)]};
    sp.prologue.output_params = {1};
    sp.prologue.body = stages[k];
    sp.kernel.name = f.name;
    sp.kernel.params = f.params;
    sp.kernel.params[static_cast<size_t>(param)] = allocs[static_cast<size_t>(alloc)];
    sp.kernel.output_params = f.output_params;
    std::vector<Stmt> rest;
    for (size_t j = 0; j < stages.size(); ++j)
      if (j != k) rest.push_back(stages[j]);
    Stmt body = make_seq(rest);
    for (size_t i = allocs.size(); i-- > 0;)
      if (static_cast<int>(i) != alloc) body = make_allocate(allocs[i], body);
    sp.kernel.body = body;
    return sp;
  }
  return std::nullopt;
}

}  // namespace basin
