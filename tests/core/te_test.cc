// Tensor expressions: operations record their inputs, topological order puts producers
// first, reductions carry identity and combiner, lowering rejects unknown inputs.
#include <gtest/gtest.h>

#include <cmath>

#include "core/ir/lower.h"
#include "core/te/tensor.h"
#include "core/util/error.h"

namespace basin {
namespace {

TEST(TensorExpr, RecordsInputsAndOrdersProducersFirst) {
  te::Tensor a = te::placeholder("a", {4, 5});
  te::Tensor b = te::compute("b", {4, 5}, [&](const std::vector<Var>& i) { return a(i[0], i[1]) * 2.0; });
  te::Tensor c =
      te::reduce("c", {4}, {5}, te::ReduceKind::Max,
                 [&](const std::vector<Var>& i, const std::vector<Var>& r) { return b(i[0], r[0]) + a(i[0], r[0]); });
  ASSERT_EQ(c.op()->inputs.size(), 2u);
  EXPECT_EQ(c.op()->inputs[0].name(), "b");
  EXPECT_EQ(c.op()->inputs[1].name(), "a");
  auto order = te::topo_order({c});
  ASSERT_EQ(order.size(), 3u);
  EXPECT_EQ(order[0]->name, "a");
  EXPECT_EQ(order[1]->name, "b");
  EXPECT_EQ(order[2]->name, "c");
  EXPECT_EQ(c.dtype(), DType::f32());
  EXPECT_TRUE(std::isinf(te::reduce_identity(te::ReduceKind::Max, DType::f32())->fval));
}

TEST(TensorExpr, ReadsCheckRank) {
  te::Tensor a = te::placeholder("a", {4, 5});
  Var i("i");
  EXPECT_THROW(a(i), InternalError);
}

TEST(TensorExpr, LoweringRejectsAnUndeclaredInput) {
  te::Tensor a = te::placeholder("a", {3});
  te::Tensor b = te::placeholder("b", {3});
  te::Tensor c = te::compute("c", {3}, [&](const std::vector<Var>& i) { return a(i[0]) + b(i[0]); });
  EXPECT_THROW(lower_default("f", {a}, {c}), Error);
  LoweredFunc f = lower_default("f", {a, b}, {c});
  EXPECT_EQ(f.params.size(), 3u);
  EXPECT_EQ(f.output_params, std::vector<int>{2});
}

TEST(TensorExpr, IntermediatesAreAllocated) {
  te::Tensor a = te::placeholder("a", {3});
  te::Tensor b = te::compute("b", {3}, [&](const std::vector<Var>& i) { return a(i[0]) + 1.0; });
  te::Tensor c = te::compute("c", {3}, [&](const std::vector<Var>& i) { return b(i[0]) * 2.0; });
  LoweredFunc f = lower_default("f", {a}, {c});
  EXPECT_EQ(f.body.kind(), StmtKind::Allocate);
  EXPECT_EQ(f.body->buffer->name, "b");
}

}  // namespace
}  // namespace basin
