// Data movement: reshape, transpose, flatten, concat, split, slice, pad, gather,
// gather_elements, gather_nd, embedding, broadcast_to, squeeze, unsqueeze, and ONNX's
// resize (nearest, linear, cubic).
#include <algorithm>
#include <climits>
#include <cmath>
#include <functional>
#include <utility>

#include "core/util/checked.h"
#include "core/ops/op_util.h"
#include "core/ops/operators.h"

namespace basin::ops {

namespace {

std::vector<int64_t> strides_of(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (int d = static_cast<int>(shape.size()) - 2; d >= 0; --d) s[d] = s[d + 1] * shape[d + 1];
  return s;
}

Tensor injective(const std::string& name, const std::vector<int64_t>& shape,
                 const std::function<Expr(const std::vector<Var>&)>& f) {
  return te::compute(name, shape, f, te::OpPattern::Injective, name);
}

}  // namespace

Tensor reshape(const Tensor& x, std::vector<int64_t> shape, const std::string& op) {
  Check c(op);
  int infer = -1;
  int64_t known = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == -1) {
      c.that(infer < 0, "new_shape", "at most one extent may be -1 in " + ints_str(shape));
      infer = static_cast<int>(d);
    } else {
      c.that(shape[d] > 0, "new_shape", "extents must be positive or -1, got " + ints_str(shape));
      known = checked_product({known, shape[d]});
    }
  }
  if (infer >= 0) {
    c.that(known > 0 && x.numel() % known == 0, "new_shape",
           "cannot infer -1 in " + ints_str(shape) + " from " + ints_str(x.shape()));
    shape[infer] = x.numel() / known;
  }
  c.that(product(shape) == x.numel(), "new_shape",
         ints_str(shape) + " has " + std::to_string(product(shape)) + " elements, the input " + ints_str(x.shape()) +
             " has " + std::to_string(x.numel()));
  std::vector<int64_t> os = strides_of(shape), is = strides_of(x.shape());
  return injective(op, shape, [&](const std::vector<Var>& i) {
    Expr flat = Expr(0);
    for (size_t d = 0; d < i.size(); ++d) flat = flat + i[d] * os[d];
    std::vector<Expr> src;
    for (size_t d = 0; d < x.shape().size(); ++d)
      src.push_back(floormod(floordiv(flat, Expr(is[d])), Expr(x.shape()[d])));
    return x.read(src);
  });
}

Tensor transpose(const Tensor& x, std::vector<int64_t> perm) {
  Check c("transpose");
  int r = x.ndim();
  if (perm.empty())
    for (int d = r - 1; d >= 0; --d) perm.push_back(d);
  std::vector<int64_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  bool ok = static_cast<int>(perm.size()) == r;
  for (int d = 0; ok && d < r; ++d) ok = sorted[d] == d;
  c.that(ok, "perm", ints_str(perm) + " is not a permutation of the " + std::to_string(r) + " axes");
  std::vector<int64_t> shape;
  for (int64_t p : perm) shape.push_back(x.shape()[p]);
  return injective("transpose", shape, [&](const std::vector<Var>& i) {
    std::vector<Expr> src(r);
    for (int d = 0; d < r; ++d) src[perm[d]] = i[d];
    return x.read(src);
  });
}

Tensor flatten(const Tensor& x, int64_t start_attr, int64_t end_attr) {
  Check c("flatten");
  int r = x.ndim();
  int start = c.axis(start_attr, r, "start_dim"), end = c.axis(end_attr, r, "end_dim");
  c.that(start <= end, "end_dim",
         "end_dim " + std::to_string(end_attr) + " comes before start_dim " + std::to_string(start_attr));
  std::vector<int64_t> shape(x.shape().begin(), x.shape().begin() + start);
  shape.push_back(product(std::vector<int64_t>(x.shape().begin() + start, x.shape().begin() + end + 1)));
  shape.insert(shape.end(), x.shape().begin() + end + 1, x.shape().end());
  return reshape(x, shape, "flatten");
}

Tensor concat(const std::vector<Tensor>& xs, int64_t axis_attr) {
  Check c("concat");
  c.that(!xs.empty(), "sizes", "needs at least one input");
  int r = xs[0].ndim();
  int axis = c.axis(axis_attr, r, "axis");
  std::vector<int64_t> shape = xs[0].shape();
  std::vector<int64_t> offsets = {0};
  for (size_t k = 0; k < xs.size(); ++k) {
    const auto& s = xs[k].shape();
    bool ok = static_cast<int>(s.size()) == r;
    for (int d = 0; ok && d < r; ++d) ok = d == axis || s[d] == shape[d];
    c.that(ok, "shape",
           "input " + std::to_string(k) + " " + ints_str(s) + " does not match " + ints_str(shape) + " off the axis");
    offsets.push_back(offsets.back() + s[axis]);
  }
  shape[axis] = offsets.back();
  return injective("concat", shape, [&](const std::vector<Var>& i) {
    Expr v;
    for (int k = static_cast<int>(xs.size()) - 1; k >= 0; --k) {
      std::vector<Expr> idx = as_exprs(i);
      idx[axis] = i[axis] - offsets[k];
      Expr read = xs[k].read(idx);
      v = v.defined() ? select(lt(i[axis], Expr(offsets[k + 1])), read, v) : read;
    }
    return v;
  });
}

std::vector<Tensor> split(const Tensor& x, int64_t axis_attr, const std::vector<int64_t>& sizes) {
  Check c("split");
  int axis = c.axis(axis_attr, x.ndim(), "axis");
  c.that(!sizes.empty(), "sizes", "needs at least one part");
  int64_t total = 0;
  for (int64_t s : sizes) {
    c.that(s > 0, "sizes", "parts must be positive, got " + ints_str(sizes));
    total += s;
  }
  c.that(total == x.shape()[axis], "sizes",
         ints_str(sizes) + " sums to " + std::to_string(total) + ", the axis has " + std::to_string(x.shape()[axis]));
  std::vector<Tensor> outs;
  int64_t off = 0;
  for (size_t k = 0; k < sizes.size(); ++k) {
    std::vector<int64_t> shape = x.shape();
    shape[axis] = sizes[k];
    outs.push_back(injective("split" + std::to_string(k), shape, [&](const std::vector<Var>& i) {
      std::vector<Expr> idx = as_exprs(i);
      idx[axis] = i[axis] + off;
      return x.read(idx);
    }));
    off += sizes[k];
  }
  return outs;
}

SliceRange slice_range(int64_t start, int64_t end, int64_t step, int64_t n) {
  // Clamped to [-n - 1, n] first (ONNX's rule gives the same slice), so that INT64_MIN
  // and INT64_MAX ends do not overflow.
  int64_t s = std::clamp<int64_t>(start, -n - 1, n), e = std::clamp<int64_t>(end, -n - 1, n);
  if (s < 0) s += n;
  if (e < 0) e += n;
  SliceRange r;
  if (step > 0) {
    s = std::clamp<int64_t>(s, 0, n);
    e = std::clamp<int64_t>(e, 0, n);
    r.count = e > s ? 1 + (e - s - 1) / step : 0;
  } else {
    s = std::clamp<int64_t>(s, 0, n - 1);
    e = std::clamp<int64_t>(e, -1, n - 1);
    r.count = s > e ? 1 + (s - e - 1) / -step : 0;
  }
  r.first = s;
  return r;
}

SliceBounds slice_bounds(const std::vector<int64_t>& shape, const std::vector<int64_t>& starts,
                         const std::vector<int64_t>& ends, const std::vector<int64_t>& axes_attr,
                         const std::vector<int64_t>& steps_attr) {
  Check c("slice");
  const int r = static_cast<int>(shape.size());
  c.that(starts.size() == ends.size(), "ends", "starts and ends differ in length");
  std::vector<int64_t> axes = axes_attr;
  if (axes.empty())
    for (size_t k = 0; k < starts.size(); ++k) axes.push_back(static_cast<int64_t>(k));
  c.that(axes.size() == starts.size(), "axes", "needs one axis per start, got " + ints_str(axes));
  std::vector<int64_t> steps = steps_attr.empty() ? std::vector<int64_t>(starts.size(), 1) : steps_attr;
  c.that(steps.size() == starts.size(), "steps", "needs one step per start, got " + ints_str(steps));
  c.axes(axes, r, "axes");
  SliceBounds b{std::vector<int64_t>(r, 0), std::vector<int64_t>(r, 1), shape};
  for (size_t k = 0; k < axes.size(); ++k) {
    int a = c.axis(axes[k], r, "axes");
    c.that(steps[k] != 0, "steps", "steps must be nonzero, got " + ints_str(steps));
    const SliceRange sr = slice_range(starts[k], ends[k], steps[k], shape[a]);
    b.shape[a] = sr.count;
    b.begin[a] = sr.first;
    b.step[a] = steps[k];
  }
  return b;
}

Tensor slice(const Tensor& x, const std::vector<int64_t>& starts, const std::vector<int64_t>& ends,
             const std::vector<int64_t>& axes, const std::vector<int64_t>& steps) {
  const SliceBounds b = slice_bounds(x.shape(), starts, ends, axes, steps);
  return injective("slice", b.shape, [&](const std::vector<Var>& i) {
    std::vector<Expr> idx;
    for (size_t d = 0; d < b.shape.size(); ++d) idx.push_back(i[d] * b.step[d] + b.begin[d]);
    return x.read(idx);
  });
}

Tensor pad(const Tensor& x, const std::vector<int64_t>& pads, double value, const std::string& mode) {
  Check c("pad");
  int r = x.ndim();
  c.that(static_cast<int>(pads.size()) == 2 * r, "pads",
         "needs " + std::to_string(2 * r) + " values (all begins, then all ends), got " + ints_str(pads));
  c.that(mode == "constant" || mode == "edge" || mode == "reflect", "mode",
         "'" + mode + "' is not one of constant, edge, reflect");
  std::vector<int64_t> shape = x.shape();
  for (int d = 0; d < r; ++d) {
    c.that(pads[d] >= 0 && pads[r + d] >= 0, "pads", "must be non-negative, got " + ints_str(pads));
    if (mode == "reflect")
      c.that(pads[d] < shape[d] && pads[r + d] < shape[d], "pads", "reflect padding must be smaller than the extent");
    int64_t padded = 0;  // extent + both pads, checked: a pad near 2^62 must not wrap
    c.that(!__builtin_add_overflow(shape[d], pads[d], &padded) && !__builtin_add_overflow(padded, pads[r + d], &padded),
           "pads", "give an extent too large to exist: " + ints_str(pads));
    shape[d] = padded;
  }
  return injective("pad", shape, [&](const std::vector<Var>& i) {
    std::vector<Expr> src;
    Expr inside = bool_imm(true);
    for (int d = 0; d < r; ++d) {
      int64_t n = x.shape()[d];
      Expr s = i[d] - pads[d];
      if (mode == "edge") s = min(max(s, Expr(0)), Expr(n - 1));
      else if (mode == "reflect")
        s = select(lt(s, Expr(0)), Expr(0) - s, select(ge(s, Expr(n)), Expr(2 * (n - 1)) - s, s));
      else if (pads[d] > 0 || pads[r + d] > 0)
        inside = logical_and(inside, logical_and(ge(s, Expr(0)), lt(s, Expr(n))));
      src.push_back(s);
    }
    if (mode != "constant") return x.read(src);
    return select(inside, x.read(src), make_const(x.dtype(), value));
  });
}

Tensor gather(const Tensor& x, const Tensor& indices, int64_t axis_attr, const std::string& op) {
  Check c(op);
  c.that(indices.dtype().is_int(), "indices", "must be an integer tensor, got " + indices.dtype().str());
  int axis = c.axis(axis_attr, x.ndim(), "axis");
  std::vector<int64_t> shape(x.shape().begin(), x.shape().begin() + axis);
  shape.insert(shape.end(), indices.shape().begin(), indices.shape().end());
  shape.insert(shape.end(), x.shape().begin() + axis + 1, x.shape().end());
  int ni = indices.ndim();
  int64_t n = x.shape()[axis];
  return injective(op, shape, [&](const std::vector<Var>& i) {
    std::vector<Expr> ii(i.begin() + axis, i.begin() + axis + ni);
    Expr k = cast(DType::index(), indices.read(ii));
    k = select(lt(k, Expr(0)), k + n, k);   // negative indices count from the end
    k = min(max(k, Expr(0)), Expr(n - 1));  // out-of-range indices clamp (never a read outside x)
    std::vector<Expr> src(i.begin(), i.begin() + axis);
    src.push_back(k);
    src.insert(src.end(), i.begin() + axis + ni, i.end());
    return x.read(src);
  });
}

Tensor gather_elements(const Tensor& x, const Tensor& indices, int64_t axis_attr) {
  Check c("gather_elements");
  c.that(indices.dtype().is_int(), "indices", "must be an integer tensor, got " + indices.dtype().str());
  c.that(indices.ndim() == x.ndim(), "indices",
         "rank " + std::to_string(indices.ndim()) + " differs from x's " + std::to_string(x.ndim()));
  int axis = c.axis(axis_attr, x.ndim(), "axis");
  for (int d = 0; d < x.ndim(); ++d)
    c.that(d == axis || indices.shape()[d] <= x.shape()[d], "indices",
           "shape " + ints_str(indices.shape()) + " exceeds x's " + ints_str(x.shape()) + " off the axis");
  const int64_t n = x.shape()[axis];
  return injective("gather_elements", indices.shape(), [&](const std::vector<Var>& i) {
    Expr k = cast(DType::index(), indices.read(as_exprs(i)));
    k = select(lt(k, Expr(0)), k + n, k);
    k = min(max(k, Expr(0)), Expr(n - 1));
    std::vector<Expr> src = as_exprs(i);
    src[axis] = k;
    return x.read(src);
  });
}

Tensor gather_nd(const Tensor& x, const Tensor& indices, int64_t batch_dims) {
  Check c("gather_nd");
  c.that(indices.dtype().is_int(), "indices", "must be an integer tensor, got " + indices.dtype().str());
  const int r = x.ndim(), q = indices.ndim();
  c.that(batch_dims >= 0 && batch_dims < std::min(r, q), "batch_dims",
         "must be in [0, " + std::to_string(std::min(r, q)) + "), got " + std::to_string(batch_dims));
  const int b = static_cast<int>(batch_dims);
  const int64_t k = indices.shape().back();
  c.that(k >= 1 && k <= r - b, "indices",
         "the last extent " + std::to_string(k) + " must be in [1, " + std::to_string(r - b) + "]");
  for (int d = 0; d < b; ++d)
    c.that(x.shape()[d] == indices.shape()[d], "indices",
           "batch extents differ: " + ints_str(x.shape()) + " and " + ints_str(indices.shape()));
  std::vector<int64_t> shape(indices.shape().begin(), indices.shape().end() - 1);
  shape.insert(shape.end(), x.shape().begin() + b + k, x.shape().end());
  return injective("gather_nd", shape, [&](const std::vector<Var>& i) {
    std::vector<Expr> src(i.begin(), i.begin() + b);
    std::vector<Expr> at(i.begin(), i.begin() + (q - 1));
    for (int64_t j = 0; j < k; ++j) {
      std::vector<Expr> ii = at;
      ii.push_back(Expr(j));
      const int64_t n = x.shape()[b + j];
      Expr v = cast(DType::index(), indices.read(ii));
      v = select(lt(v, Expr(0)), v + n, v);
      src.push_back(min(max(v, Expr(0)), Expr(n - 1)));  // out-of-range indices clamp
    }
    src.insert(src.end(), i.begin() + (q - 1), i.end());
    return x.read(src);
  });
}

Tensor broadcast_to(const Tensor& x, const std::vector<int64_t>& shape) {
  Check c("broadcast_to");
  for (int64_t d : shape) c.that(d > 0, "new_shape", "extents must be positive, got " + ints_str(shape));
  c.that(shape.size() >= x.shape().size() && broadcast_shapes(c, x.shape(), shape) == shape, "new_shape",
         ints_str(x.shape()) + " does not broadcast to " + ints_str(shape));
  return te::compute(
      "broadcast_to", shape, [&](const std::vector<Var>& i) { return x.read(broadcast_index(x.shape(), shape, i)); },
      te::OpPattern::Broadcast, "broadcast_to");
}

Tensor squeeze(const Tensor& x, const std::vector<int64_t>& axes_attr) {
  Check c("squeeze");
  std::vector<int> axes = c.axes(axes_attr, x.ndim(), "axes");
  std::vector<bool> drop(x.ndim(), axes.empty());
  for (int a : axes) {
    c.that(x.shape()[a] == 1, "axes",
           "axis " + std::to_string(a) + " of " + ints_str(x.shape()) + " is not of extent 1");
    drop[a] = true;
  }
  std::vector<int64_t> shape;
  for (int d = 0; d < x.ndim(); ++d)
    if (!(drop[d] && x.shape()[d] == 1)) shape.push_back(x.shape()[d]);
  return reshape(x, shape, "squeeze");
}

Tensor unsqueeze(const Tensor& x, const std::vector<int64_t>& axes_attr) {
  Check c("unsqueeze");
  c.that(!axes_attr.empty(), "axes", "needs at least one axis");
  int r = x.ndim() + static_cast<int>(axes_attr.size());
  std::vector<int> axes = c.axes(axes_attr, r, "axes");
  std::vector<int64_t> shape;
  size_t src = 0, k = 0;
  for (int d = 0; d < r; ++d) {
    if (k < axes.size() && axes[k] == d) {
      shape.push_back(1);
      ++k;
    } else {
      shape.push_back(x.shape()[src++]);
    }
  }
  return reshape(x, shape, "unsqueeze");
}

Tensor resize(const Tensor& x, int64_t oh, int64_t ow, const std::string& mode, bool align_corners) {
  ResizeParams p;
  p.out_h = oh;
  p.out_w = ow;
  p.mode = mode;
  p.align_corners = align_corners;
  return resize(x, p);
}

Tensor resize(const Tensor& x, const ResizeParams& p) {
  Check c("resize");
  c.that(x.ndim() == 4, "x", "expected [N, C, H, W], got " + ints_str(x.shape()));
  c.that(p.out_h >= 1 && p.out_w >= 1, "out_height", "output extents must be positive");
  const std::string mode = p.mode == "bilinear" ? "linear" : p.mode;
  c.that(mode == "nearest" || mode == "linear" || mode == "cubic", "mode",
         "'" + p.mode + "' is not one of nearest, bilinear (linear), cubic");
  const std::string& coord = p.coord;
  c.that(
      coord.empty() || coord == "half_pixel" || coord == "pytorch_half_pixel" || coord == "align_corners" ||
          coord == "asymmetric" || coord == "half_pixel_symmetric",
      "coord",
      "'" + coord + "' is not one of half_pixel, pytorch_half_pixel, align_corners, asymmetric, half_pixel_symmetric");
  c.that(!(p.align_corners && mode == "nearest"), "align_corners", "applies only to bilinear resizing");
  c.that(!(p.align_corners && !coord.empty()), "align_corners", "give coord=align_corners instead");
  const std::string& nm = p.nearest_mode;
  c.that(nm == "floor" || nm == "ceil" || nm == "round_prefer_floor" || nm == "round_prefer_ceil", "nearest_mode",
         "'" + nm + "' is not one of floor, ceil, round_prefer_floor, round_prefer_ceil");
  c.that(p.scale_h >= 0 && p.scale_w >= 0 && std::isfinite(p.scale_h) && std::isfinite(p.scale_w), "scale_h",
         "scales must be finite and not negative");
  c.that(std::isfinite(p.cubic_a), "cubic_a", "must be finite");
  const int64_t ih = x.shape()[2], iw = x.shape()[3], oh = p.out_h, ow = p.out_w;
  const DType f = DType::f32();
  auto F = [&](double v) { return make_const(f, v); };
  // The source coordinate of output index o along an axis, in float32 as ONNX Runtime
  // computes it.
  auto source = [&](const Var& o, int64_t in, int64_t out, double given) -> Expr {
    const float scale = given > 0 ? static_cast<float>(given) : static_cast<float>(out) / static_cast<float>(in);
    Expr xo = cast(f, o);
    if (coord.empty()) {  // PyTorch: multiplies by in / out
      if (mode == "nearest") return xo * F(static_cast<float>(in) / static_cast<float>(out));
      if (p.align_corners) return xo * F(out > 1 ? static_cast<float>(in - 1) / static_cast<float>(out - 1) : 0.0f);
      const float r = static_cast<float>(in) / static_cast<float>(out);
      Expr s = F(r) * (xo + F(0.5)) - F(0.5);
      return mode == "cubic" ? s : select(lt(s, F(0)), F(0), s);
    }
    if (coord == "half_pixel") return (xo + F(0.5)) / F(scale) - F(0.5);
    if (coord == "pytorch_half_pixel") return out > 1 ? (xo + F(0.5)) / F(scale) - F(0.5) : F(0);
    if (coord == "align_corners")
      return out == 1 ? F(0) : xo * F(static_cast<float>(in - 1) / static_cast<float>(out - 1));
    if (coord == "asymmetric") return xo / F(scale);
    const float adj = static_cast<float>(out) / (scale * static_cast<float>(in));
    const float offset = static_cast<float>(in) / 2.0f * (1.0f - adj);
    return F(offset) + (xo + F(0.5)) / F(scale) - F(0.5);
  };
  auto clamp_index = [](Expr k, int64_t in) { return min(max(k, Expr(0)), Expr(in - 1)); };
  const std::vector<int64_t> out_shape = {x.shape()[0], x.shape()[1], oh, ow};
  if (mode == "nearest") {
    auto pick = [&](const Var& o, int64_t in, int64_t out, double given) {
      Expr s = source(o, in, out, given), r;
      if (nm == "floor") r = call(MathFn::floor, {s});
      else if (nm == "ceil") r = call(MathFn::ceil, {s});
      else if (nm == "round_prefer_floor") r = call(MathFn::ceil, {s - F(0.5)});
      else r = call(MathFn::floor, {s + F(0.5)});
      // Clamped in float first: a float past the index range has no defined conversion.
      r = min(max(r, F(0)), F(static_cast<double>(in - 1)));
      return clamp_index(cast(DType::index(), r), in);
    };
    return injective("resize", out_shape, [&](const std::vector<Var>& i) {
      return x(i[0], i[1], pick(i[2], ih, oh, p.scale_h), pick(i[3], iw, ow, p.scale_w));
    });
  }
  if (mode == "linear") {
    struct Axis {
      Expr lo, hi, w0, w1;
    };
    auto axis = [&](const Var& o, int64_t in, int64_t out, double given) {
      Expr s = source(o, in, out, given);
      s = min(max(s, F(0)), F(static_cast<double>(in - 1)));
      Expr lo = cast(DType::index(), s);  // s >= 0: truncation is the floor
      Expr hi = min(lo + 1, Expr(in - 1));
      Expr w1 = s - cast(f, lo);
      return Axis{lo, hi, F(1) - w1, w1};
    };
    return injective("resize", out_shape, [&](const std::vector<Var>& i) {
      Axis h = axis(i[2], ih, oh, p.scale_h), w = axis(i[3], iw, ow, p.scale_w);
      auto at = [&](const Expr& y, const Expr& z) { return x(i[0], i[1], y, z); };
      return h.w0 * (w.w0 * at(h.lo, w.lo) + w.w1 * at(h.lo, w.hi)) +
             h.w1 * (w.w0 * at(h.hi, w.lo) + w.w1 * at(h.hi, w.hi));
    });
  }
  // Cubic convolution with coefficient a over four taps, edge taps clamped; with
  // exclude_outside, taps outside the input weigh 0 and the rest are renormalized.
  const double A = p.cubic_a;
  struct Taps {
    Expr idx[4], w[4];
  };
  auto taps = [&](const Var& o, int64_t in, int64_t out, double given) {
    Expr s = source(o, in, out, given);
    Expr fl = call(MathFn::floor, {s});
    Expr t = s - fl;
    Expr base = cast(DType::index(), max(min(fl, F(static_cast<double>(in + 2))), F(-3.0)));
    auto far = [&](Expr d) { return ((F(A) * d - F(5 * A)) * d + F(8 * A)) * d - F(4 * A); };  // 1 < |d| < 2
    auto near = [&](Expr d) { return ((F(A + 2) * d - F(A + 3)) * d) * d + F(1); };            // |d| <= 1
    Taps r;
    Expr w[4] = {far(t + F(1)), near(t), near(F(1) - t), far(F(2) - t)};
    Expr sum;
    for (int k = 0; k < 4; ++k) {
      Expr at = base + (k - 1);
      if (p.exclude_outside) w[k] = select(logical_and(ge(at, Expr(0)), lt(at, Expr(in))), w[k], F(0));
      r.idx[k] = clamp_index(at, in);
      sum = k == 0 ? w[k] : sum + w[k];
    }
    for (int k = 0; k < 4; ++k) r.w[k] = p.exclude_outside ? w[k] / sum : w[k];
    return r;
  };
  return injective("resize", out_shape, [&](const std::vector<Var>& i) {
    Taps h = taps(i[2], ih, oh, p.scale_h), w = taps(i[3], iw, ow, p.scale_w);
    Expr acc;
    for (int a = 0; a < 4; ++a) {
      Expr row;
      for (int b = 0; b < 4; ++b) {
        Expr v = w.w[b] * x(i[0], i[1], h.idx[a], w.idx[b]);
        row = b == 0 ? v : row + v;
      }
      acc = a == 0 ? h.w[a] * row : acc + h.w[a] * row;
    }
    return acc;
  });
}

namespace {

// x (float32, `shape`) and int64 indices (`indices_shape`) drawn below the bound `f`
// gives with the output.
OpGraph indexed(const Attrs& a, const std::string& op,
                const std::function<std::pair<Tensor, int64_t>(const Tensor&, const Tensor&, const Check&)>& f) {
  Check c(op);
  Tensor x = te::placeholder("x", c.shape(a, "shape"));
  Tensor idx = te::placeholder("indices", c.shape(a, "indices_shape"), DType::i64());
  auto [y, bound] = f(x, idx, c);
  OpGraph g;
  g.inputs = {x, idx};
  g.outputs = {y};
  g.ranges = {{}, {0, static_cast<double>(bound)}};
  return g;
}

OpGraph one_input(const Attrs& a, const std::string& op, const std::function<Tensor(const Tensor&, const Check&)>& f) {
  Check c(op);
  Tensor x = te::placeholder("x", c.shape(a, "shape"));
  OpGraph g;
  g.inputs = {x};
  g.outputs = {f(x, c)};
  g.ranges = {{}};
  return g;
}

}  // namespace

void register_transform_ops(std::vector<OpDef>& r) {
  r.push_back({"reshape",
               "data",
               "the same elements in a new shape (one extent may be -1)",
               {p_ints("shape", {4, 6, 5}, "shape of x"), p_ints("new_shape", {10, -1}, "target shape")},
               [](const Attrs& a) {
                 return one_input(a, "reshape",
                                  [&](const Tensor& x, const Check&) { return reshape(x, a.ints("new_shape")); });
               }});
  r.push_back(
      {"transpose",
       "data",
       "permutes the axes (default: reverses them)",
       {p_ints("shape", {3, 4, 5}, "shape of x"), p_ints("perm", {1, 2, 0}, "output axis d is input axis perm[d]")},
       [](const Attrs& a) {
         return one_input(a, "transpose", [&](const Tensor& x, const Check&) { return transpose(x, a.ints("perm")); });
       }});
  r.push_back({"flatten",
               "data",
               "merges the axes start_dim..end_dim into one",
               {p_ints("shape", {2, 3, 4, 5}, "shape of x"), p_int("start_dim", 1, "first merged axis"),
                p_int("end_dim", -1, "last merged axis")},
               [](const Attrs& a) {
                 return one_input(a, "flatten", [&](const Tensor& x, const Check&) {
                   return flatten(x, a.i("start_dim"), a.i("end_dim"));
                 });
               }});
  r.push_back({"concat",
               "data",
               "joins inputs along an axis; input k has extent sizes[k] there",
               {p_ints("shape", {2, 3, 4}, "shape of the inputs (the axis extent is taken from sizes)"),
                p_int("axis", 1, "the joined axis"), p_ints("sizes", {3, 1, 5}, "extent of each input along the axis")},
               [](const Attrs& a) {
                 Check c("concat");
                 std::vector<int64_t> shape = c.shape(a, "shape");
                 int axis = c.axis(a.i("axis"), static_cast<int>(shape.size()), "axis");
                 const auto& sizes = a.ints("sizes");
                 c.that(!sizes.empty(), "sizes", "needs at least one input");
                 OpGraph g;
                 for (size_t k = 0; k < sizes.size(); ++k) {
                   c.that(sizes[k] > 0, "sizes", "extents must be positive, got " + ints_str(sizes));
                   shape[axis] = sizes[k];
                   g.inputs.push_back(te::placeholder("x" + std::to_string(k), shape));
                   g.ranges.push_back({});
                 }
                 g.outputs = {concat(g.inputs, axis)};
                 return g;
               }});
  r.push_back({"split",
               "data",
               "cuts x along an axis into parts of the given sizes",
               {p_ints("shape", {3, 10, 2}, "shape of x"), p_int("axis", 1, "the cut axis"),
                p_ints("sizes", {2, 5, 3}, "extent of each part")},
               [](const Attrs& a) {
                 Check c("split");
                 Tensor x = te::placeholder("x", c.shape(a, "shape"));
                 OpGraph g;
                 g.inputs = {x};
                 g.outputs = split(x, a.i("axis"), a.ints("sizes"));
                 g.ranges = {{}};
                 return g;
               }});
  r.push_back({"slice",
               "data",
               "x[starts:ends:steps] on the given axes (ONNX semantics, nonzero steps)",
               {p_ints("shape", {7, 9, 4}, "shape of x"),
                p_ints("starts", {1, -7}, "first index per axis (negative: from the end)"),
                p_ints("ends", {6, 100}, "end index per axis (clamped)"),
                p_ints("axes", {}, "sliced axes (default 0..)"), p_ints("steps", {2, 3}, "step per axis (default 1)")},
               [](const Attrs& a) {
                 return one_input(a, "slice", [&](const Tensor& x, const Check&) {
                   return slice(x, a.ints("starts"), a.ints("ends"), a.ints("axes"), a.ints("steps"));
                 });
               }});
  r.push_back({"gather_elements",
               "data",
               "x's elements at indices along axis (ONNX GatherElements, torch.gather)",
               {p_ints("shape", {4, 5, 6}, "shape of x"), p_ints("indices_shape", {4, 3, 6}, "shape of the indices"),
                p_int("axis", 1, "axis")},
               [](const Attrs& a) {
                 return indexed(a, "gather_elements", [&](const Tensor& x, const Tensor& idx, const Check& c) {
                   const int axis = c.axis(a.i("axis"), x.ndim(), "axis");
                   return std::make_pair(gather_elements(x, idx, axis), x.shape()[axis]);
                 });
               }});
  r.push_back(
      {"gather_nd",
       "data",
       "x's slices at index tuples (ONNX GatherND), after batch_dims shared leading axes",
       {p_ints("shape", {3, 4, 5}, "shape of x"), p_ints("indices_shape", {3, 2, 1}, "shape of the index tuples"),
        p_int("batch_dims", 1, "leading axes shared by x and the indices")},
       [](const Attrs& a) {
         return indexed(a, "gather_nd", [&](const Tensor& x, const Tensor& idx, const Check&) {
           Tensor y = gather_nd(x, idx, a.i("batch_dims"));
           // Every index tuple's components are below the smallest extent they index.
           int64_t lo = INT64_MAX;
           const int64_t b = a.i("batch_dims"), k = idx.shape().back();
           for (int64_t j = 0; j < k; ++j) lo = std::min(lo, x.shape()[b + j]);
           return std::make_pair(y, lo);
         });
       }});
  r.push_back(
      {"pad",
       "data",
       "pads every axis (constant, edge or reflect)",
       {p_ints("shape", {3, 5, 6}, "shape of x"), p_ints("pads", {0, 1, 2, 1, 0, 3}, "begins of all axes, then ends"),
        p_float("value", 0.0, "fill value of constant padding"),
        p_str("mode", "constant", "constant, edge or reflect")},
       [](const Attrs& a) {
         return one_input(a, "pad", [&](const Tensor& x, const Check&) {
           return pad(x, a.ints("pads"), a.f("value"), a.s("mode"));
         });
       }});
  r.push_back({"gather",
               "data",
               "selects slices of x along an axis by an int64 index tensor (numpy.take)",
               {p_ints("shape", {5, 7, 3}, "shape of x"), p_ints("indices_shape", {2, 4}, "shape of the indices"),
                p_int("axis", 1, "the indexed axis")},
               [](const Attrs& a) {
                 Check c("gather");
                 std::vector<int64_t> shape = c.shape(a, "shape");
                 int axis = c.axis(a.i("axis"), static_cast<int>(shape.size()), "axis");
                 Tensor x = te::placeholder("x", shape);
                 Tensor idx = te::placeholder("indices", c.shape(a, "indices_shape"), DType::i64());
                 OpGraph g;
                 g.inputs = {x, idx};
                 g.outputs = {gather(x, idx, axis)};
                 g.ranges = {{}, {0, static_cast<double>(shape[axis])}};
                 return g;
               }});
  r.push_back({"embedding",
               "data",
               "rows of a [num_embeddings, dim] table selected by int64 indices",
               {p_int("num_embeddings", 50, "rows of the table"), p_int("dim", 16, "columns of the table"),
                p_ints("indices_shape", {2, 7}, "shape of the indices")},
               [](const Attrs& a) {
                 Check c("embedding");
                 int64_t n = c.at_least(a, "num_embeddings", 1), d = c.at_least(a, "dim", 1);
                 Tensor w = te::placeholder("weight", {n, d});
                 Tensor idx = te::placeholder("indices", c.shape(a, "indices_shape"), DType::i64());
                 OpGraph g;
                 g.inputs = {w, idx};
                 g.outputs = {gather(w, idx, 0, "embedding")};
                 g.ranges = {{}, {0, static_cast<double>(n)}};
                 return g;
               }});
  r.push_back({"broadcast_to",
               "data",
               "repeats x along its extent-1 (and new leading) axes",
               {p_ints("shape", {3, 1}, "shape of x"), p_ints("new_shape", {2, 3, 4}, "target shape")},
               [](const Attrs& a) {
                 return one_input(a, "broadcast_to",
                                  [&](const Tensor& x, const Check&) { return broadcast_to(x, a.ints("new_shape")); });
               }});
  r.push_back(
      {"squeeze",
       "data",
       "removes axes of extent 1 (the given ones, or all)",
       {p_ints("shape", {3, 1, 4, 1}, "shape of x"), p_ints("axes", {1}, "removed axes (empty: every extent-1 axis)")},
       [](const Attrs& a) {
         return one_input(a, "squeeze", [&](const Tensor& x, const Check&) { return squeeze(x, a.ints("axes")); });
       }});
  r.push_back({"unsqueeze",
               "data",
               "inserts axes of extent 1 at the given output positions",
               {p_ints("shape", {3, 4}, "shape of x"), p_ints("axes", {0, 2}, "positions in the output")},
               [](const Attrs& a) {
                 return one_input(a, "unsqueeze",
                                  [&](const Tensor& x, const Check&) { return unsqueeze(x, a.ints("axes")); });
               }});
  r.push_back({"resize",
               "data",
               "resizes the H and W axes of NCHW input (nearest or bilinear, PyTorch conventions)",
               {p_int("batch", 1, "N"), p_int("channels", 3, "C"), p_int("height", 5, "H"), p_int("width", 7, "W"),
                p_int("out_height", 9, "output H"), p_int("out_width", 10, "output W"),
                p_str("mode", "bilinear", "nearest, bilinear or cubic"),
                p_int("align_corners", 0, "bilinear and cubic: 1 aligns corner pixels"),
                p_str("coord", "", "an ONNX coordinate transformation mode (empty: PyTorch's conventions)"),
                p_str("nearest_mode", "floor", "nearest: floor, ceil, round_prefer_floor, round_prefer_ceil"),
                p_float("cubic_a", -0.75, "cubic: the coefficient"),
                p_int("exclude_outside", 0, "cubic: 1 drops taps outside")},
               [](const Attrs& a) {
                 Check c("resize");
                 Tensor x = te::placeholder("x", {c.at_least(a, "batch", 1), c.at_least(a, "channels", 1),
                                                  c.at_least(a, "height", 1), c.at_least(a, "width", 1)});
                 int64_t ac = a.i("align_corners");
                 c.that(ac == 0 || ac == 1, "align_corners", "must be 0 or 1, got " + std::to_string(ac));
                 ResizeParams p;
                 p.out_h = c.at_least(a, "out_height", 1);
                 p.out_w = c.at_least(a, "out_width", 1);
                 p.mode = a.s("mode");
                 p.align_corners = ac == 1;
                 p.coord = a.s("coord");
                 p.nearest_mode = a.s("nearest_mode");
                 p.cubic_a = a.f("cubic_a");
                 p.exclude_outside = a.i("exclude_outside") != 0;
                 OpGraph g;
                 g.inputs = {x};
                 g.outputs = {resize(x, p)};
                 g.ranges = {{}};
                 g.flops = 7.0 * g.outputs[0].numel();
                 return g;
               }});
}

}  // namespace basin::ops
