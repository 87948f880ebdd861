// Fault injection for the measurer's tests (MeasureOptions::program_hook): which
// programs to break, and a break that crashes a kernel wherever it runs.
#pragma once

#include <memory>
#include <mutex>

#include "core/ir/stmt.h"

namespace basin::testing {

// The program's unroll depth (its auto_unroll_max_step pragma), -1 without one.
inline int64_t unroll_of(const LoweredFunc& f) {
  int64_t u = -1;
  visit_stmt(f.body, [&](const Stmt& s) {
    if (s.kind() == StmtKind::Pragma && s->key == "auto_unroll_max_step") is_const_int(s->pragma_value, &u);
  });
  return u;
}

// f with a store 16 TB past its first output before everything else.
inline LoweredFunc with_store_far_out_of_bounds(const LoweredFunc& f) {
  LoweredFunc bad = f;
  const Buffer& out = f.params[f.output_params[0]];
  bad.body = make_seq({make_store(out, {Expr(int64_t{1} << 42)}, fconst(1.0)), f.body});
  return bad;
}

// `hook` called under a lock of its own, for a hook with state (counts, programs seen):
// the measurer calls hooks from several compile threads at once.
template <class Hook>
auto one_at_a_time(Hook hook) {
  return [hook, mu = std::make_shared<std::mutex>()](const LoweredFunc& f) {
    std::lock_guard<std::mutex> l(*mu);
    return hook(f);
  };
}

}  // namespace basin::testing
