// The simplifier: a table of known rewrites checked exactly, and a property test over
// random integer expressions (simplify(e) evaluates equal to e at random points).
#include <gtest/gtest.h>

#include <random>

#include "core/expr/analyzer.h"
#include "core/expr/evaluate.h"

namespace basin {
namespace {

class SimplifyTable : public ::testing::Test {
 protected:
  Var x{"x"}, y{"y"}, z{"z"};
  Analyzer an;
  void SetUp() override {
    an.bind(x, 0, 63);
    an.bind(y, 0, 3);
  }
  void expect(const Expr& in, const Expr& want) {
    Expr got = an.simplify(in);
    EXPECT_TRUE(structural_equal(got, want)) << in << "\n  gave " << got << "\n  want " << want;
  }
};

TEST_F(SimplifyTable, ConstantFolding) {
  expect(Expr(3) + Expr(4) * Expr(5), Expr(23));
  expect(floordiv(Expr(-7), Expr(2)), Expr(-4));
  expect(floormod(Expr(-7), Expr(2)), Expr(1));
  expect(min(Expr(3), Expr(-2)), Expr(-2));
  expect(fconst(1.5f) * fconst(2.0f), fconst(3.0f));
  expect(lt(Expr(1), Expr(2)), bool_imm(true));
}

TEST_F(SimplifyTable, LinearForms) {
  expect(x + x, x * 2);
  expect((x + 3) - (x + 1), Expr(2));
  expect((x + 3) * 2 - x, x + 6);
  expect(z * 4 + x - z * 4, x);
  expect(y + x, x + y);  // canonical order: by variable identity
  expect(x - y * 2 + 5 - 5, x - y * 2);
  expect(Expr(0) - x, x * -1);
}

TEST_F(SimplifyTable, FloorDivModWithBounds) {
  expect(floordiv(x * 4 + y, 4), x);
  expect(floormod(x * 4 + y, 4), y);
  expect(floordiv(x * 8 + 6, 4), x * 2 + 1);
  expect(floormod(x * 8 + 6, 4), Expr(2));
  expect(floordiv(floordiv(z, 4), 2), floordiv(z, 8));
  expect(floormod(floormod(z, 8), 4), floormod(z, 4));
  expect(floordiv(z, 4) * 4 + floormod(z, 4), z);
  expect(floordiv(z * 6 + 4, 4), floordiv(z * 3, 2) + 1);
  expect(floormod(z * 6 + 4, 4), floormod(z * 3, 2) * 2);
  expect(floordiv(y, 8), Expr(0));
  expect(floormod(y + 8, 4), y);
  expect(floordiv(x, 1), x);
  expect(floormod(z, 1), Expr(0));
}

// A comparison of one quotient with a constant becomes one of the dividend.
TEST_F(SimplifyTable, QuotientComparisons) {
  expect(le(Expr(1), floordiv(z, 3)), le(Expr(3), z));
  expect(lt(floordiv(z, 3), Expr(225)), lt(z, Expr(675)));
  expect(lt(Expr(2), floordiv(z, 4)), le(Expr(12), z));
  expect(le(floordiv(z, 4), Expr(-2)), lt(z + 4, Expr(0)));  // the constant on its positive side
}

TEST_F(SimplifyTable, MinMaxWithBounds) {
  expect(min(x, x + 1), x);
  expect(max(x + 2, x), x + 2);
  expect(min(y, 10), y);
  expect(max(x, -1), x);
  expect(min(min(z, 8), 4), min(z, 4));
  expect(min(Expr(5), z), min(z, 5));
}

TEST_F(SimplifyTable, ComparisonsAndLogic) {
  expect(lt(x, 64), bool_imm(true));
  expect(ge(y, 4), bool_imm(false));
  expect(lt(x + 3, z + 5), lt(x, z + 2));
  expect(gt(z, x), lt(x, z));
  expect(logical_not(lt(z, x)), le(x, z));
  expect(logical_and(bool_imm(true), lt(z, x)), lt(z, x));
  expect(select(lt(y, 4), x, z), x);
}

// A value widened to a type holding every value of its own and narrowed back is itself
// (a stored bfloat16 activation read and copied to bfloat16 again); a narrowing
// followed by a widening rounds, and stays.
TEST_F(SimplifyTable, WideningRoundTripsFold) {
  Buffer h = make_buffer("h", DType::bf16(), {Expr(8)});
  Buffer f = make_buffer("f", DType::f32(), {Expr(8)});
  Buffer q = make_buffer("q", DType::u8(), {Expr(8)});
  const Expr hl = load(h, {x}), fl = load(f, {x}), ql = load(q, {x});
  expect(cast(DType::bf16(), cast(DType::f32(), hl)), hl);
  expect(cast(DType::u8(), cast(DType::i32(), ql)), ql);
  const Expr rounded = cast(DType::f32(), cast(DType::bf16(), fl));
  expect(rounded, rounded);
  const Expr via_int = cast(DType::bf16(), cast(DType::f32(), cast(DType::i32(), ql)));
  expect(via_int, via_int);
}

// ---- property test ----

struct RandomExprGen {
  std::mt19937_64 rng;
  std::vector<Var> vars;
  explicit RandomExprGen(uint64_t seed, std::vector<Var> v) : rng(seed), vars(std::move(v)) {}
  int64_t pick(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); }

  Expr gen(int depth) {
    if (depth == 0 || pick(0, 9) < 2) {
      if (pick(0, 2) == 0) return Expr(pick(-8, 16));
      return vars[pick(0, vars.size() - 1)];
    }
    switch (pick(0, 11)) {
      case 0:
      case 1:
        return gen(depth - 1) + gen(depth - 1);
      case 2:
        return gen(depth - 1) - gen(depth - 1);
      case 3:
        return gen(depth - 1) * Expr(pick(-4, 8));
      case 4:
        return depth <= 2 ? gen(depth - 1) * gen(depth - 1) : gen(depth - 1) + Expr(1);
      case 5:
        return floordiv(gen(depth - 1), Expr(pick(0, 4) == 0 ? -pick(1, 6) : pick(1, 16)));
      case 6:
        return floormod(gen(depth - 1), Expr(pick(0, 4) == 0 ? -pick(1, 6) : pick(1, 16)));
      case 7:
        return min(gen(depth - 1), gen(depth - 1));
      case 8:
        return max(gen(depth - 1), gen(depth - 1));
      case 9: {
        Expr c = pick(0, 1) ? lt(gen(depth - 1), gen(depth - 1)) : eq(gen(depth - 1), gen(depth - 1));
        if (pick(0, 3) == 0) c = logical_not(c);
        return select(c, gen(depth - 1), gen(depth - 1));
      }
      case 10: {
        Expr c = logical_and(le(gen(depth - 1), gen(depth - 1)), ne(gen(depth - 1), Expr(pick(0, 4))));
        return select(logical_or(c, ge(gen(depth - 1), Expr(3))), gen(depth - 1), gen(depth - 1));
      }
      default:
        return floordiv(gen(depth - 1), Expr(4)) * 4 + floormod(gen(depth - 1), Expr(4));
    }
  }
};

TEST(SimplifyProperty, RandomExpressionsEvaluateEqual) {
  Var a("a"), b("b"), c("c");
  const int kExprs = 12000;
  RandomExprGen g(20261121, {a, b, c});
  int changed = 0;
  for (int i = 0; i < kExprs; ++i) {
    Analyzer an;
    // Random ranges, sometimes negative, sometimes unknown.
    int64_t lo[3], hi[3];
    bool bound = g.pick(0, 3) != 0;
    Var vs[3] = {a, b, c};
    for (int k = 0; k < 3; ++k) {
      lo[k] = g.pick(-20, 10);
      hi[k] = lo[k] + g.pick(0, 40);
      if (bound) an.bind(vs[k], lo[k], hi[k]);
    }
    Expr e = g.gen(static_cast<int>(g.pick(1, 5)));
    Expr s = an.simplify(e);
    if (!structural_equal(e, s)) ++changed;
    for (int t = 0; t < 12; ++t) {
      std::unordered_map<int64_t, int64_t> vals;
      for (int k = 0; k < 3; ++k) vals[vs[k].id()] = g.pick(lo[k], hi[k]);
      int64_t want = evaluate_int(e, vals);
      int64_t got = evaluate_int(s, vals);
      ASSERT_EQ(want, got) << "expr " << e << "\nsimplified " << s << "\na=" << vals[a.id()] << " b=" << vals[b.id()]
                           << " c=" << vals[c.id()];
    }
  }
  // The rules must actually fire on a good share of the corpus.
  EXPECT_GT(changed, kExprs / 4);
}

// Comparisons of a quotient with a constant (either side, <, <=, >, >=), divisors 1 to
// 7, constants -9 to 9, dividends a * k + j: the simplified comparison evaluates
// equal at every point.
TEST(SimplifyProperty, QuotientComparisonsEvaluateEqual) {
  Var a("a");
  Analyzer an;
  an.bind(a, -40, 40);
  int rewritten = 0;
  for (int64_t c = 1; c <= 7; ++c)
    for (int64_t m = -9; m <= 9; ++m)
      for (int64_t k : {1, 2, -3})
        for (int kind = 0; kind < 4; ++kind) {
          const Expr q = floordiv(Expr(a) * Expr(k) + Expr(int64_t{2}), Expr(c));
          const Expr e = kind == 0   ? lt(q, Expr(m))
                         : kind == 1 ? le(q, Expr(m))
                         : kind == 2 ? lt(Expr(m), q)
                                     : le(Expr(m), q);
          const Expr s = an.simplify(e);
          rewritten += !structural_equal(e, s);
          for (int64_t v = -40; v <= 40; ++v)
            ASSERT_EQ(evaluate_int(e, {{a.id(), v}}), evaluate_int(s, {{a.id(), v}}))
                << e << " -> " << s << " at " << v;
        }
  EXPECT_GT(rewritten, 0);
}

}  // namespace
}  // namespace basin
