#include "core/ops/subgraph.h"

#include <cstdio>
#include <map>
#include <sstream>

#include "core/ops/node_ops.h"
#include "core/ops/op_util.h"
#include "core/util/parse.h"

namespace basin::ops {

namespace {

std::vector<std::string> split_on(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string piece;
  std::istringstream is(s);
  while (std::getline(is, piece, sep)) out.push_back(piece);
  if (!s.empty() && s.back() == sep) out.push_back("");
  return out;
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

std::vector<int64_t> parse_ints(const std::string& s, const std::string& what) {
  std::vector<int64_t> v;
  if (s.empty()) return v;
  for (const std::string& p : split_on(s, ',')) {
    std::optional<int64_t> x = parse_int(p);
    if (!x) throw ParseError("subgraph: " + what + ": '" + p + "' is not an integer");
    v.push_back(*x);
  }
  return v;
}

// Floating-point operations of a DAG: two per multiply-add of a reduction, one per
// element otherwise.
double dag_flops(const std::vector<te::Tensor>& outputs) {
  double f = 0;
  for (const te::Op& op : te::topo_order(outputs)) {
    if (op->is_placeholder) continue;
    double n = 1;
    for (int64_t e : op->shape) n *= static_cast<double>(e);
    double r = 1;
    for (const te::IterVar& iv : op->reduce_axes) r *= static_cast<double>(iv.extent);
    f += op->reduce_axes.empty() ? n : 2 * n * r;
  }
  return f;
}

}  // namespace

std::string subgraph_to_string(const SubgraphSpec& s) {
  std::string out;
  for (const auto& in : s.inputs) {
    out += (out.empty() ? "" : ";") + in.name + ":" + in.dtype.str() + "[" + attr_to_string(in.shape) + "]@" +
           num(in.range.lo) + ":" + num(in.range.hi);
  }
  for (const auto& n : s.nodes) {
    out += ";" + n.name + "=" + n.op + "(";
    for (size_t i = 0; i < n.inputs.size(); ++i) out += (i ? "," : "") + n.inputs[i];
    out += "){";
    bool first = true;
    for (const auto& [k, v] : n.attrs.values()) {
      out += (first ? "" : "|") + k + "=" + attr_to_string(v);
      first = false;
    }
    out += "}";
  }
  return out;
}

SubgraphSpec parse_subgraph(const std::string& text) {
  SubgraphSpec s;
  for (const std::string& piece : split_on(text, ';')) {
    auto bad = [&](const std::string& why) { return ParseError("subgraph: '" + piece + "': " + why); };
    size_t eq = piece.find('=');
    size_t colon = piece.find(':');
    if (colon != std::string::npos && (eq == std::string::npos || colon < eq)) {
      if (!s.nodes.empty()) throw bad("inputs come before nodes");
      SubgraphSpec::Input in;
      in.name = piece.substr(0, colon);
      size_t lb = piece.find('[', colon), rb = piece.find(']', colon), at = piece.find('@', colon);
      if (lb == std::string::npos || rb == std::string::npos || rb < lb) throw bad("expected name:dtype[shape]@lo:hi");
      try {
        in.dtype = DType::parse(piece.substr(colon + 1, lb - colon - 1));
      } catch (const Error& e) {
        throw bad(e.what());
      }
      in.shape = parse_ints(piece.substr(lb + 1, rb - lb - 1), in.name + " shape");
      if (at != std::string::npos) {
        std::vector<std::string> r = split_on(piece.substr(at + 1), ':');
        if (r.size() != 2) throw bad("expected a range lo:hi");
        try {
          in.range = {std::stod(r[0]), std::stod(r[1])};
        } catch (const std::exception&) {
          throw bad("expected a range lo:hi");
        }
      }
      s.inputs.push_back(std::move(in));
      continue;
    }
    if (eq == std::string::npos) throw bad("expected an input name:dtype[shape] or a node name=op(inputs){attrs}");
    SubgraphSpec::Node n;
    n.name = piece.substr(0, eq);
    size_t lp = piece.find('(', eq), rp = piece.find(')', eq);
    size_t lb = piece.find('{', eq), rb = piece.rfind('}');
    if (lp == std::string::npos || rp == std::string::npos || lb == std::string::npos || rb == std::string::npos ||
        rp > lb)
      throw bad("expected name=op(inputs){attrs}");
    n.op = piece.substr(eq + 1, lp - eq - 1);
    if (!find_node_op(n.op)) throw bad("unknown graph operator '" + n.op + "'");
    std::string ins = piece.substr(lp + 1, rp - lp - 1);
    if (!ins.empty()) n.inputs = split_on(ins, ',');
    std::map<std::string, std::string> kv;
    std::string attrs = piece.substr(lb + 1, rb - lb - 1);
    if (!attrs.empty())
      for (const std::string& a : split_on(attrs, '|')) {
        size_t e = a.find('=');
        if (e == std::string::npos) throw bad("attribute '" + a + "' is not name=value");
        kv[a.substr(0, e)] = a.substr(e + 1);
      }
    n.attrs = parse_node_attrs(n.op, kv);
    s.nodes.push_back(std::move(n));
  }
  if (s.nodes.empty()) throw ParseError("subgraph: '" + text + "' has no node");
  return s;
}

OpGraph build_subgraph(const SubgraphSpec& s) {
  if (s.nodes.empty()) throw ParseError("subgraph: no node");
  std::map<std::string, te::Tensor> env;
  OpGraph g;
  for (const auto& in : s.inputs) {
    if (env.count(in.name)) throw ParseError("subgraph: input '" + in.name + "' is defined twice");
    te::Tensor t = te::placeholder(in.name, in.shape, in.dtype);
    env[in.name] = t;
    g.inputs.push_back(t);
    g.ranges.push_back(in.range);
  }
  te::Tensor last;
  for (const auto& n : s.nodes) {
    std::vector<te::Tensor> args;
    for (const std::string& a : n.inputs) {
      auto it = env.find(a);
      if (it == env.end())
        throw ParseError("subgraph: node '" + n.name + "' reads '" + a + "', defined nowhere before it");
      args.push_back(it->second);
    }
    if (env.count(n.name)) throw ParseError("subgraph: '" + n.name + "' is defined twice");
    last = apply_node(n.op, n.attrs, args);
    env[n.name] = last;
  }
  g.outputs = {last};
  g.flops = dag_flops(g.outputs);
  return g;
}

std::string subgraph_label(const SubgraphSpec& s, const OpGraph& g) {
  std::string l;
  for (const auto& n : s.nodes) l += (l.empty() ? "" : "+") + n.op;
  return l + " " + ints_str(g.outputs.at(0).shape());
}

}  // namespace basin::ops
