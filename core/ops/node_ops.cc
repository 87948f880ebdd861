#include "core/ops/node_ops.h"

#include <algorithm>
#include <climits>
#include <unordered_map>

#include "core/ops/op_util.h"
#include "core/ops/operators.h"

namespace basin::ops {

namespace {

using Build = std::function<te::Tensor(const Attrs&, const std::vector<te::Tensor>&)>;

NodeOpDef node(std::string name, std::string summary, std::vector<ParamSpec> params, int min_in, int max_in, Build b) {
  NodeOpDef d;
  d.def.name = std::move(name);
  d.def.family = "graph";
  d.def.summary = std::move(summary);
  d.def.params = std::move(params);
  d.min_inputs = min_in;
  d.max_inputs = max_in;
  d.build = std::move(b);
  return d;
}

std::vector<ParamSpec> conv_params() {
  return {p_ints("stride", {1}, "stride per spatial dimension"),
          p_ints("padding", {0}, "zero padding on both sides per spatial dimension"),
          p_ints("dilation", {1}, "kernel dilation per spatial dimension"), p_int("groups", 1, "channel groups"),
          p_int("pad_value", 0, "the padding's value (integer inputs: their zero point)")};
}

std::vector<ParamSpec> pool_params(bool avg) {
  std::vector<ParamSpec> p = {p_ints("kernel", {2}, "KH,KW"), p_ints("stride", {2}, "stride"),
                              p_ints("padding", {0}, "padding"), p_ints("dilation", {1}, "window dilation")};
  if (avg) p.push_back(p_int("count_include_pad", 1, "1: padding counts in the average"));
  p.push_back(p_int("ceil_mode", 0, "1: output extents rounded up"));
  return p;
}

std::vector<NodeOpDef> make_node_ops() {
  std::vector<NodeOpDef> r;
  for (int rank = 1; rank <= 3; ++rank) {
    std::string name = "conv" + std::to_string(rank) + "d";
    r.push_back(node(name, "convolution, weight [OC, C/groups, K...]", conv_params(), 2, 2,
                     [rank, name](const Attrs& a, const std::vector<te::Tensor>& in) {
                       Check c(name);
                       c.that(in[0].ndim() == rank + 2, "x",
                              "expects a rank-" + std::to_string(rank + 2) + " input, got " + ints_str(in[0].shape()));
                       ConvParams p{c.per_dim(a, "stride", rank, 1), c.per_dim(a, "padding", rank, 0),
                                    c.per_dim(a, "dilation", rank, 1), c.at_least(a, "groups", 1), a.i("pad_value")};
                       return conv(in[0], in[1], p, name);
                     }));
  }
  r.push_back(node("conv2d_transpose", "transposed 2-D convolution, weight [IC, OC/groups, KH, KW]",
                   {p_ints("stride", {1}, "stride"), p_ints("padding", {0}, "padding"),
                    p_ints("output_padding", {0}, "extra rows/columns on one side"),
                    p_ints("dilation", {1}, "dilation"), p_int("groups", 1, "channel groups"),
                    p_int("width_phases", 0, "1: output [N, OC, OH, S, OW/S], the width's stride phases major")},
                   2, 2, [](const Attrs& a, const std::vector<te::Tensor>& in) {
                     return conv2d_transpose(in[0], in[1], conv_transpose_params(a));
                   }));
  r.push_back(node("conv2d_nchwc",
                   "convolution in the blocked layout: x [N, C/bi, H, W, bi], weight [OC/bo, C/bi, KH, KW, bi, bo]",
                   conv_params(), 2, 2, [](const Attrs& a, const std::vector<te::Tensor>& in) {
                     Check c("conv2d_nchwc");
                     ConvParams p{c.per_dim(a, "stride", 2, 1), c.per_dim(a, "padding", 2, 0),
                                  c.per_dim(a, "dilation", 2, 1), c.at_least(a, "groups", 1), a.i("pad_value")};
                     return conv2d_nchwc(in[0], in[1], p);
                   }));
  r.push_back(node("to_nchwc", "[N, C, S...] -> [N, C/b, S..., b]", {p_int("block", 16, "channels per block")}, 1, 1,
                   [](const Attrs& a, const std::vector<te::Tensor>& in) { return to_nchwc(in[0], a.i("block")); }));
  r.push_back(node("from_nchwc", "[N, C/b, S..., b] -> [N, C, S...]", {}, 1, 1,
                   [](const Attrs&, const std::vector<te::Tensor>& in) { return from_nchwc(in[0]); }));
  r.push_back(node("winograd_input", "x [N, C/b, H, W, b] -> Winograd tiles [A, A, N, C/b, T, b]",
                   {p_int("m", 2, "output tile"), p_int("padding", 1, "the convolution's padding")}, 1, 1,
                   [](const Attrs& a, const std::vector<te::Tensor>& in) {
                     return winograd_input(in[0], a.i("m"), a.i("padding"));
                   }));
  r.push_back(node("winograd_gemm",
                   "v [A, A, N, C/bi, T, bi], u [A, A, OC/bo, C/bi, bi, bo] -> [A, A, N, OC/bo, T, bo]", {}, 2, 2,
                   [](const Attrs&, const std::vector<te::Tensor>& in) { return winograd_gemm(in[0], in[1]); }));
  r.push_back(
      node("winograd_output", "[A, A, N, OC/b, T, b] -> [N, OC/b, height, width, b]",
           {p_int("m", 2, "output tile"), p_int("height", 1, "output rows"), p_int("width", 1, "output columns")}, 1, 1,
           [](const Attrs& a, const std::vector<te::Tensor>& in) {
             return winograd_output(in[0], a.i("m"), a.i("height"), a.i("width"));
           }));
  r.push_back(node("dense", "x[M,K] w[N,K] -> [M,N]", {}, 2, 2,
                   [](const Attrs&, const std::vector<te::Tensor>& in) { return dense(in[0], in[1]); }));
  r.push_back(node("matmul", "a[M,K] b[K,N] -> [M,N]", {}, 2, 2,
                   [](const Attrs&, const std::vector<te::Tensor>& in) { return matmul(in[0], in[1]); }));
  r.push_back(node("attention", "softmax(q[B,L,D] k[B,D,S] * scale + mask) v[B,S,E] -> [B,L,E]",
                   {p_float("scale", 1.0, "factor of the scores"),
                    p_ints("batch_shape", {}, "the batch B unflattened for the mask's broadcast (empty: [B])")},
                   3, 4, [](const Attrs& a, const std::vector<te::Tensor>& in) {
                     return attention(in[0], in[1], in[2], in.size() > 3 ? &in[3] : nullptr, a.f("scale"),
                                      a.ints("batch_shape"));
                   }));
  r.push_back(node("batch_matmul", "a[B,M,K] b[B,K,N] -> [B,M,N]", {}, 2, 2,
                   [](const Attrs&, const std::vector<te::Tensor>& in) { return batch_matmul(in[0], in[1]); }));
  auto pool_of = [](const Attrs& a, const std::string& name, bool avg) {
    Check c(name);
    PoolParams p{c.per_dim(a, "kernel", 2, 1), c.per_dim(a, "stride", 2, 1), c.per_dim(a, "padding", 2, 0),
                 c.per_dim(a, "dilation", 2, 1), avg ? a.i("count_include_pad") == 1 : true};
    p.ceil_mode = a.i("ceil_mode") != 0;
    return p;
  };
  r.push_back(node("max_pool2d", "2-D max pooling (NCHW)", pool_params(false), 1, 1,
                   [pool_of](const Attrs& a, const std::vector<te::Tensor>& in) {
                     return max_pool2d(in[0], pool_of(a, "max_pool2d", false));
                   }));
  r.push_back(node("avg_pool2d", "2-D average pooling (NCHW)", pool_params(true), 1, 1,
                   [pool_of](const Attrs& a, const std::vector<te::Tensor>& in) {
                     return avg_pool2d(in[0], pool_of(a, "avg_pool2d", true));
                   }));
  r.push_back(node("global_avg_pool2d", "mean over H and W, keeping them", {}, 1, 1,
                   [](const Attrs&, const std::vector<te::Tensor>& in) { return global_pool2d(in[0], true); }));
  r.push_back(node("global_max_pool2d", "max over H and W, keeping them", {}, 1, 1,
                   [](const Attrs&, const std::vector<te::Tensor>& in) { return global_pool2d(in[0], false); }));
  const std::pair<const char*, BinaryOp> binaries[] = {
      {"add", BinaryOp::Add},         {"sub", BinaryOp::Sub},         {"mul", BinaryOp::Mul}, {"div", BinaryOp::Div},
      {"maximum", BinaryOp::Maximum}, {"minimum", BinaryOp::Minimum}, {"pow", BinaryOp::Pow}};
  for (const auto& [name, op] : binaries) {
    std::string n = name;
    BinaryOp o = op;
    r.push_back(node(n, "elementwise with numpy broadcasting", {}, 2, 2,
                     [n, o](const Attrs&, const std::vector<te::Tensor>& in) { return binary(o, in[0], in[1], n); }));
  }
  for (const char* name :
       {"relu",  "relu6", "sigmoid", "tanh", "gelu", "silu", "hardswish", "hardsigmoid", "exp",   "log",  "sqrt",
        "rsqrt", "erf",   "neg",     "abs",  "sin",  "cos",  "floor",     "ceil",        "round", "sign", "softplus"}) {
    std::string n = name;
    r.push_back(node(n, "elementwise activation", {}, 1, 1,
                     [n](const Attrs&, const std::vector<te::Tensor>& in) { return unary(n, in[0]); }));
  }
  r.push_back(node(
      "clip", "min(max(x, min), max)", {p_float("min", 0, "lower bound"), p_float("max", 6, "upper bound")}, 1, 1,
      [](const Attrs& a, const std::vector<te::Tensor>& in) { return unary("clip", in[0], a.f("min"), a.f("max")); }));
  r.push_back(
      node("leaky_relu", "x if x >= 0 else alpha * x", {p_float("alpha", 0.01, "negative slope")}, 1, 1,
           [](const Attrs& a, const std::vector<te::Tensor>& in) { return unary("leaky_relu", in[0], a.f("alpha")); }));
  r.push_back(
      node("elu", "x if x > 0 else alpha * (e ** x - 1)", {p_float("alpha", 1.0, "negative side's scale")}, 1, 1,
           [](const Attrs& a, const std::vector<te::Tensor>& in) { return unary("elu", in[0], a.f("alpha")); }));
  r.push_back(node("selu", "gamma * (x if x > 0 else alpha * (e ** x - 1))",
                   {p_float("alpha", 1.67326319217681884765625, "negative side's scale"),
                    p_float("gamma", 1.05070102214813232421875, "overall scale")},
                   1, 1, [](const Attrs& a, const std::vector<te::Tensor>& in) {
                     return unary("selu", in[0], a.f("alpha"), a.f("gamma"));
                   }));
  const std::pair<const char*, CompareOp> comparisons[] = {{"equal", CompareOp::Equal},
                                                           {"less", CompareOp::Less},
                                                           {"less_equal", CompareOp::LessEqual},
                                                           {"greater", CompareOp::Greater},
                                                           {"greater_equal", CompareOp::GreaterEqual}};
  for (const auto& [name, op] : comparisons) {
    CompareOp o = op;
    r.push_back(node(name, "comparison -> bool, numpy broadcasting", {}, 2, 2,
                     [o](const Attrs&, const std::vector<te::Tensor>& in) { return compare(o, in[0], in[1]); }));
  }
  for (const char* name : {"logical_and", "logical_or", "logical_xor"}) {
    std::string n = name;
    r.push_back(node(n, "logical operator of bool tensors, numpy broadcasting", {}, 2, 2,
                     [n](const Attrs&, const std::vector<te::Tensor>& in) { return logical(n, in[0], in[1]); }));
  }
  r.push_back(node("logical_not", "not x (bool)", {}, 1, 1,
                   [](const Attrs&, const std::vector<te::Tensor>& in) { return logical_not(in[0]); }));
  r.push_back(node("isnan", "true where x is NaN", {}, 1, 1,
                   [](const Attrs&, const std::vector<te::Tensor>& in) { return is_nan(in[0]); }));
  r.push_back(node("isinf", "true where x is an infinity",
                   {p_int("detect_positive", 1, "1: +inf counts"), p_int("detect_negative", 1, "1: -inf counts")}, 1, 1,
                   [](const Attrs& a, const std::vector<te::Tensor>& in) {
                     return is_inf(in[0], a.i("detect_positive") != 0, a.i("detect_negative") != 0);
                   }));
  r.push_back(node("where", "condition ? x : y, numpy broadcasting", {}, 3, 3,
                   [](const Attrs&, const std::vector<te::Tensor>& in) { return where(in[0], in[1], in[2]); }));
  r.push_back(
      node("mod", "remainder: fmod=1 the dividend's sign, 0 the divisor's", {p_int("fmod", 0, "0 or 1")}, 2, 2,
           [](const Attrs& a, const std::vector<te::Tensor>& in) { return mod(in[0], in[1], a.i("fmod") != 0); }));
  r.push_back(
      node("cast", "elementwise type conversion", {p_str("to", "float32", "float32, float64, int32, int64 or bool")}, 1,
           1, [](const Attrs& a, const std::vector<te::Tensor>& in) {
             DType to;
             try {
               to = DType::parse(a.s("to"));
             } catch (const Error&) {
               throw OpError("cast", "to", "'" + a.s("to") + "' is not a type (float32, float64, int32, int64, bool)");
             }
             return cast_to(in[0], to);
           }));
  r.push_back(node("quantize_linear", "saturate(round(x / scale) + zero_point): float32 x, int32 out",
                   {p_int("axis", 1, "the axis of per-axis scales"), p_int("qmin", 0, "least value (0: uint8)"),
                    p_int("qmax", 255, "greatest value (255: uint8)")},
                   3, 3, [](const Attrs& a, const std::vector<te::Tensor>& in) {
                     return quantize_linear(in[0], in[1], in[2], a.i("axis"), a.i("qmin"), a.i("qmax"));
                   }));
  r.push_back(node("dequantize_linear", "(x - zero_point) * scale: int32 x, float32 out",
                   {p_int("axis", 1, "the axis of per-axis scales")}, 3, 3,
                   [](const Attrs& a, const std::vector<te::Tensor>& in) {
                     return dequantize_linear(in[0], in[1], in[2], a.i("axis"));
                   }));
  r.push_back(node("fake_quantize", "dequantize_linear(quantize_linear(x)) in float32: float32 x and out",
                   {p_int("axis", 1, "the axis of per-axis scales"), p_int("qmin", 0, "least value (0: uint8)"),
                    p_int("qmax", 255, "greatest value (255: uint8)")},
                   3, 3, [](const Attrs& a, const std::vector<te::Tensor>& in) {
                     return fake_quantize(in[0], in[1], in[2], a.i("axis"), a.i("qmin"), a.i("qmax"));
                   }));
  r.push_back(node("batch_norm", "inference batch norm: x, gamma, beta, mean, var",
                   {p_float("epsilon", 1e-5, "epsilon")}, 5, 5, [](const Attrs& a, const std::vector<te::Tensor>& in) {
                     return batch_norm(in[0], in[1], in[2], in[3], in[4], a.f("epsilon"));
                   }));
  r.push_back(
      node("softmax", "softmax along axis", {p_int("axis", -1, "axis")}, 1, 1,
           [](const Attrs& a, const std::vector<te::Tensor>& in) { return softmax(in[0], a.i("axis"), false); }));
  r.push_back(
      node("log_softmax", "log-softmax along axis", {p_int("axis", -1, "axis")}, 1, 1,
           [](const Attrs& a, const std::vector<te::Tensor>& in) { return softmax(in[0], a.i("axis"), true); }));
  r.push_back(node("layer_norm", "layer norm over the axes from `axis` on: x, gamma, beta",
                   {p_int("axis", -1, "first normalized axis"), p_float("epsilon", 1e-5, "epsilon")}, 3, 3,
                   [](const Attrs& a, const std::vector<te::Tensor>& in) {
                     return layer_norm(in[0], in[1], in[2], a.i("axis"), a.f("epsilon"));
                   }));
  r.push_back(node("rms_norm", "RMS norm over the axes from `axis` on: x, gamma",
                   {p_int("axis", -1, "first normalized axis"), p_float("epsilon", 1e-6, "epsilon")}, 2, 2,
                   [](const Attrs& a, const std::vector<te::Tensor>& in) {
                     return rms_norm(in[0], in[1], a.i("axis"), a.f("epsilon"));
                   }));
  for (const char* name : {"sum", "mean", "max", "min"}) {
    std::string n = name;
    r.push_back(node(n, "reduction over axes",
                     {p_ints("axes", {}, "axes (empty: all)"), p_int("keepdims", 1, "1: keep")}, 1, 1,
                     [n](const Attrs& a, const std::vector<te::Tensor>& in) {
                       return reduce(n, in[0], a.ints("axes"), a.i("keepdims") == 1);
                     }));
  }
  r.push_back(
      node("reshape", "same elements, new shape", {p_ints("new_shape", {}, "target shape")}, 1, 1,
           [](const Attrs& a, const std::vector<te::Tensor>& in) { return reshape(in[0], a.ints("new_shape")); }));
  r.push_back(node("transpose", "permute axes", {p_ints("perm", {}, "permutation (empty: reverse)")}, 1, 1,
                   [](const Attrs& a, const std::vector<te::Tensor>& in) { return transpose(in[0], a.ints("perm")); }));
  r.push_back(node("flatten", "merge axes start_dim..end_dim",
                   {p_int("start_dim", 1, "first"), p_int("end_dim", -1, "last")}, 1, 1,
                   [](const Attrs& a, const std::vector<te::Tensor>& in) {
                     return flatten(in[0], a.i("start_dim"), a.i("end_dim"));
                   }));
  r.push_back(node("concat", "join along axis", {p_int("axis", 0, "axis")}, 1, 64,
                   [](const Attrs& a, const std::vector<te::Tensor>& in) { return concat(in, a.i("axis")); }));
  r.push_back(node("slice", "strided slice",
                   {p_ints("starts", {0}, "starts"), p_ints("ends", {1}, "ends"),
                    p_ints("axes", {}, "axes (empty: 0..)"), p_ints("steps", {}, "steps (empty: 1)")},
                   1, 1, [](const Attrs& a, const std::vector<te::Tensor>& in) {
                     return slice(in[0], a.ints("starts"), a.ints("ends"), a.ints("axes"), a.ints("steps"));
                   }));
  r.push_back(
      node("pad", "pad every axis (before..., after...)",
           {p_ints("pads", {0}, "pads"), p_float("value", 0, "constant value"), p_str("mode", "constant", "mode")}, 1,
           1, [](const Attrs& a, const std::vector<te::Tensor>& in) {
             return pad(in[0], a.ints("pads"), a.f("value"), a.s("mode"));
           }));
  r.push_back(
      node("gather", "take along axis by indices", {p_int("axis", 0, "axis")}, 2, 2,
           [](const Attrs& a, const std::vector<te::Tensor>& in) { return gather(in[0], in[1], a.i("axis")); }));
  r.push_back(node(
      "gather_elements", "x's elements at indices along axis", {p_int("axis", 0, "axis")}, 2, 2,
      [](const Attrs& a, const std::vector<te::Tensor>& in) { return gather_elements(in[0], in[1], a.i("axis")); }));
  r.push_back(node(
      "gather_nd", "x's slices at index tuples", {p_int("batch_dims", 0, "shared leading axes")}, 2, 2,
      [](const Attrs& a, const std::vector<te::Tensor>& in) { return gather_nd(in[0], in[1], a.i("batch_dims")); }));
  r.push_back(node("cumsum", "running sum along axis",
                   {p_int("axis", 0, "axis"), p_int("exclusive", 0, "0 or 1"), p_int("reverse", 0, "0 or 1")}, 1, 1,
                   [](const Attrs& a, const std::vector<te::Tensor>& in) {
                     return cumsum(in[0], a.i("axis"), a.i("exclusive") != 0, a.i("reverse") != 0);
                   }));
  r.push_back(
      node("embedding", "rows of a table: w[V,D], indices", {}, 2, 2,
           [](const Attrs&, const std::vector<te::Tensor>& in) { return gather(in[0], in[1], 0, "embedding"); }));
  r.push_back(
      node("broadcast_to", "numpy broadcast", {p_ints("new_shape", {}, "target shape")}, 1, 1,
           [](const Attrs& a, const std::vector<te::Tensor>& in) { return broadcast_to(in[0], a.ints("new_shape")); }));
  r.push_back(node("squeeze", "remove extent-1 axes", {p_ints("axes", {}, "axes (empty: all extent-1)")}, 1, 1,
                   [](const Attrs& a, const std::vector<te::Tensor>& in) { return squeeze(in[0], a.ints("axes")); }));
  r.push_back(node("unsqueeze", "insert extent-1 axes", {p_ints("axes", {0}, "positions in the output")}, 1, 1,
                   [](const Attrs& a, const std::vector<te::Tensor>& in) { return unsqueeze(in[0], a.ints("axes")); }));
  r.push_back(
      node("resize", "NCHW resize",
           {p_int("out_height", 1, "output H"), p_int("out_width", 1, "output W"),
            p_str("mode", "nearest", "nearest, bilinear (linear) or cubic"),
            p_int("align_corners", 0, "PyTorch's convention: 1 aligns corners"),
            p_str("coord", "", "ONNX coordinate transformation mode (empty: PyTorch's conventions)"),
            p_str("nearest_mode", "floor", "floor, ceil, round_prefer_floor, round_prefer_ceil"),
            p_float("cubic_a", -0.75, "cubic coefficient"), p_int("exclude_outside", 0, "cubic: 1 drops outside taps"),
            p_float("scale_h", 0, "H scale of the coordinates (0: out / in)"),
            p_float("scale_w", 0, "W scale of the coordinates (0: out / in)")},
           1, 1, [](const Attrs& a, const std::vector<te::Tensor>& in) {
             ResizeParams p;
             p.out_h = a.i("out_height");
             p.out_w = a.i("out_width");
             p.mode = a.s("mode");
             p.align_corners = a.i("align_corners") == 1;
             p.coord = a.s("coord");
             p.nearest_mode = a.s("nearest_mode");
             p.cubic_a = a.f("cubic_a");
             p.exclude_outside = a.i("exclude_outside") != 0;
             p.scale_h = a.f("scale_h");
             p.scale_w = a.f("scale_w");
             return resize(in[0], p);
           }));
  return r;
}

}  // namespace

const std::vector<NodeOpDef>& all_node_ops() {
  static const std::vector<NodeOpDef> ops = make_node_ops();
  return ops;
}

const NodeOpDef* find_node_op(const std::string& name) {
  static const std::unordered_map<std::string, const NodeOpDef*> index = [] {
    std::unordered_map<std::string, const NodeOpDef*> m;
    for (const NodeOpDef& d : all_node_ops()) m[d.def.name] = &d;
    return m;
  }();
  auto it = index.find(name);
  return it == index.end() ? nullptr : it->second;
}

namespace {

const NodeOpDef& need(const std::string& op) {
  const NodeOpDef* d = find_node_op(op);
  if (!d) throw OpError(op, "", "is not a graph operator");
  return *d;
}

}  // namespace

Attrs node_attrs(const std::string& op, const std::map<std::string, AttrValue>& given) {
  const NodeOpDef& d = need(op);
  Attrs a(op);
  for (const ParamSpec& p : d.def.params) a.set(p.name, p.default_value);
  for (const auto& [k, v] : given) {
    const ParamSpec* spec = nullptr;
    for (const ParamSpec& p : d.def.params)
      if (p.name == k) spec = &p;
    if (!spec) throw OpError(op, k, "unknown attribute");
    if (v.index() != spec->default_value.index()) {
      // An integer where a list is expected is a one-element list; a float attribute takes an integer.
      if (spec->type == ParamType::Ints && std::holds_alternative<int64_t>(v))
        a.set(k, std::vector<int64_t>{std::get<int64_t>(v)});
      else if (spec->type == ParamType::Float && std::holds_alternative<int64_t>(v))
        a.set(k, static_cast<double>(std::get<int64_t>(v)));
      else throw OpError(op, k, std::string("expects ") + param_type_name(spec->type) + ", got " + attr_to_string(v));
    } else {
      a.set(k, v);
    }
  }
  return a;
}

Attrs parse_node_attrs(const std::string& op, const std::map<std::string, std::string>& given) {
  return parse_attrs(need(op).def, given);
}

te::Tensor apply_node(const std::string& op, const Attrs& attrs, const std::vector<te::Tensor>& inputs) {
  const NodeOpDef& d = need(op);
  int n = static_cast<int>(inputs.size());
  if (n < d.min_inputs || n > d.max_inputs)
    throw OpError(op, "",
                  "takes " + std::to_string(d.min_inputs) +
                      (d.max_inputs != d.min_inputs ? " to " + std::to_string(d.max_inputs) : "") + " inputs, got " +
                      std::to_string(n));
  for (const te::Tensor& t : inputs)
    if (!t.defined()) throw OpError(op, "", "an input is undefined");
  if (is_view_node(op)) return d.build(attrs, inputs);
  std::vector<te::Tensor> read = inputs;
  for (te::Tensor& t : read)
    if (t.dtype().is_bf16()) t = cast_to(t, DType::f32());
  return d.build(attrs, read);
}

bool is_view_node(const std::string& op) {
  return op == "reshape" || op == "flatten" || op == "squeeze" || op == "unsqueeze";
}

InputRange node_input_range(const std::string& op, const Attrs& attrs, int index,
                            const std::vector<te::Tensor>& inputs) {
  if (op == "gather_elements" && index == 1) {
    int axis = static_cast<int>(attrs.i("axis"));
    if (axis < 0) axis += inputs[0].ndim();
    return {0, static_cast<double>(inputs[0].shape()[axis])};
  }
  if (op == "gather_nd" && index == 1) {
    int64_t lo = INT64_MAX;
    const int64_t b = attrs.i("batch_dims"), k = inputs[1].shape().back();
    for (int64_t j = 0; j < k && b + j < inputs[0].ndim(); ++j) lo = std::min(lo, inputs[0].shape()[b + j]);
    return {0, static_cast<double>(lo)};
  }
  if ((op == "gather" || op == "embedding") && index == 1) {
    int axis = op == "gather" ? static_cast<int>(attrs.i("axis")) : 0;
    if (axis < 0) axis += inputs[0].ndim();
    return {0, static_cast<double>(inputs[0].shape()[axis])};
  }
  if (op == "batch_norm" && index == 4) return {0.5, 1.5};  // variances
  // The registry operator of the same name knows its inputs' domains (divisors, logs).
  static const std::unordered_map<std::string, std::vector<InputRange>> registry_ranges = [] {
    std::unordered_map<std::string, std::vector<InputRange>> m;
    for (const NodeOpDef& d : all_node_ops()) {
      try {
        m[d.def.name] = build_op(d.def.name).ranges;
      } catch (const Error&) {
        // no registry operator of that name
      }
    }
    return m;
  }();
  auto it = registry_ranges.find(op);
  if (it != registry_ranges.end() && index < static_cast<int>(it->second.size())) return it->second[index];
  return {};
}

}  // namespace basin::ops
