// The C++ API example of docs/user-guide.md, compiled and run so that it stays true.
#include <gtest/gtest.h>

#include "core/ir/interpreter.h"
#include "core/ir/lower.h"
#include "core/ops/operators.h"

namespace basin {
namespace {

TEST(ApiExample, ConvReluFromTheUserGuide) {
  te::Tensor x = te::placeholder("x", {1, 8, 12, 12});
  te::Tensor w = te::placeholder("w", {8, 8, 3, 3});
  te::Tensor y = ops::conv(x, w, {{1, 1}, {1, 1}, {1, 1}, 1}, "conv2d");
  te::Tensor z = ops::unary("relu", y);
  LoweredFunc f = lower_default("conv_relu", {x, w}, {z});
  NDArray xa = NDArray::random(DType::f32(), x.shape(), -1, 1, 0);
  NDArray wa = NDArray::random(DType::f32(), w.shape(), -1, 1, 1);
  NDArray za(DType::f32(), z.shape());
  interpret(f, {&xa, &wa, &za});
  // Spot-check one output against a direct computation.
  float acc = 0;
  for (int c = 0; c < 8; ++c)
    for (int kh = 0; kh < 3; ++kh)
      for (int kw = 0; kw < 3; ++kw) {
        int y0 = 5 + kh - 1, x0 = 6 + kw - 1;
        acc = acc + xa.as<float>()[(c * 12 + y0) * 12 + x0] * wa.as<float>()[((3 * 8 + c) * 3 + kh) * 3 + kw];
      }
  EXPECT_EQ(za.as<float>()[(3 * 12 + 5) * 12 + 6], std::max(acc, 0.0f));
}

}  // namespace
}  // namespace basin
