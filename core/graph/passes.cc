#include "core/graph/passes.h"

#include <cmath>
#include <cstring>
#include <functional>
#include <unordered_map>

#include "core/ir/interpreter.h"
#include "core/ir/lower.h"
#include "core/ops/node_ops.h"

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
  for (int v : g.outputs()) out.add_output(get(v));
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
  for (int v : g.outputs()) out.add_output(get(v));
  return out;
}

Graph optimize(const Graph& g) { return eliminate_dead_code(fold_constants(fold_batch_norm(g))); }

}  // namespace basin::graph
