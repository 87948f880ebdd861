// A hand-built program of register tiles whose loads are guarded, the shape of a
// padded 1-D convolution along rows (an inlined padded input):
//
//   for h in 0..rows (parallel):
//     for w2 in 0..tiles:
//       allocate local acc[lanes]
//       acc[l] = 0                                          (l vectorized)
//       for r in 0..3: acc[l] += select(0 <= s*w + r - 1 < width, x[h*width + s*w + r - 1], 0)
//       out[h*out_width + w] = acc[l]                       (w = w2*lanes + l)
//
// The first tile of a row reads the left padding, the last one (stride 1) the right;
// the first and last rows' border tiles read before and after the buffer.
#pragma once

#include "core/ir/stmt.h"

namespace basin::testing {

inline LoweredFunc guarded_tiles(int64_t rows, int64_t width, int64_t stride, int64_t lanes) {
  const int64_t out_width = width / stride, tiles = out_width / lanes;
  Buffer x = make_buffer("x", DType::f32(), {Expr(rows * width)});
  Buffer out = make_buffer("out", DType::f32(), {Expr(rows * out_width)});
  Buffer acc = make_buffer("acc", DType::f32(), {Expr(lanes)}, MemScope::Local);
  Var h("h"), w2("w2"), l0("l0"), l1("l1"), l2("l2"), r("r");
  auto tile = [&](const Var& l) { return Expr(w2) * lanes + l; };  // the output column
  Expr at = tile(l1) * stride + r - 1;
  Expr guard = logical_and(ge(at, Expr(0)), lt(at, Expr(width)));
  Expr value = select(guard, load(x, {Expr(h) * width + at}), fconst(0));
  Stmt init = make_for(l0, 0, lanes, ForKind::Vectorized, make_store(acc, {l0}, fconst(0)));
  Stmt update = make_for(r, 0, 3, ForKind::Unrolled,
                         make_for(l1, 0, lanes, ForKind::Vectorized, make_store(acc, {l1}, load(acc, {l1}) + value)));
  Stmt back =
      make_for(l2, 0, lanes, ForKind::Vectorized, make_store(out, {Expr(h) * out_width + tile(l2)}, load(acc, {l2})));
  Stmt body = make_for(h, 0, rows, ForKind::Parallel,
                       make_for(w2, 0, tiles, ForKind::Serial, make_allocate(acc, make_seq({init, update, back}))));
  return LoweredFunc{"guarded_tiles", {x, out}, {1}, body};
}

}  // namespace basin::testing
