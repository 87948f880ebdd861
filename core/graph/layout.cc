#include "core/graph/layout.h"

#include <cstdlib>
#include <cstring>
#include <optional>
#include <set>

#include "core/graph/passes.h"
#include "core/ops/node_ops.h"
#include "core/ops/operators.h"
#include "core/util/host.h"

namespace basin::graph {

int64_t channel_block(int64_t channels, int64_t lanes) {
  for (int64_t b = lanes; b >= 8 && b >= lanes / 2; b /= 2)
    if (channels % b == 0) return b;
  return 0;
}

int64_t host_layout_lanes() {
  const int setting = blocked_layout_setting();
  if (setting < 0) throw Error(std::string("BASIN_LAYOUT='") + std::getenv("BASIN_LAYOUT") + "' is not a layout plan");
  if (setting == 0) return 0;
  return vector_file(probe_host().vector_isa).bytes / 4;
}

int64_t layout_lanes(const std::string& target) { return target == "llvm" ? host_layout_lanes() : 0; }

int64_t winograd_auto(int64_t in_channels, int64_t out_channels, int64_t height, int64_t width) {
  // Measured range: 64 to 512 channels on maps of 7x7 to 56x56 (docs/networks.md).
  if (in_channels < 64 || out_channels < 64 || height * width < 49) return 0;
  // F(4x4) multiplies 4 times fewer than the direct convolution, F(2x2) 2.25 times, but
  // F(4x4)'s transformed weight is 36/9 of the weight, F(2x2)'s 16/9: F(4x4) while that
  // stays small (up to 128 x 128 channels, 2.4 MB), F(2x2) beyond, where a ResNet's
  // weights no longer fit the caches and stream from memory every run.
  return in_channels * out_channels <= 128 * 128 ? 4 : 2;
}

namespace {

bool is_elementwise(const std::string& op) {
  static const std::set<std::string> ops = {
      "add",         "sub",         "mul",   "div",        "maximum",  "minimum",       "pow",         "relu",
      "relu6",       "sigmoid",     "tanh",  "gelu",       "silu",     "hardswish",     "hardsigmoid", "exp",
      "floor",       "ceil",        "round", "sign",       "softplus", "elu",           "selu",        "log",
      "sqrt",        "rsqrt",       "erf",   "neg",        "abs",      "sin",           "cos",         "clip",
      "leaky_relu",  "equal",       "less",  "less_equal", "greater",  "greater_equal", "logical_and", "logical_or",
      "logical_xor", "logical_not", "isnan", "isinf",      "where",    "mod",           "cast"};
  return ops.count(op) > 0;
}

// The element types of values the plan blocks: float32, and a quantized model's 8-bit
// integers and int32 sums.
bool blockable(DType t) { return t == DType::f32() || t == DType::i32() || t == DType::u8() || t == DType::i8(); }

bool is_pool(const std::string& op) {
  return op == "max_pool2d" || op == "avg_pool2d" || op == "global_avg_pool2d" || op == "global_max_pool2d";
}

// A constant operand of an elementwise node whose output is [N, C, H, W], in the
// blocked layout of block b: its shape right-aligned against the output's, [n, c, h, w]
// with c either C (to_nchwc, evaluated now) or 1 (reshaped to [n, 1, h, w, 1]). None
// when its shape is not of that form.
std::optional<NDArray> blocked_operand(const NDArray& a, int64_t channels, int64_t b) {
  std::vector<int64_t> s = a.shape();
  if (s.size() > 4) return std::nullopt;
  while (s.size() < 4) s.insert(s.begin(), 1);
  if (s[1] != 1 && s[1] != channels) return std::nullopt;
  if (s[1] == 1) s.push_back(1);
  NDArray shaped(a.dtype(), s);
  if (shaped.nbytes()) std::memcpy(shaped.data(), a.data(), shaped.nbytes());
  if (s.size() == 5) return shaped;
  return evaluate_node("to_nchwc", ops::node_attrs("to_nchwc", {{"block", b}}), {shaped});
}

class Planner {
 public:
  Planner(const Graph& g, int64_t lanes, bool tiles)
      : g_(g), lanes_(lanes), tiles_(tiles), plain_(g.values().size(), -1), blocked_(g.values().size(), -1) {
    out_.name = g.name;
  }

  Graph run() {
    for (int v : g_.inputs()) plain_[v] = out_.add_input(g_.value(v).name, g_.value(v).shape, g_.value(v).dtype);
    for (int n : g_.topo_order()) {
      const Node& nd = g_.node(n);
      if (!(nd.op == "conv2d" && conv(nd)) && !(is_elementwise(nd.op) && elementwise(nd)) &&
          !((nd.op == "quantize_linear" || nd.op == "dequantize_linear" || nd.op == "fake_quantize") &&
            quantization(nd)) &&
          !(is_pool(nd.op) && pool(nd)) && !(nd.op == "concat" && concat(nd)) &&
          !(nd.op == "conv2d_transpose" && transposed_conv(nd))) {
        std::vector<int> ins;
        for (int v : nd.inputs) ins.push_back(plain(v));
        plain_[nd.output] = out_.add_node(nd.op, ins, nd.attrs.values(), nd.name);
      }
    }
    for (size_t i = 0; i < g_.outputs().size(); ++i) out_.add_output(plain(g_.outputs()[i]), g_.output_names()[i]);
    return std::move(out_);
  }

 private:
  const Value& val(int v) const { return g_.value(v); }
  // The block a value gets: a whole vector of channels, or half of one (24 channels at
  // 16 lanes: blocks of 8). A 1x1 convolution at 56x56 from 144 into 24 channels, or
  // from 24 into 144, runs as fast blocked by 8 as in NCHW, and the blocked value needs
  // no conversion from or to its blocked neighbours.
  // With tiles, 32 channels where they divide: a bfloat16 tile's row is 32 values of k,
  // so a 1x1 convolution reads its input's blocks in place, each tile one contiguous
  // kilobyte (sched's amx.bf16 sketches), where blocks of 16 are copied per call.
  int64_t block_of(int v) const {
    const Value& x = val(v);
    if (x.shape.size() != 4 || !blockable(x.dtype)) return 0;
    if (tiles_ && lanes_ == 16 && x.shape[1] % 32 == 0) return 32;
    return channel_block(x.shape[1], lanes_);
  }

  // The block v has in the blocked layout, or would get converted to it.
  int64_t block(int v) const { return blocked_[v] >= 0 ? out_.value(blocked_[v]).shape.back() : block_of(v); }

  int plain(int v) {
    if (plain_[v] >= 0) return plain_[v];
    if (blocked_[v] >= 0) return plain_[v] = out_.add_node("from_nchwc", {blocked_[v]}, {}, val(v).name + ".nchw");
    return plain_[v] = out_.add_constant(val(v).name, val(v).data);  // a constant, on first use
  }
  // A variable value in the blocked layout.
  int blocked(int v) {
    if (blocked_[v] >= 0) return blocked_[v];
    return blocked_[v] = out_.add_node("to_nchwc", {plain(v)}, {{"block", block_of(v)}}, val(v).name + ".nchwc");
  }

  bool conv(const Node& nd) {
    const Value &x = val(nd.inputs[0]), &w = val(nd.inputs[1]);
    if (x.shape.size() != 4 || !w.constant || !blockable(w.data.dtype())) return false;
    const int64_t groups = nd.attrs.i("groups"), ch = x.shape[1], oc = w.shape[0];
    const bool depthwise = groups != 1;
    // A depthwise convolution keeps its input's block.
    const int64_t bo = depthwise ? block(nd.inputs[0]) : block_of(nd.output);
    if (bo == 0 || !(groups == 1 || (groups == ch && oc == ch))) return false;
    int in;
    int64_t bi;
    if (block(nd.inputs[0]) != 0) {
      bi = block(nd.inputs[0]);
      in = blocked(nd.inputs[0]);
    } else {
      bi = ch;  // one block of every channel: NHWC
      in = out_.add_node("to_nchwc", {plain(nd.inputs[0])}, {{"block", bi}}, x.name + ".nhwc");
    }
    const bool f32 = w.data.dtype() == DType::f32();
    if (const int64_t m = f32 && groups == 1 && block(nd.inputs[0]) != 0 ? winograd_tile(nd) : 0) {
      const int64_t pad = nd.attrs.ints("padding")[0];
      const Value& y = val(nd.output);
      const int tiles = out_.add_node("winograd_input", {in}, {{"m", m}, {"padding", pad}}, nd.name + ".tiles");
      const int u = out_.add_constant(w.name + ".winograd", ops::winograd_weight(w.data, m, bi, bo));
      const int prod = out_.add_node("winograd_gemm", {tiles, u}, {}, nd.name + ".gemm");
      blocked_[nd.output] =
          out_.add_node("winograd_output", {prod}, {{"m", m}, {"height", y.shape[2]}, {"width", y.shape[3]}}, nd.name);
      return true;
    }
    int wt = out_.add_constant(w.name + ".nchwc", ops::pack_conv_weight_nchwc(w.data, groups, bi, bo));
    blocked_[nd.output] = out_.add_node("conv2d_nchwc", {in, wt}, nd.attrs.values(), nd.name);
    return true;
  }

  // The output tile m of Winograd's F(m x m, 3 x 3) for a conv2d node (groups 1, its
  // input blocked), or 0 for the direct convolution: BASIN_WINOGRAD's m, or under
  // `auto` the plan's rule (docs/networks.md, "Winograd").
  int64_t winograd_tile(const Node& nd) const {
    const int setting = winograd_setting();
    if (setting <= 0) return 0;
    const Value &x = val(nd.inputs[0]), &w = val(nd.inputs[1]);
    auto all = [&](const char* attr, int64_t v) {
      for (int64_t a : nd.attrs.ints(attr))
        if (a != v) return false;
      return true;
    };
    const std::vector<int64_t>& pad = nd.attrs.ints("padding");
    if (w.shape.size() != 4 || w.shape[2] != 3 || w.shape[3] != 3 || !all("stride", 1) || !all("dilation", 1) ||
        pad.empty() || pad[0] > 2 || !all("padding", pad[0]))
      return 0;
    if (setting > 1) return setting;
    if (tiles_) return 0;
    return winograd_auto(x.shape[1], w.shape[0], val(nd.output).shape[2], val(nd.output).shape[3]);
  }

  // A strided transposed convolution whose output channels fill no vector (DCGAN's last
  // layer: 3) is vectorized along its width, where consecutive columns take their taps
  // from alternating stride phases (a gather per lane): it computes the width phase-major
  // instead (ConvTransposeParams::width_phases), each phase a contiguous row, and a
  // transpose of the last two axes restores [N, OC, OH, OW].
  bool transposed_conv(const Node& nd) {
    const Value& y = val(nd.output);
    const std::vector<int64_t>& stride = nd.attrs.ints("stride");
    const std::vector<int64_t>& dilation = nd.attrs.ints("dilation");
    const int64_t sw = stride.empty() ? 1 : stride.back();
    if (y.shape.size() != 4 || y.dtype != DType::f32() || nd.attrs.i("width_phases") != 0) return false;
    if (channel_block(y.shape[1], lanes_) != 0 || sw < 2 || y.shape[3] % sw != 0 || y.shape[3] / sw < lanes_)
      return false;
    for (int64_t d : dilation)
      if (d != 1) return false;
    std::vector<int> ins;
    for (int v : nd.inputs) ins.push_back(plain(v));
    std::map<std::string, ops::AttrValue> attrs = nd.attrs.values();
    attrs["width_phases"] = int64_t{1};
    const int phased = out_.add_node(nd.op, ins, attrs, nd.name);
    const int cols =
        out_.add_node("transpose", {phased}, {{"perm", std::vector<int64_t>{0, 1, 2, 4, 3}}}, nd.name + ".columns");
    plain_[nd.output] = out_.add_node("reshape", {cols}, {{"new_shape", y.shape}}, nd.name + ".nchw");
    return true;
  }

  bool elementwise(const Node& nd) {
    const Value& y = val(nd.output);
    if (y.shape.size() != 4 || !blockable(y.dtype)) return false;
    int64_t b = 0;
    bool any_blocked = false;
    for (int v : nd.inputs) {
      const Value& x = val(v);
      if (x.constant) continue;
      if (b == 0) b = block(v);
      if (b == 0 || x.shape.size() != 4 || x.shape[1] != y.shape[1] || block(v) != b) return false;
      any_blocked |= blocked_[v] >= 0;
    }
    if (!any_blocked) return false;
    std::vector<std::optional<NDArray>> constants(nd.inputs.size());
    for (size_t k = 0; k < nd.inputs.size(); ++k)
      if (val(nd.inputs[k]).constant && !(constants[k] = blocked_operand(val(nd.inputs[k]).data, y.shape[1], b)))
        return false;
    std::vector<int> ins;
    for (size_t k = 0; k < nd.inputs.size(); ++k) {
      const int v = nd.inputs[k];
      ins.push_back(constants[k] ? out_.add_constant(val(v).name + ".nchwc", *constants[k]) : blocked(v));
    }
    blocked_[nd.output] = out_.add_node(nd.op, ins, nd.attrs.values(), nd.name);
    return true;
  }

  // Quantization of a blocked value per tensor (scale and zero point one value each,
  // constants read as they are) runs blocked.
  bool quantization(const Node& nd) {
    const int x = nd.inputs[0];
    if (blocked_[x] < 0) return false;
    for (size_t k = 1; k < nd.inputs.size(); ++k)
      if (!val(nd.inputs[k]).constant || !val(nd.inputs[k]).shape.empty()) return false;
    std::vector<int> ins = {blocked_[x]};
    for (size_t k = 1; k < nd.inputs.size(); ++k) ins.push_back(plain(nd.inputs[k]));
    blocked_[nd.output] = out_.add_node(nd.op, ins, nd.attrs.values(), nd.name);
    return true;
  }

  bool pool(const Node& nd) {
    if (blocked_[nd.inputs[0]] < 0) return false;
    blocked_[nd.output] = out_.add_node(nd.op, {blocked_[nd.inputs[0]]}, nd.attrs.values(), nd.name);
    return true;
  }

  bool concat(const Node& nd) {
    const int64_t b = block(nd.inputs[0]), axis = nd.attrs.i("axis");
    if (b == 0 || (axis != 1 && axis != -3)) return false;
    bool any_blocked = false;
    for (int v : nd.inputs) {
      if (val(v).constant || block(v) != b) return false;
      any_blocked |= blocked_[v] >= 0;
    }
    if (!any_blocked) return false;
    std::vector<int> ins;
    for (int v : nd.inputs) ins.push_back(blocked(v));
    blocked_[nd.output] = out_.add_node("concat", ins, {{"axis", int64_t{1}}}, nd.name);
    return true;
  }

  const Graph& g_;
  int64_t lanes_;
  bool tiles_;  // the convolutions run on matrix tiles: no Winograd under `auto`
  Graph out_;
  std::vector<int> plain_, blocked_;  // the value in each layout in out_, -1 while none
};

}  // namespace

Graph plan_layouts(const Graph& g, int64_t lanes, bool tiles) {
  if (lanes <= 0) return g;
  return Planner(g, lanes, tiles).run();
}

}  // namespace basin::graph
