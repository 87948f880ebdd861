#include "core/graph/fusion.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <set>

#include "core/ops/node_ops.h"
#include "core/ops/operators.h"
#include "core/schedule/sketch.h"

namespace basin::graph {

namespace {

enum class Kind { Anchor, Reduction, Elementwise, Injective };

Kind kind_of(const std::string& op) {
  static const std::set<std::string> anchors = {"conv1d",       "conv2d",       "conv3d",       "conv2d_transpose",
                                                "dense",        "matmul",       "batch_matmul", "attention",
                                                "conv2d_nchwc", "winograd_gemm"};
  static const std::set<std::string> reductions = {
      "softmax",    "log_softmax", "layer_norm",        "rms_norm",         "sum", "mean", "max", "min",
      "max_pool2d", "avg_pool2d",  "global_avg_pool2d", "global_max_pool2d"};
  static const std::set<std::string> injective = {
      "transpose",    "concat", "slice",   "pad",     "to_nchwc", "from_nchwc", "gather",         "embedding",
      "broadcast_to", "resize", "reshape", "flatten", "squeeze",  "unsqueeze",  "winograd_input", "winograd_output"};
  if (anchors.count(op)) return Kind::Anchor;
  if (reductions.count(op)) return Kind::Reduction;
  if (injective.count(op)) return Kind::Injective;
  return Kind::Elementwise;  // binary ops, activations, batch_norm
}

struct Open {
  std::vector<int> nodes;
  Kind kind;
  int last_pos = 0;
  size_t inputs = 0;      // values read from outside the group (an upper bound: a value read twice counts twice)
  bool bordered = false;  // ends in a zero border (graph::store_borders): a cast may follow, nothing else
};

// A constant zero padding: the border of a value stored with it (graph::store_borders).
bool zero_border(const Node& nd) {
  return nd.op == "pad" && (!nd.attrs.has("mode") || nd.attrs.s("mode") == "constant") &&
         (!nd.attrs.has("value") || nd.attrs.f("value") == 0);
}

// A fused group's largest size: its operators, and the inputs they read from outside
// it. A longer chain (thousands of elementwise operators, each with a constant of its
// own) becomes several kernels: one kernel of them all would be one expression as deep
// as the chain and a function of as many arguments, which code generation handles in
// time and stack that grow faster than the chain. No network of the benchmark sets
// has a group near either bound.
constexpr size_t kMaxGroupNodes = 64;
constexpr size_t kMaxGroupInputs = 64;

// Values read by several nodes that all lie in one elementwise region of the value's shape,
// a region that closes again in a single value read from outside it (x * sigmoid(x),
// x + f(x)). Such a value, and every value inside its region, may be read by several nodes
// of one fused group: the whole region joins the group that computes the value.
std::vector<bool> closing_fanouts(const Graph& g, const std::set<int>& outputs) {
  constexpr size_t kMaxRegion = 16;
  std::vector<bool> ok(g.values().size(), false);
  for (size_t v = 0; v < g.values().size(); ++v) {
    const Value& val = g.value(static_cast<int>(v));
    if (val.producer < 0 || outputs.count(static_cast<int>(v)) || is_view_op(g.node(val.producer).op)) continue;
    auto inside_kind = [&](int n) {
      return kind_of(g.node(n).op) == Kind::Elementwise && g.value(g.node(n).output).shape == val.shape;
    };
    std::vector<int> frontier = g.consumers(static_cast<int>(v));
    if (frontier.size() < 2) continue;
    std::set<int> region;
    int sink = -1;
    bool failed = false;
    while (!failed && sink < 0) {
      for (int n : frontier) {
        if (!inside_kind(n)) {
          failed = true;
          break;
        }
        region.insert(n);
      }
      if (failed || region.size() > kMaxRegion) break;
      // Values of the region read outside it (or network outputs); the readers outside
      // that may join it. A value read by anything else can only be the sink.
      std::vector<int> escaping;
      std::set<int> next;
      for (int n : region) {
        const int out = g.node(n).output;
        bool escapes = outputs.count(out) > 0;
        for (int c : g.consumers(out))
          if (!region.count(c)) {
            escapes = true;
            if (inside_kind(c)) next.insert(c);
          }
        if (escapes) escaping.push_back(out);
      }
      if (escaping.empty()) break;
      if (escaping.size() == 1) {
        bool read_inside = false;
        for (int c : g.consumers(escaping[0])) read_inside |= region.count(c) > 0;
        if (read_inside) failed = true;
        else sink = escaping[0];
        break;
      }
      for (int e : escaping)
        if (outputs.count(e)) failed = true;
      if (next.empty()) failed = true;
      frontier.assign(next.begin(), next.end());
    }
    if (failed || sink < 0) continue;
    ok[v] = true;
    for (int n : region)
      if (g.node(n).output != sink) ok[g.node(n).output] = true;
  }
  return ok;
}

// Whether every node of a group is one of `ops`.
bool only_ops(const Graph& g, const std::vector<int>& nodes, const std::set<std::string>& ops) {
  for (int n : nodes)
    if (!ops.count(g.node(n).op)) return false;
  return true;
}

// Whether a group of elementwise nodes may become the producer of an anchor's data
// input: arithmetic cheap enough to compute again wherever the anchor reads it (a
// squeeze-and-excitation's channel scale before a projection convolution), or to stage
// once; the sketches choose.
bool cheap_prologue(const Graph& g, const std::vector<int>& nodes) {
  static const std::set<std::string> cheap = {"add", "sub", "mul", "div", "neg", "relu", "clip"};
  return only_ops(g, nodes, cheap);
}

// Whether a group of elementwise nodes may be computed inside the epilogue of an anchor
// that reads its value once per element: arithmetic and the (de)quantization of
// integers, no transcendental functions.
bool cheap_epilogue_operand(const Graph& g, const std::vector<int>& nodes) {
  static const std::set<std::string> cheap = [] {
    std::set<std::string> ops = {"add", "sub", "mul", "div", "neg", "relu", "clip", "cast", "round"};
    ops.insert({"quantize_linear", "dequantize_linear", "fake_quantize"});
    return ops;
  }();
  return only_ops(g, nodes, cheap);
}

// A slice whose elements are one contiguous run of its input's, at a 64-byte aligned
// offset: every axis before the last one it cuts of extent 1 in the result, that axis
// cut with step 1, every axis after it whole (a channel range of a batch-1 NCHW value,
// a row range). Returns the run's first byte, or -1 when the slice must copy. Such a
// slice is a view: its readers read the input's storage in place.
int64_t slice_view_offset(const Graph& g, const Node& nd) {
  if (nd.op != "slice" || nd.inputs.size() != 1) return -1;
  const Value& x = g.value(nd.inputs[0]);
  // A slice of a value stored in bfloat16 computes float32 (ops::apply_node): it copies.
  if (x.constant || g.value(nd.output).dtype != x.dtype || x.dtype.bytes() < 1) return -1;
  auto ints = [&](const char* k) { return nd.attrs.has(k) ? nd.attrs.ints(k) : std::vector<int64_t>{}; };
  const std::vector<int64_t>& in = x.shape;
  const ops::SliceBounds b = ops::slice_bounds(in, ints("starts"), ints("ends"), ints("axes"), ints("steps"));
  const auto r = static_cast<int64_t>(in.size());
  int64_t cut = -1;  // the last axis not taken whole
  for (int64_t d = 0; d < r; ++d)
    if (b.shape[d] != in[d] || b.begin[d] != 0 || (b.step[d] != 1 && in[d] > 1)) cut = d;
  if (cut >= 0 && b.step[cut] != 1 && b.shape[cut] > 1) return -1;
  for (int64_t d = 0; d < cut; ++d)
    if (b.shape[d] != 1) return -1;
  int64_t offset = 0, stride = x.dtype.bytes();
  for (int64_t d = r - 1; d >= 0; --d) {
    offset += b.begin[d] * stride;
    stride *= in[d];
  }
  return offset % 64 == 0 ? offset : -1;
}

}  // namespace

bool is_view_op(const std::string& op) { return ops::is_view_node(op); }

std::set<int> output_values(const Graph& g) {
  std::set<int> out;
  for (int v : g.outputs())
    while (out.insert(v).second && g.value(v).producer >= 0 && is_view_op(g.node(g.value(v).producer).op) &&
           !g.node(g.value(v).producer).inputs.empty())
      v = g.node(g.value(v).producer).inputs[0];
  return out;
}

Partition partition(const Graph& g) {
  std::vector<int> order = g.topo_order();
  std::vector<int> pos(g.nodes().size());
  for (size_t i = 0; i < order.size(); ++i) pos[order[i]] = static_cast<int>(i);
  std::set<int> outputs(g.outputs().begin(), g.outputs().end());

  std::vector<Open> groups;
  std::vector<int> group_of_value(g.values().size(), -1);  // the open group whose output a value is
  std::vector<bool> is_view;
  const std::vector<bool> fanout_ok = closing_fanouts(g, outputs);
  auto fits = [](const Open& G, const Node& nd) {
    return G.nodes.size() < kMaxGroupNodes && G.inputs + nd.inputs.size() - 1 <= kMaxGroupInputs;
  };
  for (int n : order) {
    const Node& nd = g.node(n);
    if (is_view_op(nd.op)) {
      // A view between two data movements (a channel shuffle's concat, reshape,
      // transpose, reshape) joins them: one kernel moves the data once. Anywhere else
      // a view never absorbs nor is absorbed.
      const int u = nd.inputs.empty() ? -1 : nd.inputs[0];
      const int gi = u < 0 ? -1 : group_of_value[u];
      const std::vector<int>& readers = g.consumers(nd.output);
      if (gi >= 0 && !is_view[gi] && groups[gi].kind == Kind::Injective && !outputs.count(u) &&
          g.consumers(u).size() == 1 && !outputs.count(nd.output) && readers.size() == 1 &&
          kind_of(g.node(readers[0]).op) == Kind::Injective && !is_view_op(g.node(readers[0]).op) &&
          fits(groups[gi], nd)) {
        Open& G = groups[gi];
        G.nodes.push_back(n);
        G.last_pos = pos[n];
        group_of_value[nd.output] = gi;
        continue;
      }
      groups.push_back({{n}, Kind::Injective, pos[n]});
      is_view.push_back(true);
      continue;
    }
    const Kind k = kind_of(nd.op);
    int join = -1;
    // Winograd's input transform reads every element of its input in up to four
    // overlapping tiles: a producer fused into it would be computed again per read.
    const bool starts_group = nd.op == "winograd_input";
    for (int v : nd.inputs) {  // a region closing a fan-out stays with the value it fans out from
      int gi = group_of_value[v];
      if (fanout_ok[v] && gi >= 0 && !is_view[gi] && !starts_group && fits(groups[gi], nd)) {
        join = gi;
        break;
      }
    }
    for (int v : nd.inputs) {
      if (join >= 0 || starts_group) break;
      int gi = group_of_value[v];
      if (gi < 0 || is_view[gi] || outputs.count(v) || g.consumers(v).size() != 1 || !fits(groups[gi], nd)) continue;
      const Open& G = groups[gi];
      bool same_shape = g.value(nd.output).shape == g.value(v).shape;
      bool ok = false;
      if (G.bordered) ok = nd.op == "cast" && same_shape;
      else if (G.kind == Kind::Anchor) ok = (k == Kind::Elementwise && same_shape) || zero_border(nd);
      else if (G.kind == Kind::Reduction) ok = k == Kind::Elementwise && same_shape;
      else
        ok = k == Kind::Elementwise || k == Kind::Injective || (k == Kind::Reduction && v == nd.inputs[0]) ||
             (k == Kind::Anchor && v == nd.inputs[0] && cheap_prologue(g, G.nodes));
      if (ok) {
        join = gi;
        break;
      }
    }
    if (join < 0) {
      groups.push_back({{n}, k, pos[n], nd.inputs.size()});
      is_view.push_back(false);
      join = static_cast<int>(groups.size()) - 1;
    } else {
      Open& G = groups[join];
      G.nodes.push_back(n);
      G.last_pos = pos[n];
      G.inputs += nd.inputs.size() - 1;  // one of them is the group's own value
      if (k == Kind::Reduction) G.kind = Kind::Reduction;
      if (k == Kind::Anchor) G.kind = Kind::Anchor;
      if (G.kind == Kind::Anchor && zero_border(nd)) G.bordered = true;
      // the group's old output is now internal
      if (G.kind == Kind::Anchor && k == Kind::Elementwise) {
        // The node's other operands made by a cheap elementwise group of their own
        // (a residual's dequantization): computed in the epilogue where it reads them,
        // instead of written whole in float32 by a kernel of their own and read back.
        for (int v : nd.inputs) {
          const int gi = group_of_value[v];
          if (gi < 0 || gi == join || is_view[gi] || groups[gi].kind != Kind::Elementwise || outputs.count(v) ||
              g.consumers(v).size() != 1 || g.value(v).shape != g.value(nd.output).shape ||
              !cheap_epilogue_operand(g, groups[gi].nodes) ||
              G.nodes.size() + groups[gi].nodes.size() > kMaxGroupNodes ||
              G.inputs + groups[gi].inputs > kMaxGroupInputs)
            continue;
          Open& P = groups[gi];
          for (int m : P.nodes) group_of_value[g.node(m).output] = join;
          G.nodes.insert(G.nodes.end(), P.nodes.begin(), P.nodes.end());
          std::sort(G.nodes.begin(), G.nodes.end(), [&](int a, int b) { return pos[a] < pos[b]; });
          G.inputs += P.inputs - 1;
          P.nodes.clear();  // absorbed: no kernel
        }
      }
    }
    group_of_value[nd.output] = join;
  }

  std::vector<int> idx(groups.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int>(i);
  std::sort(idx.begin(), idx.end(), [&](int a, int b) { return groups[a].last_pos < groups[b].last_pos; });

  const std::set<int> feeds_output = output_values(g);

  Partition p;
  std::map<std::string, int> task_by_key;
  for (int gi : idx) {
    const Open& G = groups[gi];
    if (G.nodes.empty()) continue;  // absorbed by another group
    FusedGroup fg;
    fg.nodes = G.nodes;
    fg.output = g.node(G.nodes.back()).output;
    std::set<int> inside;
    for (int n : G.nodes) inside.insert(g.node(n).output);
    ops::SubgraphSpec spec;
    std::map<int, std::string> names;
    for (int n : G.nodes) {
      const Node& nd = g.node(n);
      ops::SubgraphSpec::Node sn;
      sn.op = nd.op;
      sn.attrs = nd.attrs;
      std::vector<te::Tensor> ph;
      for (int v : nd.inputs) ph.push_back(te::placeholder(g.value(v).name, g.value(v).shape, g.value(v).dtype));
      for (size_t k = 0; k < nd.inputs.size(); ++k) {
        int v = nd.inputs[k];
        if (!names.count(v)) {
          if (inside.count(v)) throw InternalError("fusion: group reads its own value before computing it");
          names[v] = "x" + std::to_string(fg.inputs.size());
          fg.inputs.push_back(v);
          ops::SubgraphSpec::Input in;
          in.name = names[v];
          in.dtype = g.value(v).dtype;
          in.shape = g.value(v).shape;
          in.range = ops::node_input_range(nd.op, nd.attrs, static_cast<int>(k), ph);
          spec.inputs.push_back(in);
        }
        sn.inputs.push_back(names[v]);
      }
      sn.name = "t" + std::to_string(spec.nodes.size());
      names[nd.output] = sn.name;
      spec.nodes.push_back(std::move(sn));
    }
    const int64_t slice_offset =
        !is_view[gi] && G.nodes.size() == 1 && !outputs.count(fg.output) ? slice_view_offset(g, g.node(G.nodes[0])) : -1;
    if (is_view[gi] || slice_offset >= 0) {
      fg.view = true;
      fg.view_offset = std::max<int64_t>(slice_offset, 0);
      p.groups.push_back(std::move(fg));
      continue;
    }
    std::string text = ops::subgraph_to_string(spec);
    ops::OpGraph task = ops::build_op("subgraph", {{"graph", text}});
    std::string key = sched::task_key(task);
    auto it = task_by_key.find(key);
    if (it == task_by_key.end()) {
      NetworkTask t;
      t.key = key;
      t.label = ops::subgraph_label(spec, task);
      t.flops = task.flops;
      t.graph = std::move(task);
      it = task_by_key.emplace(key, static_cast<int>(p.tasks.size())).first;
      p.tasks.push_back(std::move(t));
    }
    // The task's constant inputs: the first group's, less any another group reads as a
    // variable.
    NetworkTask& nt = p.tasks[it->second];
    auto constant = [&](size_t i) { return g.value(fg.inputs[i]).constant; };
    if (nt.weight == 0) {
      for (size_t i = 0; i < fg.inputs.size(); ++i)
        if (constant(i)) nt.constant_inputs.insert(static_cast<int>(i));
    } else {
      for (auto i = nt.constant_inputs.begin(); i != nt.constant_inputs.end();)
        i = constant(static_cast<size_t>(*i)) ? std::next(i) : nt.constant_inputs.erase(i);
    }
    nt.writes_output = nt.writes_output || feeds_output.count(fg.output) > 0;
    ++nt.weight;
    fg.task = it->second;
    p.groups.push_back(std::move(fg));
  }
  return p;
}

}  // namespace basin::graph
