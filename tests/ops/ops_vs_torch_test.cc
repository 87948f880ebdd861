// Every operator of the library: lowered with the default schedule, interpreted on
// random inputs and compared with LibTorch's kernel (max relative error 1e-4), on
// several shapes each including odd ones; and at least one must-fail case per operator
// for a bad attribute, which must be an OpError naming the operator and the attribute.
#include <gtest/gtest.h>

#include <set>

#include "codegen/op_check.h"
#include "codegen/torch_reference.h"
#include "core/ops/node_ops.h"
#include "core/ops/registry.h"
#include "core/util/blas.h"
#include "core/util/error.h"
#include "tests/ops/op_cases.h"

namespace basin {
namespace {

class OpVsTorch : public ::testing::TestWithParam<Case> {};

TEST_P(OpVsTorch, InterpreterMatchesLibTorch) {
  const Case& c = GetParam();
  ops::OpGraph g = ops::build_op(c.op, parse(c.params));
  codegen::OpCheck r = codegen::check_against_torch(g, 42);
  EXPECT_LE(r.max_rel_error, 1e-4) << c.op << " " << c.params << ": max abs error " << r.max_abs_error;
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  std::string s = info.param.op + "_" + std::to_string(info.index);
  for (char& ch : s)
    if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

INSTANTIATE_TEST_SUITE_P(AllOperators, OpVsTorch, ::testing::ValuesIn(good_cases()), case_name);

class OpBadAttribute : public ::testing::TestWithParam<BadCase> {};

TEST_P(OpBadAttribute, IsATypedErrorNamingOperatorAndAttribute) {
  const BadCase& c = GetParam();
  try {
    ops::build_op(c.op, parse(c.params));
    FAIL() << c.op << " " << c.params << " was accepted";
  } catch (const OpError& e) {
    EXPECT_EQ(e.op(), c.op) << e.what();
    EXPECT_NE(std::string(e.what()).find("'" + c.attr), std::string::npos) << e.what();
  }
}

std::string bad_name(const ::testing::TestParamInfo<BadCase>& info) {
  std::string s = info.param.op + "_" + info.param.attr + "_" + std::to_string(info.index);
  for (char& ch : s)
    if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

INSTANTIATE_TEST_SUITE_P(AllOperators, OpBadAttribute, ::testing::ValuesIn(bad_cases()), bad_name);

TEST(OperatorCoverage, EveryOperatorHasCasesFailuresAndAReference) {
  std::map<std::string, int> good, bad;
  for (const Case& c : good_cases()) ++good[c.op];
  for (const BadCase& c : bad_cases()) ++bad[c.op];
  for (const ops::OpDef& d : ops::all_ops()) {
    EXPECT_GE(good[d.name], 2) << d.name << " needs at least two shapes compared with LibTorch";
    EXPECT_GE(bad[d.name], 1) << d.name << " needs a must-fail case";
    EXPECT_TRUE(codegen::has_torch_reference(d.name)) << d.name;
  }
}

TEST(OperatorCoverage, DesignOperatorsAreAllRegistered) {
  // The operator list of DESIGN.md ("Tensor expressions").
  const char* design[] = {"dense",
                          "matmul",
                          "batch_matmul",
                          "conv1d",
                          "conv2d",
                          "conv3d",
                          "depthwise_conv2d",
                          "conv2d_transpose",
                          "max_pool2d",
                          "avg_pool2d",
                          "global_avg_pool2d",
                          "add",
                          "sub",
                          "mul",
                          "div",
                          "maximum",
                          "minimum",
                          "pow",
                          "relu",
                          "relu6",
                          "clip",
                          "sigmoid",
                          "tanh",
                          "gelu",
                          "silu",
                          "hardswish",
                          "hardsigmoid",
                          "leaky_relu",
                          "exp",
                          "log",
                          "sqrt",
                          "rsqrt",
                          "erf",
                          "neg",
                          "abs",
                          "batch_norm",
                          "softmax",
                          "log_softmax",
                          "layer_norm",
                          "rms_norm",
                          "sum",
                          "mean",
                          "max",
                          "min",
                          "reshape",
                          "transpose",
                          "flatten",
                          "concat",
                          "split",
                          "slice",
                          "pad",
                          "gather",
                          "embedding",
                          "broadcast_to",
                          "squeeze",
                          "unsqueeze",
                          "resize"};
  std::set<std::string> have;
  for (const ops::OpDef& d : ops::all_ops()) have.insert(d.name);
  for (const char* op : design) EXPECT_TRUE(have.count(op)) << op;
}

// bfloat16 is a storage type: a graph operator reads such an input as float32 (a cast
// stage), a view keeps it; a task of stored values (bfloat16 inputs, a cast to bfloat16
// last) matches LibTorch, which reads and rounds alike, within one rounding step.
TEST(NodeOps, Bfloat16InputsAreReadAsFloat32AndViewsKeepThem) {
  te::Tensor h = te::placeholder("h", {2, 3, 4}, DType::bf16());
  te::Tensor r = ops::apply_node("relu", {}, {h});
  EXPECT_EQ(r.dtype(), DType::f32());
  ASSERT_EQ(r.op()->inputs.size(), 1u);
  EXPECT_EQ(r.op()->inputs[0].op()->tag, "cast");
  EXPECT_EQ(r.op()->inputs[0].op()->inputs[0].op(), h.op());
  te::Tensor v =
      ops::apply_node("reshape", ops::node_attrs("reshape", {{"new_shape", std::vector<int64_t>{6, 4}}}), {h});
  EXPECT_EQ(v.dtype(), DType::bf16());
  EXPECT_EQ(ops::apply_node("add", {}, {h, te::placeholder("f", {4})}).dtype(), DType::f32());
  EXPECT_EQ(ops::apply_node("cast", ops::node_attrs("cast", {{"to", std::string("bfloat16")}}), {r}).dtype(),
            DType::bf16());
}

TEST(NodeOps, AStoredBfloat16TaskMatchesLibTorch) {
  for (const char* graph :
       {"x0:bfloat16[1,2,6,6,8]@-1:1;x1:float32[2,2,3,3,8,8]@-1:1;x2:bfloat16[1,2,6,6,8]@-1:1;"
        "t0=conv2d_nchwc(x0,x1){dilation=1,1|groups=1|padding=1,1|stride=1,1};t1=add(t0,x2){};t2=relu(t1){};"
        "t3=cast(t2){to=bfloat16}",
        "x0:bfloat16[4,24]@-1:1;x1:float32[24]@0.5:1.5;x2:float32[24]@-1:1;t0=layer_norm(x0,x1,x2){axis=-1|epsilon=1e-"
        "05}",
        "x0:bfloat16[1,2,6,6,8]@-1:1;t0=reshape(x0){new_shape=2,36,8};t1=softmax(t0){axis=1};"
        "t2=cast(t1){to=bfloat16}"}) {
    SCOPED_TRACE(graph);
    ops::OpGraph g = ops::build_op("subgraph", {{"graph", std::string(graph)}});
    codegen::OpCheck r = codegen::check_against_torch(g, 7);
    EXPECT_LE(r.max_rel_error, g.outputs[0].dtype().is_bf16() ? 1.0 / 128 : 1e-4);
  }
}

TEST(OperatorErrors, UnknownOperatorIsNotFound) {
  EXPECT_THROW(ops::build_op("conv4d"), NotFoundError);
  try {
    ops::find_op("conv");
  } catch (const NotFoundError& e) {
    EXPECT_NE(std::string(e.what()).find("conv2d"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace basin

namespace basin {
namespace {

// OpenBLAS's workers busy-wait after each call: basin keeps BLAS on the calling thread
// (200-trial tuning runs compiled 14 to 34% faster, core/util/blas.h) and gives it
// the peer's threads only while LibTorch is timed as the peer.
TEST(Blas, OneThreadOutsideThePeersTiming) {
  if (blas_threads() == 0) GTEST_SKIP() << "LibTorch does not use OpenBLAS here";
  EXPECT_EQ(blas_threads(), 1) << "at start";
  {
    BlasThreads peer(2);
    EXPECT_EQ(blas_threads(), 2);
  }
  EXPECT_EQ(blas_threads(), 1);
  ops::OpGraph g = ops::build_op("matmul", parse("M=64 K=64 N=64"));
  codegen::time_torch_reference(g, codegen::random_inputs(g, 1), codegen::TimingOptions::quick());
  EXPECT_EQ(blas_threads(), 1) << "after the peer's timing";
}

}  // namespace
}  // namespace basin
