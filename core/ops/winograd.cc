// Winograd's minimal filtering F(m x m, 3 x 3) in the blocked layout (docs/networks.md,
// "Winograd"): a 3x3, stride-1 convolution computed as three kernels,
//
//   V = winograd_input(x)   each (m+2)x(m+2) input tile d, transformed: B^T d B
//   M = winograd_gemm(V, U) one GEMM per tile position (a, b): M[a,b] = U[a,b] V[a,b]
//   Y = winograd_output(M)  each tile's m x m outputs: A^T M A
//
// with U = G g G^T, the weight transformed once when the network is compiled. Each
// output tile of m x m takes (m+2)^2 multiplications per channel pair instead of 9 m^2:
// 2.25 times fewer for m = 2, 4 times for m = 4. The matrices are Lavin and Gray's
// (interpolation points 0, 1, -1 and infinity; for m = 4 also 2 and -2).
#include <cmath>

#include "core/ops/op_util.h"
#include "core/ops/operators.h"

namespace basin::ops {

namespace {

struct Matrices {
  int m = 0, alpha = 0;
  std::vector<double> bt;  // alpha x alpha: V = BT d BT^T
  std::vector<double> g;   // alpha x 3:     U = G w G^T
  std::vector<double> at;  // m x alpha:     Y = AT M AT^T
};

const Matrices& matrices(const Check& c, int64_t m) {
  static const Matrices f2 = {2,
                              4,
                              {1, 0, -1, 0,  //
                               0, 1, 1, 0,   //
                               0, -1, 1, 0,  //
                               0, 1, 0, -1},
                              {1, 0, 0,         //
                               0.5, 0.5, 0.5,   //
                               0.5, -0.5, 0.5,  //
                               0, 0, 1},
                              {1, 1, 1, 0,  //
                               0, 1, -1, -1}};
  static const Matrices f4 = {4,
                              6,
                              {4, 0,  -5, 0,  1, 0,  //
                               0, -4, -4, 1,  1, 0,  //
                               0, 4,  -4, -1, 1, 0,  //
                               0, -2, -1, 2,  1, 0,  //
                               0, 2,  -1, -2, 1, 0,  //
                               0, 4,  0,  -5, 0, 1},
                              {1.0 / 4, 0, 0,                 //
                               -1.0 / 6, -1.0 / 6, -1.0 / 6,  //
                               -1.0 / 6, 1.0 / 6, -1.0 / 6,   //
                               1.0 / 24, 1.0 / 12, 1.0 / 6,   //
                               1.0 / 24, -1.0 / 12, 1.0 / 6,  //
                               0, 0, 1},
                              {1, 1, 1,  1, 1,  0,  //
                               0, 1, -1, 2, -2, 0,  //
                               0, 1, 1,  4, 4,  0,  //
                               0, 1, -1, 8, -8, 1}};
  c.that(m == 2 || m == 4, "m", "the output tile must be 2 or 4, got " + std::to_string(m));
  return m == 2 ? f2 : f4;
}

// sum_k row[k] * term(k), the zero coefficients left out and the unit ones unmultiplied.
Expr combine(const double* row, int n, const std::function<Expr(int)>& term) {
  Expr sum;
  for (int k = 0; k < n; ++k) {
    const double c = row[k];
    if (c == 0) continue;
    Expr t = term(k);
    if (c == -1) {
      sum = sum.defined() ? sum - t : -t;
      continue;
    }
    if (c != 1) t = Expr(c) * t;
    sum = sum.defined() ? sum + t : t;
  }
  return sum;
}

// value(k) for k = idx, as selects over idx's values (each a whole vector once idx is
// a loop outside the vector lanes: a branch, or a constant once unrolled).
Expr pick(const Expr& idx, const std::vector<Expr>& value) {
  Expr e = value.back();
  for (int k = static_cast<int>(value.size()) - 2; k >= 0; --k) e = select(eq(idx, Expr(k)), value[k], e);
  return e;
}

int64_t tiles(int64_t extent, int64_t m) { return (extent + m - 1) / m; }

}  // namespace

Tensor winograd_input(const Tensor& x, int64_t m, int64_t pad) {
  Check c("winograd_input");
  const Matrices& t = matrices(c, m);
  c.that(x.ndim() == 5, "x", "expected [N, C/b, H, W, b], got " + ints_str(x.shape()));
  c.that(pad >= 0 && pad <= 2, "padding", "must be 0, 1 or 2, got " + std::to_string(pad));
  const int64_t n = x.shape()[0], cb = x.shape()[1], h = x.shape()[2], w = x.shape()[3], b = x.shape()[4];
  const int64_t oh = h + 2 * pad - 2, ow = w + 2 * pad - 2;
  c.that(oh >= 1 && ow >= 1, "x", "a 3x3 kernel does not fit the padded input " + ints_str(x.shape()));
  const int64_t th = tiles(oh, m), tw = tiles(ow, m), a = t.alpha;
  // Tiles reach past the output's last row and column: zeros there.
  Tensor xp = zero_pad(x, {pad, pad}, {th * m + 2 - pad - h, tw * m + 2 - pad - w}, "winograd_input_pad");
  return te::compute(
      "winograd_input", {a, a, n, cb, th * tw, b},
      [&](const std::vector<Var>& i) {
        const Expr row0 = floordiv(i[4], Expr(tw)) * m, col0 = floormod(i[4], Expr(tw)) * m;
        auto d = [&](int r, int s) { return xp.read({i[2], i[3], row0 + r, col0 + s, i[5]}); };
        std::vector<Expr> rows;
        for (int u = 0; u < a; ++u) {
          std::vector<Expr> cols;
          for (int v = 0; v < a; ++v)
            cols.push_back(combine(&t.bt[u * a], a,
                                   [&](int r) { return combine(&t.bt[v * a], a, [&](int s) { return d(r, s); }); }));
          rows.push_back(pick(i[1], cols));
        }
        return pick(i[0], rows);
      },
      te::OpPattern::Injective, "winograd_input");
}

Tensor winograd_gemm(const Tensor& v, const Tensor& u) {
  Check c("winograd_gemm");
  c.that(v.ndim() == 6, "v", "expected [A, A, N, C/bi, T, bi], got " + ints_str(v.shape()));
  c.that(u.ndim() == 6, "u", "expected [A, A, OC/bo, C/bi, bi, bo], got " + ints_str(u.shape()));
  const std::vector<int64_t>&vs = v.shape(), &us = u.shape();
  c.that(vs[0] == us[0] && vs[1] == us[1] && vs[3] == us[3] && vs[5] == us[4], "u",
         "weight " + ints_str(us) + " does not match the transformed input " + ints_str(vs));
  return te::reduce(
      "winograd_gemm", {vs[0], vs[1], vs[2], us[2], vs[4], us[5]}, {vs[3], vs[5]}, te::ReduceKind::Sum,
      [&](const std::vector<Var>& i, const std::vector<Var>& r) {
        return v.read({i[0], i[1], i[2], r[0], i[4], r[1]}) * u.read({i[0], i[1], i[3], r[0], r[1], i[5]});
      },
      te::OpPattern::Anchor, "winograd_gemm");
}

Tensor winograd_output(const Tensor& mt, int64_t m, int64_t height, int64_t width) {
  Check c("winograd_output");
  const Matrices& t = matrices(c, m);
  c.that(mt.ndim() == 6 && mt.shape()[0] == t.alpha && mt.shape()[1] == t.alpha, "m",
         "expected [" + std::to_string(t.alpha) + ", " + std::to_string(t.alpha) + ", N, OC/b, T, b], got " +
             ints_str(mt.shape()));
  c.that(height >= 1 && width >= 1 && tiles(height, m) * tiles(width, m) == mt.shape()[4], "height",
         std::to_string(height) + "x" + std::to_string(width) + " outputs are not " + std::to_string(mt.shape()[4]) +
             " tiles of " + std::to_string(m));
  const int64_t tw = tiles(width, m), a = t.alpha;
  return te::compute(
      "winograd_output", {mt.shape()[2], mt.shape()[3], height, width, mt.shape()[5]},
      [&](const std::vector<Var>& i) {
        const Expr tile = floordiv(i[2], Expr(m)) * tw + floordiv(i[3], Expr(m));
        const Expr r = floormod(i[2], Expr(m)), s = floormod(i[3], Expr(m));
        std::vector<Expr> cols;  // per a: sum_b AT[s][b] M[a, b], as a pick over s
        for (int u = 0; u < a; ++u) {
          std::vector<Expr> by_s;
          for (int j = 0; j < m; ++j)
            by_s.push_back(combine(&t.at[j * a], a, [&](int v) {
              return mt.read({Expr(u), Expr(v), i[0], i[1], tile, i[4]});
            }));
          cols.push_back(pick(s, by_s));
        }
        std::vector<Expr> by_r;
        for (int j = 0; j < m; ++j) by_r.push_back(combine(&t.at[j * a], a, [&](int u) { return cols[u]; }));
        return pick(r, by_r);
      },
      te::OpPattern::Injective, "winograd_output");
}

std::vector<double> winograd_matrix(int64_t m, char which) {
  Check c("winograd");
  const Matrices& t = matrices(c, m);
  c.that(which == 'B' || which == 'G' || which == 'A', "which", "expected B, G or A");
  return which == 'B' ? t.bt : which == 'G' ? t.g : t.at;
}

NDArray winograd_weight(const NDArray& w, int64_t m, int64_t in_block, int64_t out_block) {
  Check c("winograd_weight");
  const Matrices& t = matrices(c, m);
  c.that(w.shape().size() == 4 && w.dtype() == DType::f32() && w.shape()[2] == 3 && w.shape()[3] == 3, "w",
         "expected an f32 weight [OC, C, 3, 3], got " + ints_str(w.shape()));
  const int64_t oc = w.shape()[0], ch = w.shape()[1], a = t.alpha;
  c.that(in_block >= 1 && ch % in_block == 0 && out_block >= 1 && oc % out_block == 0, "block",
         "weight " + ints_str(w.shape()) + " cannot be blocked by " + std::to_string(in_block) + " and " +
             std::to_string(out_block));
  NDArray out(DType::f32(), {a, a, oc / out_block, ch / in_block, in_block, out_block});
  const float* src = static_cast<const float*>(w.data());
  float* dst = static_cast<float*>(out.data());
  for (int64_t o = 0; o < oc; ++o)
    for (int64_t ci = 0; ci < ch; ++ci) {
      const float* g = src + (o * ch + ci) * 9;
      double gw[6][3];  // G g
      for (int u = 0; u < a; ++u)
        for (int s = 0; s < 3; ++s) {
          gw[u][s] = 0;
          for (int r = 0; r < 3; ++r) gw[u][s] += t.g[u * 3 + r] * g[r * 3 + s];
        }
      for (int u = 0; u < a; ++u)
        for (int v = 0; v < a; ++v) {
          double sum = 0;  // (G g G^T)[u][v]
          for (int s = 0; s < 3; ++s) sum += gw[u][s] * t.g[v * 3 + s];
          const int64_t to =
              ((((u * a + v) * (oc / out_block) + o / out_block) * (ch / in_block) + ci / in_block) * in_block +
               ci % in_block) *
                  out_block +
              o % out_block;
          dst[to] = static_cast<float>(sum);
        }
    }
  return out;
}

namespace {

// channels / block, checked to divide.
int64_t blocks(const Check& c, int64_t channels, int64_t block, const std::string& attr) {
  c.that(channels % block == 0, attr,
         std::to_string(channels) + " channels are not a multiple of " + std::to_string(block));
  return channels / block;
}

std::vector<ParamSpec> shape_params() {
  return {p_int("batch", 1, "N"),
          p_int("in_channels", 16, "C"),
          p_int("height", 9, "H"),
          p_int("width", 10, "W"),
          p_int("block", 16, "channels per block (b)"),
          p_int("m", 2, "output tile (2 or 4)")};
}

OpDef input_def() {
  std::vector<ParamSpec> params = shape_params();
  params.push_back(p_int("padding", 1, "padding of the convolution"));
  return {"winograd_input", "nn",
          "a 3x3 convolution's input tiles, Winograd-transformed: x [N, C/b, H, W, b] -> [A, A, N, C/b, T, b], "
          "A = m + 2, T the tiles of m x m outputs",
          params, [](const Attrs& at) {
            Check c("winograd_input");
            const int64_t b = c.at_least(at, "block", 1), cb = blocks(c, c.at_least(at, "in_channels", 1), b, "block");
            Tensor x = te::placeholder(
                "x", {c.at_least(at, "batch", 1), cb, c.at_least(at, "height", 1), c.at_least(at, "width", 1), b});
            OpGraph g;
            g.inputs = {x};
            g.outputs = {winograd_input(x, at.i("m"), at.i("padding"))};
            g.ranges = {{}};
            return g;
          }};
}

OpDef gemm_def() {
  std::vector<ParamSpec> params = shape_params();
  params.push_back(p_int("out_channels", 32, "OC"));
  params.push_back(p_int("out_block", 0, "output channels per block (bo; 0: the input's)"));
  return {"winograd_gemm", "nn",
          "the batched GEMM of a Winograd convolution: v [A, A, N, C/bi, T, bi], u [A, A, OC/bo, C/bi, bi, bo] -> "
          "[A, A, N, OC/bo, T, bo] (T: the tiles of height x width outputs)",
          params, [](const Attrs& at) {
            Check c("winograd_gemm");
            int64_t ch = c.at_least(at, "in_channels", 1), bi = c.at_least(at, "block", 1);
            int64_t oc = c.at_least(at, "out_channels", 1), bo = at.i("out_block") > 0 ? at.i("out_block") : bi;
            int64_t m = at.i("m");
            const int64_t a = matrices(c, m).alpha;
            const int64_t cb = blocks(c, ch, bi, "block"), ob = blocks(c, oc, bo, "out_block");
            const int64_t t = tiles(c.at_least(at, "height", 1), m) * tiles(c.at_least(at, "width", 1), m);
            Tensor v = te::placeholder("v", {a, a, c.at_least(at, "batch", 1), cb, t, bi});
            Tensor u = te::placeholder("u", {a, a, ob, cb, bi, bo});
            OpGraph g;
            g.inputs = {v, u};
            g.outputs = {winograd_gemm(v, u)};
            g.ranges = {{}, {}};
            g.flops = 2.0 * g.outputs[0].numel() * ch;
            return g;
          }};
}

OpDef output_def() {
  return {"winograd_output", "nn",
          "a Winograd convolution's outputs from its GEMM's: [A, A, N, C/b, T, b] -> [N, C/b, H, W, b] (H, W the "
          "outputs, T their tiles of m x m)",
          shape_params(), [](const Attrs& at) {
            Check c("winograd_output");
            int64_t ch = c.at_least(at, "in_channels", 1), b = c.at_least(at, "block", 1), m = at.i("m");
            int64_t h = c.at_least(at, "height", 1), w = c.at_least(at, "width", 1);
            const int64_t a = matrices(c, m).alpha, cb = blocks(c, ch, b, "block");
            Tensor mt = te::placeholder("m", {a, a, c.at_least(at, "batch", 1), cb, tiles(h, m) * tiles(w, m), b});
            OpGraph g;
            g.inputs = {mt};
            g.outputs = {winograd_output(mt, m, h, w)};
            g.ranges = {{}};
            return g;
          }};
}

}  // namespace

void register_winograd_ops(std::vector<OpDef>& r) {
  r.push_back(input_def());
  r.push_back(gemm_def());
  r.push_back(output_def());
}

}  // namespace basin::ops
