// conv1d, conv2d, conv3d (stride, padding, dilation, groups; depthwise as groups ==
// channels), depthwise_conv2d, conv2d_transpose.
#include "core/ops/op_util.h"
#include "core/ops/operators.h"

namespace basin::ops {

// The input padded with zeros, lo[d] before and hi[d] after spatial dimension d (the
// dimensions from 2 on; any after them, a blocked layout's channels, are carried): an
// injective stage that sketches will inline.
Tensor zero_pad(const Tensor& x, const std::vector<int64_t>& lo, const std::vector<int64_t>& hi,
                const std::string& name, int64_t value) {
  bool any = false;
  for (size_t d = 0; d < lo.size(); ++d) any |= lo[d] > 0 || hi[d] > 0;
  if (!any) return x;
  size_t rank = lo.size();
  std::vector<int64_t> shape = x.shape();
  for (size_t d = 0; d < rank; ++d) shape[2 + d] += lo[d] + hi[d];
  return te::compute(
      name, shape,
      [&](const std::vector<Var>& i) {
        Expr inside = bool_imm(true);
        std::vector<Expr> src = {i[0], i[1]};
        for (size_t d = 0; d < rank; ++d) {
          Expr s = i[2 + d] - lo[d];
          if (lo[d] > 0) inside = logical_and(inside, ge(s, Expr(0)));
          if (hi[d] > 0) inside = logical_and(inside, lt(s, Expr(x.shape()[2 + d])));
          src.push_back(s);
        }
        for (size_t d = 2 + rank; d < i.size(); ++d) src.push_back(i[d]);
        return select(inside, x.read(src), make_const(x.dtype(), value));
      },
      te::OpPattern::Injective, "pad");
}

void check_pad_value(Check& c, const Tensor& x, const ConvParams& p) {
  if (p.pad_value == 0) return;
  const DType t = x.dtype();
  const int64_t lo = t == DType::u8() ? 0 : t == DType::i8() ? -128 : int64_t{-2147483647} - 1;
  const int64_t hi = t == DType::u8() ? 255 : t == DType::i8() ? 127 : int64_t{2147483647};
  c.that(t.is_int() || t.is_uint(), "pad_value", "a padding value other than 0 needs integer inputs, got " + t.str());
  c.that(p.pad_value >= lo && p.pad_value <= hi, "pad_value",
         std::to_string(p.pad_value) + " is not a value of the input's type " + t.str());
}

namespace {

Tensor pad_both(const Tensor& x, const std::vector<int64_t>& pad, const std::string& name, int64_t value) {
  return zero_pad(x, pad, pad, name, value);
}

}  // namespace

Tensor conv(const Tensor& x, const Tensor& w, const ConvParams& p, const std::string& op) {
  Check c(op);
  int rank = x.ndim() - 2;
  c.that(rank >= 1 && rank <= 3, "x", "expected 3 to 5 dimensions [N, C, spatial...], got " + ints_str(x.shape()));
  c.that(w.ndim() == rank + 2, "w", "weight rank must match the input's: " + ints_str(w.shape()));
  c.that(p.groups >= 1, "groups", "must be at least 1, got " + std::to_string(p.groups));
  int64_t n = x.shape()[0], ch = x.shape()[1], oc = w.shape()[0], g = p.groups;
  c.that(ch % g == 0, "groups",
         std::to_string(ch) + " input channels are not divisible into " + std::to_string(g) + " groups");
  c.that(oc % g == 0, "groups",
         std::to_string(oc) + " output channels are not divisible into " + std::to_string(g) + " groups");
  c.that(w.shape()[1] == ch / g, "w",
         "expected " + std::to_string(ch / g) + " input channels per group in " + ints_str(w.shape()));
  c.that(p.stride.size() == size_t(rank) && p.padding.size() == size_t(rank) && p.dilation.size() == size_t(rank),
         "stride", "stride, padding and dilation need one value per spatial dimension");
  std::vector<int64_t> out_shape = {n, oc};
  for (int d = 0; d < rank; ++d) {
    c.that(p.stride[d] >= 1, "stride", "must be positive, got " + ints_str(p.stride));
    c.that(p.dilation[d] >= 1, "dilation", "must be positive, got " + ints_str(p.dilation));
    c.that(p.padding[d] >= 0, "padding", "must be non-negative, got " + ints_str(p.padding));
    int64_t eff = p.dilation[d] * (w.shape()[2 + d] - 1) + 1;
    int64_t o = (x.shape()[2 + d] + 2 * p.padding[d] - eff) / p.stride[d] + 1;
    c.that(x.shape()[2 + d] + 2 * p.padding[d] >= eff && o >= 1, "kernel",
           "kernel " + ints_str(w.shape()) + " does not fit the padded input " + ints_str(x.shape()));
    out_shape.push_back(o);
  }
  check_pad_value(c, x, p);
  Tensor xp = pad_both(x, p.padding, op + "_pad", p.pad_value);
  std::vector<int64_t> rext = {ch / g};
  for (int d = 0; d < rank; ++d) rext.push_back(w.shape()[2 + d]);
  int64_t oc_per_group = oc / g, ic_per_group = ch / g;
  return te::reduce(
      op, out_shape, rext, te::ReduceKind::Sum,
      [&](const std::vector<Var>& i, const std::vector<Var>& r) {
        Expr ic = g == 1 ? Expr(r[0]) : floordiv(i[1], Expr(oc_per_group)) * ic_per_group + r[0];
        std::vector<Expr> xi = {i[0], ic}, wi = {i[1], r[0]};
        for (int d = 0; d < rank; ++d) {
          xi.push_back(i[2 + d] * p.stride[d] + r[1 + d] * p.dilation[d]);
          wi.push_back(r[1 + d]);
        }
        return widened(xp.read(xi)) * widened(w.read(wi));
      },
      te::OpPattern::Anchor, op);
}

ConvTransposeParams conv_transpose_params(const Attrs& a) {
  Check c("conv2d_transpose");
  ConvTransposeParams p{c.per_dim(a, "stride", 2, 1), c.per_dim(a, "padding", 2, 0),
                        c.per_dim(a, "output_padding", 2, 0), c.per_dim(a, "dilation", 2, 1),
                        c.at_least(a, "groups", 1)};
  const int64_t phases = a.i("width_phases");
  c.that(phases == 0 || phases == 1, "width_phases", "must be 0 or 1, got " + std::to_string(phases));
  p.width_phases = phases == 1;
  return p;
}

Tensor conv2d_transpose(const Tensor& x, const Tensor& w, const ConvTransposeParams& p) {
  Check c("conv2d_transpose");
  c.that(x.ndim() == 4, "x", "expected [N, C, H, W], got " + ints_str(x.shape()));
  c.that(w.ndim() == 4, "w", "expected [IC, OC/groups, KH, KW], got " + ints_str(w.shape()));
  int64_t g = p.groups;
  c.that(g >= 1, "groups", "must be at least 1, got " + std::to_string(g));
  int64_t n = x.shape()[0], ic = x.shape()[1], ocg = w.shape()[1], oc = ocg * g;
  c.that(ic % g == 0, "groups",
         std::to_string(ic) + " input channels are not divisible into " + std::to_string(g) + " groups");
  c.that(w.shape()[0] == ic, "w",
         "weight " + ints_str(w.shape()) + " must have " + std::to_string(ic) + " input channels");
  std::vector<int64_t> out_shape = {n, oc};
  for (int d = 0; d < 2; ++d) {
    c.that(p.stride[d] >= 1, "stride", "must be positive, got " + ints_str(p.stride));
    c.that(p.dilation[d] >= 1, "dilation", "must be positive, got " + ints_str(p.dilation));
    c.that(p.padding[d] >= 0, "padding", "must be non-negative, got " + ints_str(p.padding));
    c.that(p.output_padding[d] >= 0 && p.output_padding[d] < std::max(p.stride[d], p.dilation[d]), "output_padding",
           "must be smaller than stride or dilation, got " + ints_str(p.output_padding));
    int64_t o = (x.shape()[2 + d] - 1) * p.stride[d] - 2 * p.padding[d] + p.dilation[d] * (w.shape()[2 + d] - 1) +
                p.output_padding[d] + 1;
    c.that(o >= 1, "padding", "leaves no output for input " + ints_str(x.shape()));
    out_shape.push_back(o);
  }
  const int64_t sw = p.stride[1];
  if (p.width_phases) {
    c.that(p.dilation[0] == 1 && p.dilation[1] == 1, "width_phases", "needs dilation 1, got " + ints_str(p.dilation));
    c.that(sw >= 2 && out_shape[3] % sw == 0, "width_phases",
           "needs a width stride of at least 2 that divides the output width " + std::to_string(out_shape[3]) +
               ", got " + ints_str(p.stride));
  }
  const std::vector<int64_t> full = out_shape;  // [N, OC, OH, OW]
  if (p.width_phases) out_shape = {full[0], full[1], full[2], sw, full[3] / sw};
  int64_t icg = ic / g;
  int64_t h = x.shape()[2], wd = x.shape()[3];
  Expr zero = make_const(x.dtype(), 0);
  auto chan = [&](const Var& o, const Var& rc) -> Expr {
    return g == 1 ? Expr(rc) : floordiv(o, Expr(ocg)) * icg + rc;
  };
  auto out_chan = [&](const Var& o) -> Expr { return g == 1 ? Expr(o) : floormod(o, Expr(ocg)); };
  if (p.dilation[0] == 1 && p.dilation[1] == 1) {
    // Stride-phase decomposition: output row y = s*q + phase takes its taps kh from the
    // phase's residue class, kh = (y + pad) % s + s*a, at input row (y + pad) / s - a.
    // The reduction runs over ceil(K/s) taps per dimension, never over the stride's
    // zeros; the input is zero-padded so that every row read exists.
    std::vector<int64_t> taps(2), lo(2), hi(2), k = {w.shape()[2], w.shape()[3]};
    for (int d = 0; d < 2; ++d) {
      int64_t s = p.stride[d], pad = p.padding[d];
      taps[d] = (k[d] + s - 1) / s;
      lo[d] = std::max<int64_t>(0, taps[d] - 1 - pad / s);
      hi[d] = std::max<int64_t>(0, (full[2 + d] - 1 + pad) / s - (x.shape()[2 + d] - 1));
    }
    bool ragged = k[0] % p.stride[0] != 0 || k[1] % p.stride[1] != 0;
    Tensor xp = zero_pad(x, lo, hi, "conv2d_transpose_pad");
    return te::reduce(
        "conv2d_transpose", out_shape, {icg, taps[0], taps[1]}, te::ReduceKind::Sum,
        [&](const std::vector<Var>& i, const std::vector<Var>& r) {
          std::vector<Expr> at(2), tap(2);
          for (int d = 0; d < 2; ++d) {
            Expr t = i[2 + d] + p.padding[d];
            at[d] = floordiv(t, Expr(p.stride[d])) - r[1 + d] + lo[d];
            tap[d] = floormod(t, Expr(p.stride[d])) + r[1 + d] * p.stride[d];
          }
          if (p.width_phases) {  // column S*q + phase: (S*q + phase + pad) / S = q + (phase + pad) / S
            Expr t = i[3] + p.padding[1];
            at[1] = Expr(i[4]) + floordiv(t, Expr(sw)) - r[2] + lo[1];
            tap[1] = floormod(t, Expr(sw)) + r[2] * sw;
          }
          Expr c = chan(i[1], r[0]);
          Expr v = xp(i[0], c, at[0], at[1]) * w(c, out_chan(i[1]), tap[0], tap[1]);
          if (!ragged) return v;
          return select(logical_and(lt(tap[0], Expr(k[0])), lt(tap[1], Expr(k[1]))), v, zero);
        },
        te::OpPattern::Anchor, "conv2d_transpose");
  }
  // Dilated: out[n, o, y, x] = sum over (c, kh, kw) of in[n, c, iy, ix] * w[c, o % OCg,
  // kh, kw] where y + pad - kh*dil = iy*stride: a guarded gather over every tap.
  return te::reduce(
      "conv2d_transpose", out_shape, {icg, w.shape()[2], w.shape()[3]}, te::ReduceKind::Sum,
      [&](const std::vector<Var>& i, const std::vector<Var>& r) {
        Expr ty = i[2] + p.padding[0] - r[1] * p.dilation[0];
        Expr tx = i[3] + p.padding[1] - r[2] * p.dilation[1];
        Expr iy = floordiv(ty, Expr(p.stride[0])), ix = floordiv(tx, Expr(p.stride[1]));
        Expr ok = logical_and(ge(ty, Expr(0)), ge(tx, Expr(0)));
        ok = logical_and(ok, logical_and(eq(floormod(ty, Expr(p.stride[0])), Expr(0)),
                                         eq(floormod(tx, Expr(p.stride[1])), Expr(0))));
        ok = logical_and(ok, logical_and(lt(iy, Expr(h)), lt(ix, Expr(wd))));
        Expr c = chan(i[1], r[0]);
        return select(ok, x(i[0], c, iy, ix) * w(c, out_chan(i[1]), r[1], r[2]), zero);
      },
      te::OpPattern::Anchor, "conv2d_transpose");
}

namespace {

const char* kSpatialNames[3][3] = {{"width", "", ""}, {"height", "width", ""}, {"depth", "height", "width"}};

OpDef conv_def(int rank) {
  std::string name = "conv" + std::to_string(rank) + "d";
  std::vector<ParamSpec> params = {p_int("batch", 1, "N"), p_int("in_channels", 8, "C")};
  std::vector<int64_t> defaults = {9, 10, 11};
  for (int d = 0; d < rank; ++d)
    params.push_back(p_int(kSpatialNames[rank - 1][d], defaults[d + 3 - rank], "input extent"));
  params.push_back(p_int("out_channels", 16, "OC"));
  params.push_back(p_ints("kernel", {3}, "kernel extent per spatial dimension (one value for all)"));
  params.push_back(p_ints("stride", {1}, "stride per spatial dimension"));
  params.push_back(p_ints("padding", {1}, "zero padding on both sides per spatial dimension"));
  params.push_back(p_ints("dilation", {1}, "kernel dilation per spatial dimension"));
  params.push_back(p_int("groups", 1, "channel groups (groups == in_channels: depthwise)"));
  return {name, "nn",
          std::to_string(rank) + "-D convolution, NC" +
              (rank == 1   ? "W"
               : rank == 2 ? "HW"
                           : "DHW") +
              " layout, weight [OC, C/groups, K...]",
          params, [name, rank](const Attrs& a) {
            Check c(name);
            int64_t n = c.at_least(a, "batch", 1), ch = c.at_least(a, "in_channels", 1);
            int64_t oc = c.at_least(a, "out_channels", 1), g = c.at_least(a, "groups", 1);
            std::vector<int64_t> xs = {n, ch}, ws = {oc, 0};
            std::vector<int64_t> k = c.per_dim(a, "kernel", rank, 1);
            for (int d = 0; d < rank; ++d) xs.push_back(c.at_least(a, kSpatialNames[rank - 1][d], 1));
            c.that(ch % g == 0, "groups",
                   std::to_string(ch) + " input channels are not divisible into " + std::to_string(g) + " groups");
            ws[1] = ch / g;
            ws.insert(ws.end(), k.begin(), k.end());
            ConvParams p{c.per_dim(a, "stride", rank, 1), c.per_dim(a, "padding", rank, 0),
                         c.per_dim(a, "dilation", rank, 1), g};
            Tensor x = te::placeholder("x", xs), w = te::placeholder("w", ws);
            OpGraph gr;
            gr.inputs = {x, w};
            gr.outputs = {conv(x, w, p, name)};
            gr.ranges = {{}, {}};
            gr.flops = 2.0 * gr.outputs[0].numel() * product(ws) / oc;
            return gr;
          }};
}

}  // namespace

void register_conv_ops(std::vector<OpDef>& r) {
  r.push_back(conv_def(1));
  r.push_back(conv_def(2));
  r.push_back(conv_def(3));
  r.push_back(
      {"depthwise_conv2d",
       "nn",
       "depthwise 2-D convolution (conv2d with groups == channels), weight [C*multiplier, 1, KH, KW]",
       {p_int("batch", 1, "N"), p_int("channels", 8, "C"), p_int("height", 10, "H"), p_int("width", 10, "W"),
        p_int("multiplier", 1, "output channels per input channel"), p_ints("kernel", {3}, "KH,KW"),
        p_ints("stride", {1}, "stride"), p_ints("padding", {1}, "padding"), p_ints("dilation", {1}, "dilation")},
       [](const Attrs& a) {
         Check c("depthwise_conv2d");
         int64_t n = c.at_least(a, "batch", 1), ch = c.at_least(a, "channels", 1);
         int64_t h = c.at_least(a, "height", 1), w = c.at_least(a, "width", 1), m = c.at_least(a, "multiplier", 1);
         std::vector<int64_t> k = c.per_dim(a, "kernel", 2, 1);
         Tensor x = te::placeholder("x", {n, ch, h, w}), wt = te::placeholder("w", {ch * m, 1, k[0], k[1]});
         ConvParams p{c.per_dim(a, "stride", 2, 1), c.per_dim(a, "padding", 2, 0), c.per_dim(a, "dilation", 2, 1), ch};
         OpGraph g;
         g.inputs = {x, wt};
         g.outputs = {conv(x, wt, p, "depthwise_conv2d")};
         g.ranges = {{}, {}};
         g.flops = 2.0 * g.outputs[0].numel() * k[0] * k[1];
         return g;
       }});
  r.push_back({"conv2d_transpose",
               "nn",
               "transposed 2-D convolution, weight [IC, OC/groups, KH, KW]",
               {p_int("batch", 1, "N"), p_int("in_channels", 8, "IC"), p_int("height", 7, "H"), p_int("width", 6, "W"),
                p_int("out_channels", 6, "OC"), p_ints("kernel", {3}, "KH,KW"), p_ints("stride", {2}, "stride"),
                p_ints("padding", {1}, "padding"), p_ints("output_padding", {1}, "extra rows/columns on one side"),
                p_ints("dilation", {1}, "dilation"), p_int("groups", 1, "channel groups"),
                p_int("width_phases", 0, "1: output [N, OC, OH, S, OW/S], the width's stride phases major")},
               [](const Attrs& a) {
                 Check c("conv2d_transpose");
                 int64_t n = c.at_least(a, "batch", 1), ic = c.at_least(a, "in_channels", 1);
                 int64_t h = c.at_least(a, "height", 1), w = c.at_least(a, "width", 1);
                 int64_t oc = c.at_least(a, "out_channels", 1), g = c.at_least(a, "groups", 1);
                 c.that(
                     oc % g == 0, "groups",
                     std::to_string(oc) + " output channels are not divisible into " + std::to_string(g) + " groups");
                 std::vector<int64_t> k = c.per_dim(a, "kernel", 2, 1);
                 Tensor x = te::placeholder("x", {n, ic, h, w}), wt = te::placeholder("w", {ic, oc / g, k[0], k[1]});
                 const ConvTransposeParams p = conv_transpose_params(a);
                 OpGraph gr;
                 gr.inputs = {x, wt};
                 gr.outputs = {conv2d_transpose(x, wt, p)};
                 gr.ranges = {{}, {}};
                 gr.flops = 2.0 * n * ic * h * w * (oc / g) * k[0] * k[1];
                 return gr;
               }});
}

}  // namespace basin::ops
