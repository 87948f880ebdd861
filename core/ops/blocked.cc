// The blocked channel layout NCHWc (docs/networks.md, "Layouts"): a tensor [N, C, H, W]
// held as [N, C/b, H, W, b], b channels innermost, so that a convolution's vectors run
// along its output channels and every step of its reduction reads b consecutive
// input channels. to_nchwc and from_nchwc convert; conv2d_nchwc is the convolution
// that reads and writes it.
#include <cstring>

#include "core/ops/op_util.h"
#include "core/ops/operators.h"

namespace basin::ops {

Tensor to_nchwc(const Tensor& x, int64_t block) {
  Check c("to_nchwc");
  c.that(x.ndim() >= 3, "x", "expected [N, C, spatial...], got " + ints_str(x.shape()));
  c.that(block >= 1 && x.shape()[1] % block == 0, "block",
         std::to_string(x.shape()[1]) + " channels are not a multiple of the block " + std::to_string(block));
  std::vector<int64_t> shape = x.shape();
  shape[1] /= block;
  shape.push_back(block);
  return te::compute(
      "to_nchwc", shape,
      [&](const std::vector<Var>& i) {
        std::vector<Expr> src(i.begin(), i.end() - 1);
        src[1] = i[1] * block + i.back();
        return x.read(src);
      },
      te::OpPattern::Injective, "to_nchwc");
}

Tensor from_nchwc(const Tensor& x) {
  Check c("from_nchwc");
  c.that(x.ndim() >= 4, "x", "expected [N, C/b, spatial..., b], got " + ints_str(x.shape()));
  const int64_t block = x.shape().back();
  std::vector<int64_t> shape(x.shape().begin(), x.shape().end() - 1);
  shape[1] *= block;
  return te::compute(
      "from_nchwc", shape,
      [&](const std::vector<Var>& i) {
        std::vector<Expr> src(i.begin(), i.end());
        src[1] = floordiv(i[1], Expr(block));
        src.push_back(floormod(i[1], Expr(block)));
        return x.read(src);
      },
      te::OpPattern::Injective, "from_nchwc");
}

Tensor conv2d_nchwc(const Tensor& x, const Tensor& w, const ConvParams& p) {
  Check c("conv2d_nchwc");
  c.that(x.ndim() == 5, "x", "expected [N, C/bi, H, W, bi], got " + ints_str(x.shape()));
  c.that(w.ndim() == 6, "w", "expected [OC/bo, C/bi, KH, KW, bi, bo], got " + ints_str(w.shape()));
  const int64_t n = x.shape()[0], c0 = x.shape()[1], bi = x.shape()[4];
  const int64_t o0 = w.shape()[0], bo = w.shape()[5];
  const bool depthwise = p.groups != 1;
  if (depthwise) {
    c.that(p.groups == c0 * bi && bi == bo && o0 == c0 && w.shape()[1] == 1 && w.shape()[4] == 1, "groups",
           "groups must be 1 or the channels (" + std::to_string(c0 * bi) + ", weight [C/b, 1, KH, KW, 1, b]), got " +
               std::to_string(p.groups) + " with weight " + ints_str(w.shape()));
  } else {
    c.that(w.shape()[1] == c0 && w.shape()[4] == bi, "w",
           "weight " + ints_str(w.shape()) + " does not match the input " + ints_str(x.shape()));
  }
  c.that(p.stride.size() == 2 && p.padding.size() == 2 && p.dilation.size() == 2, "stride",
         "stride, padding and dilation need two values");
  std::vector<int64_t> out_shape = {n, o0};
  for (int d = 0; d < 2; ++d) {
    c.that(p.stride[d] >= 1 && p.dilation[d] >= 1 && p.padding[d] >= 0, "stride",
           "stride and dilation must be positive and padding non-negative");
    int64_t eff = p.dilation[d] * (w.shape()[2 + d] - 1) + 1;
    int64_t o = (x.shape()[2 + d] + 2 * p.padding[d] - eff) / p.stride[d] + 1;
    c.that(x.shape()[2 + d] + 2 * p.padding[d] >= eff && o >= 1, "kernel",
           "kernel " + ints_str(w.shape()) + " does not fit the padded input " + ints_str(x.shape()));
    out_shape.push_back(o);
  }
  out_shape.push_back(bo);
  check_pad_value(c, x, p);
  Tensor xp = zero_pad(x, p.padding, p.padding, "conv2d_nchwc_pad", p.pad_value);
  auto at = [&](const std::vector<Var>& i, const Expr& ch0, const Expr& kh, const Expr& kw, const Expr& ch1) {
    return xp.read({i[0], ch0, i[2] * p.stride[0] + kh * p.dilation[0], i[3] * p.stride[1] + kw * p.dilation[1], ch1});
  };
  if (depthwise)
    return te::reduce(
        "conv2d_nchwc", out_shape, {w.shape()[2], w.shape()[3]}, te::ReduceKind::Sum,
        [&](const std::vector<Var>& i, const std::vector<Var>& r) {
          return widened(at(i, i[1], r[0], r[1], i[4])) * widened(w.read({i[1], Expr(0), r[0], r[1], Expr(0), i[4]}));
        },
        te::OpPattern::Anchor, "conv2d_nchwc");
  return te::reduce(
      "conv2d_nchwc", out_shape, {c0, w.shape()[2], w.shape()[3], bi}, te::ReduceKind::Sum,
      [&](const std::vector<Var>& i, const std::vector<Var>& r) {
        return widened(at(i, r[0], r[1], r[2], r[3])) * widened(w.read({i[1], r[0], r[1], r[2], r[3], i[4]}));
      },
      te::OpPattern::Anchor, "conv2d_nchwc");
}

NDArray pack_conv_weight_nchwc(const NDArray& w, int64_t groups, int64_t in_block, int64_t out_block) {
  Check c("conv2d_nchwc");
  c.that(w.shape().size() == 4, "w", "expected a weight [OC, C/groups, KH, KW]");
  const int64_t oc = w.shape()[0], cg = w.shape()[1], kh = w.shape()[2], kw = w.shape()[3];
  const bool depthwise = groups != 1;
  c.that(oc % out_block == 0, "block",
         std::to_string(oc) + " output channels are not a multiple of " + std::to_string(out_block));
  c.that(depthwise ? cg == 1 && groups == oc && in_block == out_block : cg % in_block == 0, "block",
         "weight " + ints_str(w.shape()) + " cannot be blocked by " + std::to_string(in_block) + " with groups " +
             std::to_string(groups));
  const int64_t bi = depthwise ? 1 : in_block, c0 = depthwise ? 1 : cg / in_block;
  NDArray out(w.dtype(), {oc / out_block, c0, kh, kw, bi, out_block});
  const size_t e = static_cast<size_t>(w.dtype().bytes());
  const char* src = static_cast<const char*>(w.data());
  char* dst = static_cast<char*>(out.data());
  for (int64_t o = 0; o < oc; ++o)
    for (int64_t ci = 0; ci < cg; ++ci)
      for (int64_t y = 0; y < kh; ++y)
        for (int64_t x = 0; x < kw; ++x) {
          int64_t to =
              ((((o / out_block * c0 + ci / bi) * kh + y) * kw + x) * bi + ci % bi) * out_block + o % out_block;
          std::memcpy(dst + static_cast<size_t>(to) * e,
                      src + static_cast<size_t>(((o * cg + ci) * kh + y) * kw + x) * e, e);
        }
  return out;
}

namespace {

OpDef conv2d_nchwc_def() {
  return {
      "conv2d_nchwc",
      "nn",
      "2-D convolution in the blocked layout: x [N, C/bi, H, W, bi], weight [OC/bo, C/bi, KH, KW, bi, bo] (depthwise: "
      "[C/b, 1, KH, KW, 1, b]) -> [N, OC/bo, OH, OW, bo]",
      {p_int("batch", 1, "N"), p_int("in_channels", 16, "C"), p_int("height", 9, "H"), p_int("width", 10, "W"),
       p_int("out_channels", 32, "OC"), p_ints("kernel", {3}, "KH,KW"), p_ints("stride", {1}, "stride"),
       p_ints("padding", {1}, "padding"), p_ints("dilation", {1}, "dilation"),
       p_int("groups", 1, "1, or the channels (depthwise)"), p_int("block", 16, "output channels per block (bo)"),
       p_int("in_block", 0, "input channels per block (bi; 0: the output's)")},
      [](const Attrs& a) {
        Check c("conv2d_nchwc");
        int64_t n = c.at_least(a, "batch", 1), ch = c.at_least(a, "in_channels", 1);
        int64_t oc = c.at_least(a, "out_channels", 1), g = c.at_least(a, "groups", 1);
        int64_t bo = c.at_least(a, "block", 1), bi = a.i("in_block") > 0 ? a.i("in_block") : bo;
        std::vector<int64_t> k = c.per_dim(a, "kernel", 2, 1);
        c.that(g == 1 || (g == ch && oc == ch), "groups", "must be 1 or the channels, got " + std::to_string(g));
        c.that(ch % bi == 0, "in_block", std::to_string(ch) + " channels are not a multiple of " + std::to_string(bi));
        c.that(oc % bo == 0, "block", std::to_string(oc) + " channels are not a multiple of " + std::to_string(bo));
        c.that(g == 1 || bi == bo, "in_block", "a depthwise convolution's blocks are equal");
        Tensor x = te::placeholder("x", {n, ch / bi, c.at_least(a, "height", 1), c.at_least(a, "width", 1), bi});
        std::vector<int64_t> ws = g == 1 ? std::vector<int64_t>{oc / bo, ch / bi, k[0], k[1], bi, bo}
                                         : std::vector<int64_t>{oc / bo, 1, k[0], k[1], 1, bo};
        Tensor w = te::placeholder("w", ws);
        ConvParams p{c.per_dim(a, "stride", 2, 1), c.per_dim(a, "padding", 2, 0), c.per_dim(a, "dilation", 2, 1), g};
        OpGraph gr;
        gr.inputs = {x, w};
        gr.outputs = {conv2d_nchwc(x, w, p)};
        gr.ranges = {{}, {}};
        gr.flops = 2.0 * gr.outputs[0].numel() * (g == 1 ? ch : 1) * k[0] * k[1];
        return gr;
      }};
}

OpDef layout_def(bool to) {
  std::string name = to ? "to_nchwc" : "from_nchwc";
  return {name,
          "transform",
          to ? "[N, C, H, W] -> [N, C/b, H, W, b]" : "[N, C/b, H, W, b] -> [N, C, H, W]",
          {p_int("batch", 1, "N"), p_int("channels", 32, "C"), p_int("height", 7, "H"), p_int("width", 7, "W"),
           p_int("block", 16, "channels per block")},
          [name, to](const Attrs& a) {
            Check c(name);
            int64_t n = c.at_least(a, "batch", 1), ch = c.at_least(a, "channels", 1), b = c.at_least(a, "block", 1);
            int64_t h = c.at_least(a, "height", 1), w = c.at_least(a, "width", 1);
            c.that(ch % b == 0, "block", std::to_string(ch) + " channels are not a multiple of " + std::to_string(b));
            Tensor x =
                te::placeholder("x", to ? std::vector<int64_t>{n, ch, h, w} : std::vector<int64_t>{n, ch / b, h, w, b});
            OpGraph g;
            g.inputs = {x};
            g.outputs = {to ? to_nchwc(x, b) : from_nchwc(x)};
            g.ranges = {{}};
            return g;
          }};
}

}  // namespace

void register_blocked_ops(std::vector<OpDef>& r) {
  r.push_back(conv2d_nchwc_def());
  r.push_back(layout_def(true));
  r.push_back(layout_def(false));
}

}  // namespace basin::ops
