// Fused subgraphs of the benchmarks, as single operators: conv2d + bias + relu and
// dense + bias + gelu. They are what fusion produces from a network (an anchor with an
// elementwise epilogue) and what the sketches' fused epilogues are measured on.
#include "core/ops/op_util.h"
#include "core/ops/operators.h"
#include "core/ops/subgraph.h"

namespace basin::ops {

namespace {

// y[..., c, ...] = x[...] + bias[c] along axis `axis`.
Tensor bias_add(const Tensor& x, const Tensor& bias, int axis) {
  return te::compute(
      "bias_add", x.shape(), [&](const std::vector<Var>& i) { return x.read(as_exprs(i)) + bias(i[axis]); },
      te::OpPattern::Broadcast, "bias_add");
}

}  // namespace

void register_fused_ops(std::vector<OpDef>& r) {
  r.push_back({"conv2d_bias_relu",
               "fused",
               "relu(conv2d(x, w) + bias[OC]): a convolution with its epilogue, NCHW",
               {p_int("batch", 1, "N"), p_int("in_channels", 8, "C"), p_int("height", 10, "H"), p_int("width", 10, "W"),
                p_int("out_channels", 16, "OC"), p_ints("kernel", {3}, "KH,KW"), p_ints("stride", {1}, "stride"),
                p_ints("padding", {1}, "padding")},
               [](const Attrs& a) {
                 Check c("conv2d_bias_relu");
                 int64_t n = c.at_least(a, "batch", 1), ch = c.at_least(a, "in_channels", 1);
                 int64_t h = c.at_least(a, "height", 1), w = c.at_least(a, "width", 1);
                 int64_t oc = c.at_least(a, "out_channels", 1);
                 std::vector<int64_t> k = c.per_dim(a, "kernel", 2, 1);
                 Tensor x = te::placeholder("x", {n, ch, h, w}), wt = te::placeholder("w", {oc, ch, k[0], k[1]});
                 Tensor b = te::placeholder("bias", {oc});
                 ConvParams p{c.per_dim(a, "stride", 2, 1), c.per_dim(a, "padding", 2, 0), {1, 1}, 1};
                 c.that(h + 2 * p.padding[0] >= k[0] && w + 2 * p.padding[1] >= k[1], "kernel",
                        "kernel " + ints_str(k) + " does not fit the padded input " + ints_str({n, ch, h, w}));
                 Tensor y = conv(x, wt, p, "conv2d");
                 OpGraph g;
                 g.inputs = {x, wt, b};
                 g.outputs = {unary("relu", bias_add(y, b, 1))};
                 g.ranges = {{}, {}, {}};
                 g.flops = 2.0 * y.numel() * ch * k[0] * k[1] + 2.0 * y.numel();
                 return g;
               }});
  r.push_back(
      {"dense_bias_gelu",
       "fused",
       "gelu(x[M,K] * w[N,K]^T + bias[N]): a dense layer with its epilogue",
       {p_int("M", 16, "rows of x"), p_int("K", 32, "reduction extent"), p_int("N", 24, "rows of w")},
       [](const Attrs& a) {
         Check c("dense_bias_gelu");
         int64_t m = c.at_least(a, "M", 1), k = c.at_least(a, "K", 1), n = c.at_least(a, "N", 1);
         Tensor x = te::placeholder("x", {m, k}), w = te::placeholder("w", {n, k}), b = te::placeholder("bias", {n});
         OpGraph g;
         g.inputs = {x, w, b};
         g.outputs = {unary("gelu", bias_add(dense(x, w), b, 1))};
         g.ranges = {{}, {}, {}};
         g.flops = 2.0 * m * n * k + 10.0 * m * n;
         return g;
       }});
  r.push_back({"subgraph",
               "fused",
               "a fused subgraph of a network, as fusion writes it (core/ops/subgraph.h)",
               {p_str("graph", "x0:f32[4,8]@-1:1;t0=relu(x0){}", "inputs and nodes (core/ops/subgraph.h)")},
               [](const Attrs& a) {
                 // A malformed text or a node that rejects its inputs: the attribute is at fault.
                 try {
                   return build_subgraph(parse_subgraph(a.s("graph")));
                 } catch (const Error& e) {
                   throw OpError("subgraph", "graph", e.what());
                 }
               }});
}

}  // namespace basin::ops
