// Loop IR: printer, well-formedness checker, default lowering and the interpreter
// (exact results, bounds checks, errors).
#include <gtest/gtest.h>

#include <algorithm>

#include <cmath>
#include <tuple>

#include "core/ir/interpreter.h"
#include "core/ir/lower.h"
#include "core/ir/partition_loops.h"
#include "core/ir/pass.h"
#include "core/ir/runtime_extent.h"
#include "core/ir/simplify_stmt.h"
#include "core/ir/verify.h"
#include "core/ir/version_tiles.h"
#include "core/te/tensor.h"
#include "core/util/error.h"
#include "tests/core/guarded_tiles.h"

namespace basin {
namespace {

using te::Tensor;

LoweredFunc matmul_func(int64_t m, int64_t k, int64_t n, Tensor* a_out = nullptr) {
  Tensor a = te::placeholder("A", {m, k});
  Tensor b = te::placeholder("B", {k, n});
  Tensor c =
      te::reduce("C", {m, n}, {k}, te::ReduceKind::Sum,
                 [&](const std::vector<Var>& i, const std::vector<Var>& r) { return a(i[0], r[0]) * b(r[0], i[1]); });
  if (a_out) *a_out = a;
  return lower_default("matmul", {a, b}, {c});
}

TEST(LoopIR, LowersMatmulToPlainLoopsWithInit) {
  LoweredFunc f = matmul_func(3, 5, 7);
  std::string text = to_string(f);
  EXPECT_NE(text.find("func matmul(A: float32[3, 5], B: float32[5, 7], C: float32[3, 7])"), std::string::npos) << text;
  EXPECT_NE(text.find("C[((i0 * 7) + i1)] = 0.0f"), std::string::npos) << text;
  EXPECT_NE(text.find("for r0 in 0..5"), std::string::npos) << text;
  EXPECT_TRUE(well_formed_errors(f, {false, true}).empty());
}

TEST(LoopIR, InterpreterComputesMatmulExactly) {
  LoweredFunc f = matmul_func(4, 6, 5);
  NDArray a = NDArray::random(DType::f32(), {4, 6}, -1, 1, 1);
  NDArray b = NDArray::random(DType::f32(), {6, 5}, -1, 1, 2);
  NDArray c(DType::f32(), {4, 5});
  interpret(f, {&a, &b, &c});
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 5; ++j) {
      float acc = 0;  // the same float32 order of operations as the loop nest
      for (int k = 0; k < 6; ++k) acc = acc + a.as<float>()[i * 6 + k] * b.as<float>()[k * 5 + j];
      EXPECT_EQ(c.as<float>()[i * 5 + j], acc);
    }
}

// A pipeline runs its passes in order on the function's body and keeps the rest of
// the function; the backend's pipeline is version_tiles, then partition_loops.
TEST(LoopIR, PassPipelinesRunInOrder) {
  Var i("i"), a("inner_wrap"), b("outer_wrap");
  Buffer out = make_buffer("out", DType::f32(), {Expr(4)});
  LoweredFunc f{"f", {out}, {0}, make_for(i, 0, 4, ForKind::Serial, make_store(out, {i}, fconst(1)))};
  std::vector<std::string> ran;
  auto wrap = [&](const Var& v) {
    return [&ran, v](const Stmt& s) {
      ran.push_back(v.name());
      return make_for(v, 0, 1, ForKind::Serial, s);
    };
  };
  LoweredFunc g = run_passes(f, "test", {{"wrap_a", wrap(a)}, {"wrap_b", wrap(b)}});
  EXPECT_EQ(ran, (std::vector<std::string>{"inner_wrap", "outer_wrap"}));
  EXPECT_EQ(g.name, "f");
  EXPECT_EQ(g.params.size(), 1u);
  const std::string text = to_string(g.body);
  ASSERT_NE(text.find("inner_wrap"), std::string::npos) << text;
  EXPECT_LT(text.find("outer_wrap"), text.find("inner_wrap")) << text;
  EXPECT_EQ(to_string(prepare_for_backend(f).body), to_string(partition_loops(f.body)));
}

TEST(LoopIR, WellFormednessCatchesUnboundVariablesAndBuffers) {
  Var i("i"), j("j");
  Buffer out = make_buffer("out", DType::f32(), {Expr(4)});
  Buffer stray = make_buffer("stray", DType::f32(), {Expr(4)});
  LoweredFunc f{"bad", {out}, {0}, make_for(i, 0, 4, ForKind::Serial, make_store(out, {j}, load(stray, {i})))};
  auto errs = well_formed_errors(f);
  ASSERT_EQ(errs.size(), 2u);
  EXPECT_NE(errs[0].find("'j'"), std::string::npos);
  EXPECT_NE(errs[1].find("'stray'"), std::string::npos);
  EXPECT_THROW(verify_well_formed(f), InternalError);
  LoweredFunc g{"barrier", {out}, {0}, make_seq({make_barrier()})};
  EXPECT_EQ(well_formed_errors(g).size(), 1u);
  // A barrier separates a block's thread loops; inside one it would wait for threads
  // the interpreter has not run yet.
  Var b("b"), t("t"), u("u");
  Stmt phase1 = make_for(t, 0, 4, ForKind::ThreadX, make_store(out, {t}, fconst(1)));
  Stmt phase2 = make_for(u, 0, 4, ForKind::ThreadX, make_store(out, {u}, fconst(2)));
  LoweredFunc ok{"phases", {out}, {0}, make_for(b, 0, 1, ForKind::BlockX, make_seq({phase1, make_barrier(), phase2}))};
  EXPECT_TRUE(well_formed_errors(ok).empty());
  LoweredFunc inside{
      "inside",
      {out},
      {0},
      make_for(b, 0, 1, ForKind::BlockX,
               make_for(t, 0, 4, ForKind::ThreadX, make_seq({make_barrier(), make_store(out, {t}, fconst(1))})))};
  ASSERT_EQ(well_formed_errors(inside).size(), 1u);
  EXPECT_NE(well_formed_errors(inside)[0].find("inside a GPU thread loop"), std::string::npos);
  LoweredFunc h{
      "twice",
      {out},
      {0},
      make_for(i, 0, 2, ForKind::Serial, make_for(i, 0, 2, ForKind::Serial, make_store(out, {i}, fconst(1))))};
  EXPECT_EQ(well_formed_errors(h).size(), 1u);
}

TEST(LoopIR, InterpreterReportsOutOfBoundsAndDefinesDivisionByZero) {
  Var i("i");
  Buffer out = make_buffer("out", DType::f32(), {Expr(4)});
  LoweredFunc oob{"oob", {out}, {0}, make_for(i, 0, 5, ForKind::Serial, make_store(out, {i}, fconst(1)))};
  NDArray o(DType::f32(), {4});
  try {
    interpret(oob, {&o});
    FAIL() << "no error";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("out-of-bounds write to 'out' at flat index 4"), std::string::npos)
        << e.what();
  }
  Buffer iout = make_buffer("iout", DType::i64(), {Expr(4)});
  LoweredFunc dz{"dz", {iout}, {0}, make_for(i, 0, 4, ForKind::Serial, make_store(iout, {i}, floordiv(Expr(8), i)))};
  NDArray io(DType::i64(), {4});
  interpret(dz, {&io});  // integer division is defined everywhere (core/expr/expr.h): 8 // 0 is 0
  EXPECT_EQ(io.get_int(0), 0);
  EXPECT_EQ(io.get_int(3), 2);
  NDArray wrong(DType::f64(), {4});
  EXPECT_THROW(interpret(oob, {&wrong}), RuntimeError);
}

TEST(LoopIR, UninitializedAllocationReadsAsNaN) {
  Var i("i");
  Buffer out = make_buffer("out", DType::f32(), {Expr(2)});
  Buffer tmp = make_buffer("tmp", DType::f32(), {Expr(2)}, MemScope::Local);
  LoweredFunc f{
      "nan", {out}, {0}, make_allocate(tmp, make_for(i, 0, 2, ForKind::Serial, make_store(out, {i}, load(tmp, {i}))))};
  NDArray o(DType::f32(), {2});
  interpret(f, {&o});
  EXPECT_TRUE(std::isnan(o.as<float>()[0]));
}

TEST(LoopIR, SelectEvaluatesOnlyTheChosenOperand) {
  // A padded read: the guarded load would be out of bounds if it were evaluated.
  Tensor x = te::placeholder("x", {4});
  Tensor p = te::compute("p", {6}, [&](const std::vector<Var>& i) {
    return select(logical_and(ge(i[0], 1), lt(i[0], 5)), x(i[0] - 1), fconst(0));
  });
  LoweredFunc f = lower_default("pad", {x}, {p});
  NDArray xa = NDArray::random(DType::f32(), {4}, -1, 1, 3);
  NDArray pa(DType::f32(), {6});
  interpret(f, {&xa, &pa});
  EXPECT_EQ(pa.as<float>()[0], 0.0f);
  EXPECT_EQ(pa.as<float>()[1], xa.as<float>()[0]);
  EXPECT_EQ(pa.as<float>()[5], 0.0f);
}

TEST(LoopIR, StructuralEqualityRenamesBoundLoopVariables) {
  Buffer out = make_buffer("out", DType::f32(), {Expr(4)});
  Var i("i"), j("j");
  Stmt a = make_for(i, 0, 4, ForKind::Serial, make_store(out, {i}, fconst(1)));
  Stmt b = make_for(j, 0, 4, ForKind::Serial, make_store(out, {j}, fconst(1)));
  Stmt c = make_for(j, 0, 4, ForKind::Parallel, make_store(out, {j}, fconst(1)));
  EXPECT_TRUE(structural_equal(a, b));
  EXPECT_FALSE(structural_equal(a, c));
}

TEST(LoopIR, SimplifyStmtUsesLoopRanges) {
  Buffer out = make_buffer("out", DType::f32(), {Expr(8)});
  Var i("i");
  Stmt s = make_for(i, 0, 4, ForKind::Serial, make_if(lt(i, 10), make_store(out, {floordiv(i * 2 + 1, 2)}, fconst(1))));
  Stmt want = make_for(i, 0, 4, ForKind::Serial, make_store(out, {i}, fconst(1)));
  EXPECT_TRUE(structural_equal(simplify_stmt(s), want)) << simplify_stmt(s);
}

}  // namespace
}  // namespace basin

namespace basin {
namespace {

TEST(LoopIR, SimplifyStmtRemovesUnitLoops) {
  Buffer out = make_buffer("out", DType::f32(), {Expr(8)});
  Var i("i"), k("k");
  Stmt s =
      make_for(i, 0, 4, ForKind::Serial, make_for(k, 0, 1, ForKind::Serial, make_store(out, {i * 2 + k}, fconst(1))));
  Stmt want = make_for(i, 0, 4, ForKind::Serial, make_store(out, {i * 2}, fconst(1)));
  EXPECT_TRUE(structural_equal(simplify_stmt(s), want)) << simplify_stmt(s);
  // GPU bindings stay, even of extent 1.
  Stmt g = make_for(k, 0, 1, ForKind::ThreadX, make_store(out, {k}, fconst(1)));
  EXPECT_EQ(simplify_stmt(g).kind(), StmtKind::For);
}

// The selects left in a statement.
int selects_in(const Stmt& s) {
  int n = 0;
  auto count = [&](const Expr& e) {
    rewrite_post_order(e, [&](const Expr& x) -> Expr {
      n += x.kind() == ExprKind::Select;
      return Expr();
    });
  };
  visit_stmt(s, [&](const Stmt& st) {
    if (st.kind() == StmtKind::Store) count(st->value);
  });
  return n;
}

// A 2-D padded copy: out[i, j] = x[i - 1, j - 1] inside, 0 on a border of one.
LoweredFunc padded_copy(const Var& i, const Var& j, ForKind outer) {
  Buffer x = make_buffer("x", DType::f32(), {Expr(64)});
  Buffer out = make_buffer("out", DType::f32(), {Expr(100)});
  Expr inside = logical_and(logical_and(le(Expr(1), i), lt(i, 9)), logical_and(le(Expr(1), j), lt(j, 9)));
  Stmt body =
      make_for(i, 0, 10, outer,
               make_for(j, 0, 10, ForKind::Serial,
                        make_store(out, {i * 10 + j}, select(inside, load(x, {(i - 1) * 8 + (j - 1)}), fconst(0)))));
  return {"pad", {x, out}, {1}, body};
}

NDArray run_pad(const LoweredFunc& f, const NDArray& x) {
  NDArray out(DType::f32(), {100});
  NDArray in = x.clone();
  interpret(f, {&in, &out});
  return out;
}

TEST(PartitionLoops, SplitsAPaddedCopyIntoBranchFreePieces) {
  Var i("i"), j("j");
  LoweredFunc f = padded_copy(i, j, ForKind::Serial);
  LoweredFunc g = f;
  g.body = partition_loops(f.body);
  EXPECT_EQ(selects_in(f.body), 1);
  EXPECT_EQ(selects_in(g.body), 0) << g.body;  // every piece's comparisons decided
  NDArray x = NDArray::random(DType::f32(), {64}, -1, 1, 11);
  NDArray want = run_pad(f, x), got = run_pad(g, x);
  EXPECT_EQ(compare_arrays(got, want).max_abs, 0) << g.body;
  EXPECT_TRUE(well_formed_errors(g, {false, true}).empty());
  int vector_loops = 0;
  visit_stmt(g.body, [&](const Stmt& st) {
    vector_loops += st.kind() == StmtKind::For && st->for_kind == ForKind::Vectorized;
  });
  EXPECT_GE(vector_loops, 1) << g.body;  // the interior rows' copies, and the border rows' fills
  // Under a parallel loop: the inner loop is split, the parallel one kept.
  LoweredFunc p = padded_copy(i, j, ForKind::Parallel);
  Stmt q = partition_loops(p.body);
  ASSERT_EQ(q.kind(), StmtKind::For);
  EXPECT_EQ(q->for_kind, ForKind::Parallel);
  EXPECT_EQ(selects_in(q), 1) << q;  // the interior row's select, on i alone, stays
  LoweredFunc pq = p;
  pq.body = q;
  EXPECT_EQ(compare_arrays(run_pad(pq, x), want).max_abs, 0) << q;
}

// A loop that copies with a strided load and no select (a packing stage's row) is
// not split, but becomes a vector loop; one that also reads what it writes does not.
TEST(PartitionLoops, AnInnermostCopyBecomesAVectorLoopWhateverItsLoadsStride) {
  Var k("k"), l("l");
  Buffer w = make_buffer("w", DType::f32(), {Expr(16 * 9)});
  Buffer p = make_buffer("p", DType::f32(), {Expr(9 * 16)});
  Stmt pack = make_for(k, 0, 9, ForKind::Serial,
                       make_for(l, 0, 16, ForKind::Serial, make_store(p, {k * 16 + l}, load(w, {l * 9 + k}))));
  Stmt q = partition_loops(pack);
  ASSERT_EQ(q.kind(), StmtKind::For);
  EXPECT_EQ(q->for_kind, ForKind::Serial) << q;  // not innermost
  EXPECT_EQ(q->body[0]->for_kind, ForKind::Vectorized) << q;
  LoweredFunc f{"pack", {w, p}, {1}, pack}, g{"pack", {w, p}, {1}, q};
  NDArray wa = NDArray::random(DType::f32(), {16 * 9}, -1, 1, 3);
  NDArray a(DType::f32(), {9 * 16}), b(DType::f32(), {9 * 16});
  NDArray w1 = wa.clone(), w2 = wa.clone();
  interpret(f, {&w1, &a});
  interpret(g, {&w2, &b});
  EXPECT_EQ(compare_arrays(b, a).max_abs, 0) << q;
  // Reads its own output: serial.
  Stmt own = make_for(l, 0, 16, ForKind::Serial, make_store(p, {l * 1}, load(p, {l * 9})));
  EXPECT_TRUE(structural_equal(partition_loops(own), own));
  // A store that steps by more than one element: serial.
  Stmt wide = make_for(l, 0, 16, ForKind::Serial, make_store(p, {l * 9}, load(w, {l * 1})));
  EXPECT_TRUE(structural_equal(partition_loops(wide), wide));
}

// A copy longer than a vector loop takes (a 112-wide padded row) runs as vectors of 16
// lanes and one vector of the rest, computing the same.
TEST(PartitionLoops, ALongCopyRunsAsChunksOfVectors) {
  for (int64_t n : {112, 96, 65}) {
    Var l("l");
    Buffer x = make_buffer("x", DType::f32(), {Expr(2 * n)});
    Buffer y = make_buffer("y", DType::f32(), {Expr(n)});
    Stmt copy = make_for(l, 0, n, ForKind::Serial, make_store(y, {l * 1}, load(x, {l * 2 + 1})));
    Stmt q = partition_loops(copy);
    int vector_loops = 0, longest = 0;
    visit_stmt(q, [&](const Stmt& st) {
      if (st.kind() != StmtKind::For || st->for_kind != ForKind::Vectorized) return;
      ++vector_loops;
      int64_t e = 0;
      ASSERT_TRUE(is_const_int(st->extent, &e));
      longest = std::max<int>(longest, static_cast<int>(e));
    });
    EXPECT_EQ(vector_loops, n % 16 > 1 ? 2 : 1) << q;
    EXPECT_EQ(longest, 16) << q;
    LoweredFunc f{"copy", {x, y}, {1}, copy}, g{"copy", {x, y}, {1}, q};
    NDArray xa = NDArray::random(DType::f32(), {2 * n}, -1, 1, 4);
    NDArray a(DType::f32(), {n}), b(DType::f32(), {n});
    NDArray x1 = xa.clone(), x2 = xa.clone();
    interpret(f, {&x1, &a});
    interpret(g, {&x2, &b});
    EXPECT_EQ(compare_arrays(b, a).max_abs, 0) << q;
  }
}

TEST(PartitionLoops, APieceThatReadsWhatItWritesStaysSerial) {
  // A running sum: split at i = 1, but its pieces read the previous element.
  Var i("i");
  Buffer x = make_buffer("x", DType::f32(), {Expr(10)});
  Buffer out = make_buffer("out", DType::f32(), {Expr(10)});
  Stmt scan =
      make_for(i, 0, 10, ForKind::Serial,
               make_store(out, {i * 1}, select(lt(i, 1), load(x, {i * 1}), load(out, {i - 1}) + load(x, {i * 1}))));
  Stmt p = partition_loops(scan);
  EXPECT_FALSE(structural_equal(p, scan));
  visit_stmt(
      p, [&](const Stmt& st) { EXPECT_FALSE(st.kind() == StmtKind::For && st->for_kind == ForKind::Vectorized) << p; });
  LoweredFunc f{"scan", {x, out}, {1}, scan}, g{"scan", {x, out}, {1}, p};
  NDArray xa = NDArray::random(DType::f32(), {10}, -1, 1, 4);
  NDArray a(DType::f32(), {10}), b(DType::f32(), {10});
  NDArray x1 = xa.clone(), x2 = xa.clone();
  interpret(f, {&x1, &a});
  interpret(g, {&x2, &b});
  EXPECT_EQ(compare_arrays(b, a).max_abs, 0) << p;
}

TEST(PartitionLoops, LeavesOtherLoopsAlone) {
  Var i("i"), r("r");
  Buffer x = make_buffer("x", DType::f32(), {Expr(16)});
  Buffer out = make_buffer("out", DType::f32(), {Expr(16)});
  // A comparison of two variables: no constant point where it changes.
  Stmt two = make_for(
      i, 0, 8, ForKind::Serial,
      make_for(r, 0, 8, ForKind::Serial, make_store(out, {i}, select(lt(i + r, 8), load(x, {i + r}), fconst(0)))));
  EXPECT_TRUE(structural_equal(partition_loops(two), two));
  // Seven pieces, over the limit of five.
  Expr holes = logical_and(logical_and(ne(i, 3), ne(i, 5)), ne(i, 7));
  Stmt many = make_for(i, 0, 16, ForKind::Serial, make_store(out, {i}, select(holes, load(x, {i}), fconst(0))));
  EXPECT_TRUE(structural_equal(partition_loops(many), many));
  EXPECT_FALSE(structural_equal(partition_loops(many, 7), many));
  // A vectorized loop inside: not small.
  Stmt vec = make_for(
      i, 0, 2, ForKind::Serial,
      make_for(r, 0, 8, ForKind::Vectorized, make_store(out, {i * 8 + r}, select(lt(i, 1), load(x, {r}), fconst(0)))));
  EXPECT_TRUE(structural_equal(partition_loops(vec), vec));
}

// A tile whose guarded loads stay inside their buffer runs under the pragma, the
// others (the first and last rows' border tiles) with their loops rolled. Both copies
// compute what the program computed.
int pragmas_in(const Stmt& s) {
  int n = 0;
  visit_stmt(
      s, [&](const Stmt& st) { n += st.kind() == StmtKind::Pragma && st->key == std::string(kGuardedLoadsInBounds); });
  return n;
}

int loops_of_kind(const Stmt& s, ForKind k) {
  int n = 0;
  visit_stmt(s, [&](const Stmt& st) { n += st.kind() == StmtKind::For && st->for_kind == k; });
  return n;
}

void expect_same_values(const LoweredFunc& f, const LoweredFunc& g, int64_t rows, int64_t width) {
  NDArray x = NDArray::random(DType::f32(), {rows * width}, -1, 1, 5);
  const int64_t n = const_int(f.params[1]->shape[0]);
  NDArray want(DType::f32(), {n}), got(DType::f32(), {n});
  NDArray x1 = x.clone();
  interpret(f, {&x, &want});
  interpret(g, {&x1, &got});
  EXPECT_EQ(compare_arrays(got, want).max_abs, 0) << g.body;
  EXPECT_TRUE(well_formed_errors(g, {false, true}).empty()) << g.body;
}

TEST(VersionTiles, GuardedLoadsRunUnmaskedWhereTheyStayInTheirBuffer) {
  // Several tiles a row, stride 1 and 2; one tile a row, always on the border.
  for (auto [width, stride, lanes] : {std::tuple{64, 1, 8}, {64, 2, 8}, {16, 1, 16}}) {
    LoweredFunc f = testing::guarded_tiles(4, width, stride, lanes);
    LoweredFunc g = f;
    g.body = version_tiles(f.body);
    ASSERT_EQ(selects_in(f.body), 1);
    EXPECT_EQ(selects_in(g.body), 2) << g.body;
    EXPECT_EQ(pragmas_in(g.body), 1) << g.body;
    ASSERT_EQ(loops_of_kind(f.body, ForKind::Unrolled), 1);
    EXPECT_EQ(loops_of_kind(g.body, ForKind::Unrolled), 1) << g.body;  // the other copy rolled
    int ifs = 0;
    visit_stmt(g.body, [&](const Stmt& st) { ifs += st.kind() == StmtKind::IfThenElse; });
    EXPECT_EQ(ifs, 1) << g.body;
    const std::string text = to_string(g.body);
    EXPECT_LT(text.find("if "), text.find("allocate")) << text;  // tested once a tile
    expect_same_values(f, g, 4, width);
  }
}

TEST(VersionTiles, ATileThatAlwaysReadsPastItsBufferIsLeftAlone) {
  // One row, one tile: its reads start before the buffer whatever the tile.
  LoweredFunc f = testing::guarded_tiles(1, 16, 1, 16);
  EXPECT_TRUE(structural_equal(version_tiles(f.body), f.body)) << version_tiles(f.body);
}

TEST(VersionTiles, LeavesTilesItCannotBoundAlone) {
  // A guarded load whose index is not affine in the tile's loops.
  Buffer x = make_buffer("x", DType::f32(), {Expr(64)});
  Buffer out = make_buffer("out", DType::f32(), {Expr(64)});
  Buffer acc = make_buffer("acc", DType::f32(), {Expr(8)}, MemScope::Local);
  Var t("t"), l("l"), m("m");
  Expr at = floormod(Expr(t) * 8 + l, Expr(5)) * 3;
  Stmt tile = make_allocate(
      acc, make_seq({make_for(l, 0, 8, ForKind::Serial,
                              make_store(acc, {l}, select(lt(at, Expr(7)), load(x, {at}), fconst(0)))),
                     make_for(m, 0, 8, ForKind::Serial, make_store(out, {Expr(t) * 8 + m}, load(acc, {m})))}));
  Stmt prog = make_for(t, 0, 8, ForKind::Serial, tile);
  EXPECT_TRUE(structural_equal(version_tiles(prog), prog)) << version_tiles(prog);
  // Without a Local allocation, no tile.
  Stmt flat =
      make_for(t, 0, 64, ForKind::Serial, make_store(out, {t}, select(lt(t, Expr(3)), load(x, {t}), fconst(0))));
  EXPECT_TRUE(structural_equal(version_tiles(flat), flat));
}

}  // namespace
// Run-time extents: out[6, 4] written with the columns walked in parallel around the
// rows. The column loop's iterations each write every row, so the row loop inside it is
// the one given its iterations at run time; a call of 3 rows walks 3 of them. The
// interpreter then writes rows 0..2 and leaves the rest as they were. A loop that also
// writes a buffer living past one of its iterations is left alone.
TEST(RuntimeExtent, TheRowLoopInsideAParallelColumnLoopTakesItsIterationsAtRunTime) {
  Var c("c"), r("r");
  Buffer in = make_buffer("in", DType::f32(), {Expr(24)});
  Buffer out = make_buffer("out", DType::f32(), {Expr(6), Expr(4)});
  Stmt body = make_for(c, 0, 4, ForKind::Parallel,
                       make_for(r, 0, 6, ForKind::Serial,
                                make_store(out, {r * 4 + c}, load(in, {r * 4 + c}) * fconst(2))));
  LoweredFunc f{"rows", {in, out}, {1}, body};
  std::optional<RuntimeExtentKernel> k = with_runtime_iterations(f, {6});
  ASSERT_TRUE(k.has_value());
  EXPECT_EQ(k->param, 1);
  ASSERT_EQ(k->func.params.size(), 3u);
  EXPECT_EQ(k->func.output_params, std::vector<int>{2});
  ASSERT_EQ(k->nests.size(), 1u);
  EXPECT_EQ(k->nests[0].extent, 6);
  EXPECT_EQ(k->nests[0].first[2], 8);   // row 2, column 0
  EXPECT_EQ(k->nests[0].last[2], 11);   // row 2, column 3
  EXPECT_FALSE(with_runtime_iterations(f, {5}).has_value());  // no axis of extent 5
  NDArray x = NDArray::random(DType::f32(), {24}, -1, 1, 3), iters(DType::i32(), {7}), y(DType::f32(), {6, 4});
  auto* iv = static_cast<int32_t*>(iters.data());
  runtime_iterations(k->nests, 4, 6, 3, iv);
  EXPECT_EQ(std::vector<int32_t>(iv, iv + 7), (std::vector<int32_t>{3, 1, 1, 1, 0, 0, 0}));
  auto* yv = static_cast<float*>(y.data());
  std::fill(yv, yv + 24, -7.0f);
  interpret(k->func, {&x, &iters, &y});
  const auto* xv = static_cast<const float*>(x.data());
  for (int e = 0; e < 24; ++e) EXPECT_EQ(yv[e], e < 12 ? 2 * xv[e] : -7.0f) << "element " << e;
  runtime_iterations(k->nests, 0, 0, 0, iv);  // every iteration
  EXPECT_EQ(std::vector<int32_t>(iv, iv + 7), (std::vector<int32_t>{6, 1, 1, 1, 1, 1, 1}));
  // The same loop also writing a global scratch buffer of the kernel's.
  Buffer scratch = make_buffer("scratch", DType::f32(), {Expr(24)});
  Stmt both = make_for(c, 0, 4, ForKind::Parallel,
                       make_for(r, 0, 6, ForKind::Serial,
                                make_seq({make_store(scratch, {r * 4 + c}, fconst(1)),
                                          make_store(out, {r * 4 + c}, load(in, {r * 4 + c}))})));
  LoweredFunc g{"scratch", {in, out}, {1}, make_allocate(scratch, both)};
  EXPECT_FALSE(with_runtime_iterations(g, {6}).has_value());
}

}  // namespace basin
