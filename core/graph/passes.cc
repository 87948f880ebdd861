#include "core/graph/passes.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <optional>
#include <set>
#include <unordered_map>

#include "core/graph/fusion.h"
#include "core/graph/layout.h"
#include "core/ir/interpreter.h"
#include "core/ir/lower.h"
#include "core/ops/node_ops.h"
#include "core/ops/operators.h"
#include "core/ops/op_util.h"

namespace basin::graph {

namespace {

// Rebuilds a graph node by node. `visit` sees each node of the source (topological
// order) with a function mapping source values to new ones, and either returns the
// new value of the node's output or -1 to copy the node as it is.
Graph rebuild(const Graph& g, const std::function<int(Graph&, const Node&, const std::function<int(int)>&)>& visit) {
  Graph out;
  out.name = g.name;
  std::unordered_map<int, int> map;
  std::function<int(int)> get = [&](int v) -> int {
    auto it = map.find(v);
    if (it != map.end()) return it->second;
    const Value& val = g.value(v);
    if (!val.constant) throw InternalError("rebuild: value '" + val.name + "' used before it is defined");
    int nv = out.add_constant(val.name, val.data);
    map[v] = nv;
    return nv;
  };
  for (int v : g.inputs()) map[v] = out.add_input(g.value(v).name, g.value(v).shape, g.value(v).dtype);
  for (int n : g.topo_order()) {
    const Node& nd = g.node(n);
    int r = visit ? visit(out, nd, get) : -1;
    if (r < 0) {
      std::vector<int> ins;
      for (int v : nd.inputs) ins.push_back(get(v));
      r = out.add_node(nd.op, ins, nd.attrs.values(), nd.name);
    }
    map[nd.output] = r;
  }
  for (size_t i = 0; i < g.outputs().size(); ++i) out.add_output(get(g.outputs()[i]), g.output_names()[i]);
  return out;
}

}  // namespace

NDArray evaluate_node(const std::string& op, const ops::Attrs& attrs, const std::vector<NDArray>& inputs) {
  std::vector<te::Tensor> ph;
  for (size_t i = 0; i < inputs.size(); ++i)
    ph.push_back(te::placeholder("in" + std::to_string(i), inputs[i].shape(), inputs[i].dtype()));
  te::Tensor out = ops::apply_node(op, attrs, ph);
  LoweredFunc f = lower_default("fold_" + op, ph, {out});
  std::vector<NDArray> args = inputs;
  args.emplace_back(out.dtype(), out.shape());
  std::vector<NDArray*> ptrs;
  for (NDArray& a : args) ptrs.push_back(&a);
  interpret(f, ptrs);
  return args.back();
}

std::vector<NDArray> interpret_graph(const Graph& g, const std::vector<NDArray>& inputs) {
  if (inputs.size() != g.inputs().size())
    throw GraphError("network '" + g.name + "' takes " + std::to_string(g.inputs().size()) + " inputs, got " +
                     std::to_string(inputs.size()));
  std::vector<NDArray> vals(g.values().size());
  for (size_t v = 0; v < g.values().size(); ++v)
    if (g.values()[v].constant) vals[v] = g.values()[v].data;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Value& in = g.value(g.inputs()[i]);
    if (inputs[i].shape() != in.shape || inputs[i].dtype() != in.dtype)
      throw GraphError("input '" + in.name + "' expects " + in.dtype.str() + " " + shape_str(in.shape) + ", got " +
                       inputs[i].dtype().str() + " " + shape_str(inputs[i].shape()));
    vals[g.inputs()[i]] = inputs[i];
  }
  for (int n : g.topo_order()) {
    const Node& nd = g.node(n);
    std::vector<NDArray> ins;
    for (int v : nd.inputs) ins.push_back(vals[v]);
    vals[nd.output] = evaluate_node(nd.op, nd.attrs, ins);
  }
  std::vector<NDArray> out;
  for (int v : g.outputs()) out.push_back(vals[v]);
  return out;
}

Graph fold_constants(const Graph& g) {
  // Values known after folding: the source's constants, then folded nodes.
  std::unordered_map<int, const Value*> known;
  std::vector<Value> folded(g.values().size());
  for (size_t v = 0; v < g.values().size(); ++v)
    if (g.values()[v].constant) known[static_cast<int>(v)] = &g.values()[v];
  return rebuild(g, [&](Graph& out, const Node& nd, const std::function<int(int)>&) -> int {
    std::vector<const Value*> ins;
    for (int v : nd.inputs) {
      auto it = known.find(v);
      if (it == known.end()) return -1;
      ins.push_back(it->second);
    }
    Value& f = folded[nd.output];
    f = g.value(nd.output);
    try {
      std::vector<NDArray> data;
      for (const Value* v : ins) data.push_back(v->data);
      f.data = evaluate_node(nd.op, nd.attrs, data);
    } catch (const Error& e) {
      throw GraphError("folding constant node '" + nd.name + "' (" + nd.op + "): " + e.what());
    }
    f.constant = true;
    known[nd.output] = &f;
    return out.add_constant(nd.name, f.data);
  });
}

Graph fold_batch_norm(const Graph& g) {
  auto is_const = [&](int v) { return g.value(v).constant; };
  return rebuild(g, [&](Graph& out, const Node& bn, const std::function<int(int)>& get) -> int {
    if (bn.op != "batch_norm") return -1;
    for (int k = 1; k < 5; ++k)
      if (!is_const(bn.inputs[k])) return -1;
    int conv_out = bn.inputs[0];
    int p = g.value(conv_out).producer;
    if (p < 0 || g.consumers(conv_out).size() != 1) return -1;
    const Node& conv = g.node(p);
    bool transpose = conv.op == "conv2d_transpose";
    if (conv.op != "conv1d" && conv.op != "conv2d" && conv.op != "conv3d" && !transpose) return -1;
    if (!is_const(conv.inputs[1]) || (transpose && conv.attrs.i("groups") != 1)) return -1;
    bool outputs_conv = false;
    for (int o : g.outputs()) outputs_conv |= o == conv_out;
    if (outputs_conv) return -1;
    const NDArray& w = g.value(conv.inputs[1]).data;
    const NDArray &gamma = g.value(bn.inputs[1]).data, &beta = g.value(bn.inputs[2]).data,
                  &mean = g.value(bn.inputs[3]).data, &var = g.value(bn.inputs[4]).data;
    const int64_t oc = g.value(conv_out).shape[1];
    if (gamma.numel() != oc || w.dtype() != DType::f32()) return -1;
    const double eps = bn.attrs.f("epsilon");
    std::vector<double> scale(oc);
    NDArray bias(DType::f32(), {oc});
    for (int64_t c = 0; c < oc; ++c) {
      scale[c] = gamma.get(c) / std::sqrt(var.get(c) + eps);
      bias.set(c, beta.get(c) - mean.get(c) * scale[c]);
    }
    NDArray nw = w.clone();
    // Output channel of each weight element: dim 0 (conv) or dim 1 (transposed conv).
    const int64_t inner = w.numel() / (w.shape()[0] * (transpose ? w.shape()[1] : 1));
    for (int64_t i = 0; i < w.numel(); ++i) {
      int64_t c = transpose ? (i / inner) % w.shape()[1] : i / (w.numel() / w.shape()[0]);
      nw.set(i, w.get(i) * scale[c]);
    }
    std::vector<int64_t> bshape(g.value(conv_out).shape.size() - 1, 1);
    bshape[0] = oc;
    NDArray b2(DType::f32(), bshape);
    std::memcpy(b2.data(), bias.data(), bias.nbytes());
    int wv = out.add_constant(g.value(conv.inputs[1]).name + ".bn_folded", nw);
    int bv = out.add_constant(bn.name + ".bias", b2);
    int y = out.add_node(conv.op, {get(conv.inputs[0]), wv}, conv.attrs.values(), conv.name);
    return out.add_node("add", {y, bv}, {}, bn.name);
  });
}

namespace {

// The attention chain that ends at a batch_matmul whose first operand is a softmax.
struct AttentionMatch {
  int q = -1, k = -1, v = -1, mask = -1;
  double scale = 1;
  std::vector<int64_t> batch_shape;
};

bool is_scalar_constant(const Graph& g, int v) { return g.value(v).constant && g.value(v).numel() == 1; }

std::optional<AttentionMatch> match_attention(const Graph& g, const Node& bm2) {
  if (bm2.op != "batch_matmul") return std::nullopt;
  std::set<int> outputs(g.outputs().begin(), g.outputs().end());
  // The value v, read by its one consumer only, and produced by a node of `op` (or any
  // view, is_view_op, when op is "view").
  auto producer = [&](int v, const std::string& op) -> const Node* {
    if (outputs.count(v) || g.consumers(v).size() != 1) return nullptr;
    int p = g.value(v).producer;
    if (p < 0) return nullptr;
    const Node& n = g.node(p);
    return (op == "view" ? is_view_op(n.op) : n.op == op) ? &n : nullptr;
  };
  auto f32 = [&](int v) { return g.value(v).dtype == DType::f32(); };
  int probs = bm2.inputs[0];
  const Node* view2 = producer(probs, "view");
  if (view2) probs = view2->inputs[0];
  const Node* sm = producer(probs, "softmax");
  if (!sm) return std::nullopt;
  const std::vector<int64_t>& view = g.value(sm->output).shape;
  int rank = static_cast<int>(view.size());
  if (rank < 3 || (sm->attrs.i("axis") != -1 && sm->attrs.i("axis") != rank - 1)) return std::nullopt;
  AttentionMatch m;
  int x = sm->inputs[0];
  // The logits: (scores [* or / scalar]) [+ mask], each op keeping the scores' shape.
  if (const Node* add = producer(x, "add")) {
    for (int side = 0; side < 2; ++side) {
      int s = add->inputs[side], o = add->inputs[1 - side];
      if (g.value(s).shape != view || !f32(o) || g.value(o).shape.size() > view.size()) continue;
      if (g.value(s).producer < 0) continue;
      const std::string& sop = g.node(g.value(s).producer).op;
      if (sop != "mul" && sop != "div" && sop != "batch_matmul" && !is_view_op(sop)) continue;
      m.mask = o;
      x = s;
      break;
    }
    if (m.mask < 0) return std::nullopt;
  }
  const Node* mul = producer(x, "mul");
  const Node* div = mul ? nullptr : producer(x, "div");
  if (mul) {
    int side = is_scalar_constant(g, mul->inputs[1]) ? 1 : is_scalar_constant(g, mul->inputs[0]) ? 0 : -1;
    if (side < 0 || g.value(mul->inputs[1 - side]).shape != view) return std::nullopt;
    m.scale = g.value(mul->inputs[side]).data.get(0);
    x = mul->inputs[1 - side];
  } else if (div) {
    if (!is_scalar_constant(g, div->inputs[1]) || g.value(div->inputs[0]).shape != view) return std::nullopt;
    double d = g.value(div->inputs[1]).data.get(0);
    if (d == 0) return std::nullopt;
    m.scale = 1.0 / d;
    x = div->inputs[0];
  }
  if (!std::isfinite(m.scale)) return std::nullopt;
  const Node* view1 = producer(x, "view");
  if (view1) x = view1->inputs[0];
  const Node* bm1 = producer(x, "batch_matmul");
  if (!bm1) return std::nullopt;
  const std::vector<int64_t>& scores = g.value(bm1->output).shape;  // [B, L, S]
  if (view2 ? g.value(bm2.inputs[0]).shape != scores : view != scores) return std::nullopt;
  if (view[rank - 1] != scores[2] || view[rank - 2] != scores[1]) return std::nullopt;
  m.batch_shape.assign(view.begin(), view.end() - 2);
  m.q = bm1->inputs[0];
  m.k = bm1->inputs[1];
  m.v = bm2.inputs[1];
  for (int t : {m.q, m.k, m.v})
    if (!f32(t)) return std::nullopt;
  return m;
}

}  // namespace

Graph fuse_attention(const Graph& g) {
  bool any = false;
  Graph r = rebuild(g, [&](Graph& out, const Node& nd, const std::function<int(int)>& get) -> int {
    std::optional<AttentionMatch> m = match_attention(g, nd);
    if (!m) return -1;
    any = true;
    std::vector<int> ins = {get(m->q), get(m->k), get(m->v)};
    if (m->mask >= 0) ins.push_back(get(m->mask));
    std::map<std::string, ops::AttrValue> attrs = {{"scale", m->scale}};
    if (m->batch_shape.size() > 1) attrs["batch_shape"] = m->batch_shape;
    return out.add_node("attention", ins, attrs, nd.name);
  });
  return any ? eliminate_dead_code(r) : r;
}

namespace {

bool elementwise_op(const std::string& op) {
  try {
    return ops::find_op(op).family == "elementwise";
  } catch (const Error&) {
    return false;
  }
}

// The shape without its leading extents of 1.
std::vector<int64_t> core_shape(const std::vector<int64_t>& s) {
  size_t i = 0;
  while (i < s.size() && s[i] == 1) ++i;
  return std::vector<int64_t>(s.begin() + static_cast<std::ptrdiff_t>(i), s.end());
}

// `nd` computed on `moved` (its inputs viewed as `viewed`) and viewed back as `shape`;
// `source` maps the view to what it views. -1 when the inputs broadcast beyond `viewed`
// (the caller keeps the node; what was added is dead code).
int elementwise_viewed(Graph& out, const Node& nd, const std::vector<int>& moved, const std::vector<int64_t>& viewed,
                       const std::vector<int64_t>& shape, const std::string& suffix,
                       std::unordered_map<int, int>& source) {
  const int e = out.add_node(nd.op, moved, nd.attrs.values(), nd.name + suffix);
  if (out.value(e).shape != viewed) return -1;
  const int y = out.add_node("reshape", {e}, {{"new_shape", shape}}, nd.name);
  source[y] = e;
  return y;
}

}  // namespace

Graph sink_views(const Graph& g) {
  // source[v]: for a new value v made by a view that only adds or drops leading extents
  // of 1, the value it views.
  std::unordered_map<int, int> source;
  bool any = false;
  Graph r = rebuild(g, [&](Graph& out, const Node& nd, const std::function<int(int)>& get) -> int {
    if (is_view_op(nd.op)) {
      if (nd.inputs.size() != 1) return -1;
      const int x = get(nd.inputs[0]);
      const int y = out.add_node(nd.op, {x}, nd.attrs.values(), nd.name);
      auto it = source.find(x);
      const int from = it != source.end() ? it->second : x;
      if (core_shape(out.value(from).shape) == core_shape(out.value(y).shape) &&
          out.value(from).shape.size() != out.value(y).shape.size())
        source[y] = from;
      return y;
    }
    if (!elementwise_op(nd.op)) return -1;
    const std::vector<int64_t>& shape = g.value(nd.output).shape;
    std::vector<int> ins;
    for (int v : nd.inputs) ins.push_back(get(v));
    // The viewed shape: the first input's that is a view of the output's shape.
    std::vector<int64_t> core;
    for (int v : ins) {
      auto it = source.find(v);
      if (it != source.end() && out.value(v).shape == shape) {
        core = out.value(it->second).shape;
        break;
      }
    }
    if (core.empty() && !ins.empty()) return -1;
    if (core.size() >= shape.size()) return -1;  // only a view that added leading extents of 1
    // The rewrite below adds nodes the operators check; one they refuse leaves the node
    // as it was (what it added is dead code).
    try {
      std::vector<int> moved;
      for (int v : ins) {
        auto it = source.find(v);
        if (it != source.end() && out.value(it->second).shape == core) {
          moved.push_back(it->second);
          continue;
        }
        const std::vector<int64_t>& vs = out.value(v).shape;
        if (vs.size() <= core.size()) {  // numpy broadcasting aligns it within the core alike
          moved.push_back(v);
          continue;
        }
        const size_t extra = vs.size() - core.size();
        for (size_t d = 0; d < extra; ++d)
          if (vs[d] != 1) return -1;
        const std::vector<int64_t> inner(vs.begin() + static_cast<std::ptrdiff_t>(extra), vs.end());
        const std::string name = nd.name + ".in" + std::to_string(moved.size());
        if (out.value(v).constant) {  // a constant is stored in its new shape, never viewed
          moved.push_back(out.add_constant(name, out.value(v).data.reshaped(inner)));
        } else {
          moved.push_back(out.add_node("reshape", {v}, {{"new_shape", inner}}, name));
        }
      }
      const int y = elementwise_viewed(out, nd, moved, core, shape, ".core", source);
      any = any || y >= 0;
      return y;
    } catch (const GraphError&) {
      return -1;
    }
  });
  return any ? eliminate_dead_code(r) : g;
}

namespace {

// Whether two values are constants of the same type, shape and bytes.
bool same_constant(const Graph& g, int a, int b) {
  if (a == b) return g.value(a).constant;
  const Value &x = g.value(a), &y = g.value(b);
  if (!x.constant || !y.constant || x.dtype != y.dtype || x.shape != y.shape) return false;
  return x.data.nbytes() == y.data.nbytes() && std::memcmp(x.data.data(), y.data.data(), x.data.nbytes()) == 0;
}

// Whether a quantize_linear and a dequantize_linear (either order) use the same scale,
// zero point and axis.
bool same_quantization(const Graph& g, const Node& a, const Node& b) {
  if (!same_constant(g, a.inputs[1], b.inputs[1]) || !same_constant(g, a.inputs[2], b.inputs[2])) return false;
  return g.value(a.inputs[1]).numel() == 1 || a.attrs.i("axis") == b.attrs.i("axis");
}

bool is_graph_output(const Graph& g, int v) {
  return std::find(g.outputs().begin(), g.outputs().end(), v) != g.outputs().end();
}

}  // namespace

Graph fold_quantization(const Graph& g) {
  auto single_reader = [](const Graph& h, int v) { return h.consumers(v).size() == 1 && !is_graph_output(h, v); };
  auto producer = [](const Graph& h, int v, const char* op) -> const Node* {
    const int p = h.value(v).producer;
    return p >= 0 && h.node(p).op == op ? &h.node(p) : nullptr;
  };
  // quantize(max_pool2d(dequantize(x))), one positive scale: max_pool2d(x). First, so
  // that the pair the pooling's quantization starts is no longer one.
  const Graph pooled = rebuild(g, [&](Graph& out, const Node& nd, const std::function<int(int)>& get) -> int {
    if (nd.op != "quantize_linear") return -1;
    const Node* pool = producer(g, nd.inputs[0], "max_pool2d");
    if (!pool || !single_reader(g, pool->output)) return -1;
    const Node* dq = producer(g, pool->inputs[0], "dequantize_linear");
    if (!dq || !same_quantization(g, *dq, nd) || g.value(nd.inputs[1]).numel() != 1 ||
        !(g.value(nd.inputs[1]).data.get(0) > 0))
      return -1;
    const DType t = g.value(dq->inputs[0]).dtype;
    const bool full_range = (t == DType::u8() && nd.attrs.i("qmin") == 0 && nd.attrs.i("qmax") == 255) ||
                            (t == DType::i8() && nd.attrs.i("qmin") == -128 && nd.attrs.i("qmax") == 127);
    if (!full_range) return -1;
    return out.add_node("max_pool2d", {get(dq->inputs[0])}, pool->attrs.values(), pool->name);
  });
  // dequantize(quantize(x)) read by elementwise nodes: fake_quantize(x).
  const Graph& h = pooled;
  return rebuild(h, [&](Graph& out, const Node& nd, const std::function<int(int)>& get) -> int {
    if (nd.op != "dequantize_linear") return -1;
    const Node* q = producer(h, nd.inputs[0], "quantize_linear");
    if (!q || !single_reader(h, q->output) || !same_quantization(h, *q, nd)) return -1;
    const NDArray& zp = h.value(nd.inputs[2]).data;  // fake_quantize clamps its zero point
    for (int64_t k = 0; k < zp.numel(); ++k)
      if (zp.get_int(k) < q->attrs.i("qmin") || zp.get_int(k) > q->attrs.i("qmax")) return -1;
    for (int c : h.consumers(nd.output))
      if (!elementwise_op(h.node(c).op)) return -1;
    return out.add_node("fake_quantize", {get(q->inputs[0]), get(q->inputs[1]), get(q->inputs[2])}, q->attrs.values(),
                        nd.name);
  });
}

Graph eliminate_dead_code(const Graph& g) {
  std::vector<bool> live(g.values().size(), false);
  std::vector<int> order = g.topo_order();
  for (int v : g.outputs()) live[v] = true;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const Node& nd = g.node(*it);
    if (!live[nd.output]) continue;
    for (int v : nd.inputs) live[v] = true;
  }
  Graph out;
  out.name = g.name;
  std::unordered_map<int, int> map;
  for (int v : g.inputs()) map[v] = out.add_input(g.value(v).name, g.value(v).shape, g.value(v).dtype);
  auto get = [&](int v) {
    auto it = map.find(v);
    if (it != map.end()) return it->second;
    int nv = out.add_constant(g.value(v).name, g.value(v).data);
    map[v] = nv;
    return nv;
  };
  for (int n : order) {
    const Node& nd = g.node(n);
    if (!live[nd.output]) continue;
    std::vector<int> ins;
    for (int v : nd.inputs) ins.push_back(get(v));
    map[nd.output] = out.add_node(nd.op, ins, nd.attrs.values(), nd.name);
  }
  for (size_t i = 0; i < g.outputs().size(); ++i) out.add_output(get(g.outputs()[i]), g.output_names()[i]);
  return out;
}

namespace {
bool is_normalization(const std::string& op) { return op == "layer_norm" || op == "rms_norm"; }
}  // namespace

Graph store_activations_bf16(const Graph& g) {
  const Partition p = partition(g);
  const std::set<int> feeds_output = output_values(g);  // the network returns float32
  std::vector<bool> store(g.values().size(), false);
  for (const FusedGroup& fg : p.groups) {
    const int v = fg.output;
    if (fg.view || g.value(v).dtype != DType::f32() || feeds_output.count(v) || g.consumers(v).empty()) continue;
    // Winograd's transformed tiles amplify their rounding (docs/schedules.md).
    bool keep = false;
    for (int n : fg.nodes) keep |= g.node(n).op == "winograd_input" || g.node(n).op == "winograd_gemm";
    // A transformer's residual stream, what a normalization reads and writes: its
    // rounding at every layer would accumulate (BERT-base's error against float32 was
    // 1.6e-2 with it stored, 4.2e-3 without, as with every value float32).
    for (int n : fg.nodes) keep |= is_normalization(g.node(n).op);
    // Readers, through views; a matrix product's right operand is the one its bfloat16
    // sketches pack (from float32).
    std::vector<int> readers = g.consumers(v);
    std::vector<int> read_as = std::vector<int>(readers.size(), v);
    for (size_t i = 0; i < readers.size(); ++i) {
      const Node& nd = g.node(readers[i]);
      if (is_view_op(nd.op))
        for (int c : g.consumers(nd.output)) {
          readers.push_back(c);
          read_as.push_back(nd.output);
        }
      keep |= is_normalization(nd.op);
      if (nd.op == "dense" || nd.op == "matmul" || nd.op == "batch_matmul")
        for (size_t k = 1; k < nd.inputs.size(); ++k) keep |= nd.inputs[k] == read_as[i];
    }
    store[static_cast<size_t>(v)] = !keep;
  }
  return rebuild(g, [&](Graph& out, const Node& nd, const std::function<int(int)>& get) {
    if (!store[static_cast<size_t>(nd.output)]) return -1;
    std::vector<int> ins;
    for (int v : nd.inputs) ins.push_back(get(v));
    const int x = out.add_node(nd.op, ins, nd.attrs.values(), nd.name);
    return out.add_node("cast", {x}, {{"to", std::string("bfloat16")}}, nd.name.empty() ? "" : nd.name + ".bf16");
  });
}

Graph store_borders(const Graph& g) {
  const std::set<int> outputs(g.outputs().begin(), g.outputs().end());
  std::map<int, std::vector<int64_t>> border;  // the stored value (the cast's output) -> (p, q)
  std::set<int> readers;
  for (int n = 0; n < static_cast<int>(g.nodes().size()); ++n) {
    const Node& c = g.node(n);
    if (c.op != "conv2d_nchwc" || c.inputs.size() != 2) continue;
    const ops::Attrs& a = c.attrs;
    const ops::Check check("conv2d_nchwc");
    const std::vector<int64_t> pad = check.per_dim(a, "padding", 2, 0), one = {1, 1};
    if (a.i("groups") != 1 || a.i("pad_value") != 0 || check.per_dim(a, "stride", 2, 1) != one ||
        check.per_dim(a, "dilation", 2, 1) != one || (pad[0] == 0 && pad[1] == 0))
      continue;
    const int v = c.inputs[0];
    const Value& x = g.value(v);
    // Maps of 28x28 and more: on smaller ones the producer's longer rows and zeroed border
    // cost more than the copy saves (resnet18 untuned on the AMX host: its 56x56 pairs 15
    // us faster, its 14x14 ones 19 us and 7x7 ones 73 us slower).
    if (x.dtype != DType::bf16() || x.shape.size() != 5 || x.shape[4] != 32 || x.shape[2] * x.shape[3] < 28 * 28 ||
        outputs.count(v) || g.consumers(v).size() != 1 || x.producer < 0)
      continue;
    const Node& cast = g.node(x.producer);
    if (cast.op != "cast" || cast.inputs.size() != 1 || g.value(cast.inputs[0]).dtype != DType::f32() ||
        g.consumers(cast.inputs[0]).size() != 1 || outputs.count(cast.inputs[0]))
      continue;
    border[v] = pad;
    readers.insert(c.output);
  }
  if (border.empty()) return g;
  return rebuild(g, [&](Graph& out, const Node& nd, const std::function<int(int)>& get) -> int {
    if (auto it = border.find(nd.output); it != border.end()) {
      const int64_t p = it->second[0], q = it->second[1];
      const int padded = out.add_node("pad", {get(nd.inputs[0])},
                                      {{"pads", std::vector<int64_t>{0, 0, p, q, 0, 0, 0, p, q, 0}},
                                       {"mode", std::string("constant")},
                                       {"value", 0.0}},
                                      nd.name.empty() ? "" : nd.name + ".border");
      return out.add_node("cast", {padded}, nd.attrs.values(), nd.name);
    }
    if (!readers.count(nd.output)) return -1;
    std::map<std::string, ops::AttrValue> attrs = nd.attrs.values();
    attrs["padding"] = std::vector<int64_t>{0, 0};
    return out.add_node(nd.op, {get(nd.inputs[0]), get(nd.inputs[1])}, attrs, nd.name);
  });
}

Graph expand_powers(const Graph& g) {
  return rebuild(g, [&](Graph& out, const Node& nd, const std::function<int(int)>& get) -> int {
    if (nd.op != "pow" || nd.inputs.size() != 2) return -1;
    const Value &x = g.value(nd.inputs[0]), &c = g.value(nd.inputs[1]), &y = g.value(nd.output);
    if (!c.constant || !x.dtype.is_float() || x.shape != y.shape || c.numel() < 1) return -1;
    const double e = c.data.get(0);
    for (int64_t i = 1; i < c.numel(); ++i)
      if (c.data.get(i) != e) return -1;
    if (e != 2 && e != 3 && e != 4) return -1;
    const int v = get(nd.inputs[0]);
    const int sq = out.add_node("mul", {v, v}, {}, e == 2 ? nd.name : nd.name + ".square");
    if (e == 2) return sq;
    return out.add_node("mul", {sq, e == 3 ? v : sq}, {}, nd.name);
  });
}

Graph one_pixel_transposed_convs(const Graph& g) {
  // rows[v]: for a value of the new graph that views [N, O*KH*KW] rows as the
  // transposed convolution's [N, O, KH, KW], the rows (the product, or an elementwise
  // chain computed on it).
  std::unordered_map<int, int> rows;
  bool any = false;
  using I = std::vector<int64_t>;
  Graph r = rebuild(g, [&](Graph& out, const Node& nd, const std::function<int(int)>& get) -> int {
    if (nd.op == "conv2d_transpose" && nd.inputs.size() == 2) {
      const Value &x = g.value(nd.inputs[0]), &w = g.value(nd.inputs[1]), &y = g.value(nd.output);
      if (x.shape.size() != 4 || w.shape.size() != 4 || y.shape.size() != 4 || x.shape[2] != 1 || x.shape[3] != 1)
        return -1;
      const ops::ConvTransposeParams cp = ops::conv_transpose_params(nd.attrs);
      const std::vector<int64_t> zero = {0, 0}, one = {1, 1};
      if (cp.groups != 1 || cp.width_phases || cp.padding != zero || cp.output_padding != zero || cp.dilation != one)
        return -1;
      const int64_t n = x.shape[0], c = x.shape[1], o = w.shape[1], kh = w.shape[2], kw = w.shape[3];
      if (w.shape[0] != c || y.shape != I{n, o, kh, kw}) return -1;
      const int a = out.add_node("reshape", {get(nd.inputs[0])}, {{"new_shape", I{n, c}}}, nd.name + ".rows");
      const int b = out.add_node("reshape", {get(nd.inputs[1])}, {{"new_shape", I{c, o * kh * kw}}}, nd.name + ".cols");
      const int prod = out.add_node("matmul", {a, b}, {}, nd.name + ".product");
      const int v = out.add_node("reshape", {prod}, {{"new_shape", y.shape}}, nd.name);
      rows[v] = prod;
      any = true;
      return v;
    }
    // The elementwise chain after it (a bias, an activation) runs on the rows, its
    // constants broadcast to the map and stored as rows: it fuses into the product's
    // epilogue, which fusion never does across a view.
    if (!elementwise_op(nd.op) || nd.inputs.empty()) return -1;
    const std::vector<int64_t>& shape = g.value(nd.output).shape;
    std::vector<int> ins;
    for (int v : nd.inputs) ins.push_back(get(v));
    int from = -1;
    for (int v : ins) {
      auto it = rows.find(v);
      if (it != rows.end() && out.value(v).shape == shape) {
        from = it->second;
        break;
      }
    }
    if (from < 0) return -1;
    const I flat = out.value(from).shape;
    int64_t numel = 1;
    for (int64_t d : shape) numel *= d;
    constexpr int64_t kMaxConstant = 1 << 16;  // elements of a constant stored whole
    try {
      std::vector<int> moved;
      for (int v : ins) {
        auto it = rows.find(v);
        if (it != rows.end() && out.value(v).shape == shape) {
          moved.push_back(it->second);
          continue;
        }
        const Value& k = out.value(v);
        if (!k.constant || numel > kMaxConstant) return -1;
        const NDArray whole =
            k.shape == shape ? k.data
                             : evaluate_node("broadcast_to", ops::node_attrs("broadcast_to", {{"new_shape", shape}}), {k.data});
        moved.push_back(out.add_constant(nd.name + ".rows" + std::to_string(moved.size()), whole.reshaped(flat)));
      }
      return elementwise_viewed(out, nd, moved, flat, shape, ".rows", rows);
    } catch (const Error&) {  // an operator refused the rewrite: the node stays as it was
      return -1;
    }
  });
  return any ? eliminate_dead_code(r) : g;
}

Graph optimize(const Graph& g, int64_t layout_lanes, bool tiles) {
  const Graph folded =
      eliminate_dead_code(expand_powers(fold_constants(one_pixel_transposed_convs(fold_batch_norm(g)))));
  return plan_layouts(sink_views(fuse_attention(eliminate_dead_code(fold_quantization(folded)))), layout_lanes, tiles);
}

}  // namespace basin::graph
