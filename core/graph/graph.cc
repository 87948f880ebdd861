#include "core/graph/graph.h"

#include <cstring>
#include "core/util/checked.h"

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/topological_sort.hpp>

#include "core/ops/node_ops.h"

namespace basin::graph {

struct Graph::Adjacency {
  boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS> g;
  // Per value, the nodes that read it, in node order (each once): consumers() in
  // constant time, so that a pass asking it of every value stays linear.
  std::vector<std::vector<int>> readers;
};

Graph::Graph() : adj_(std::make_unique<Adjacency>()) {}
Graph::~Graph() = default;
Graph::Graph(const Graph& o)
    : name(o.name),
      adj_(std::make_unique<Adjacency>(*o.adj_)),
      values_(o.values_),
      nodes_(o.nodes_),
      inputs_(o.inputs_),
      outputs_(o.outputs_),
      output_names_(o.output_names_),
      by_name_(o.by_name_) {}
Graph& Graph::operator=(const Graph& o) {
  if (this != &o) *this = Graph(o);
  return *this;
}
Graph::Graph(Graph&&) noexcept = default;
Graph& Graph::operator=(Graph&&) noexcept = default;

int64_t Value::numel() const { return checked_product(shape); }

int Graph::new_value(Value v) {
  if (v.name.empty()) v.name = "v" + std::to_string(values_.size());
  if (by_name_.count(v.name)) {
    // Names must be unique; a repeated one gets a suffix.
    std::string base = v.name;
    for (int k = 1; by_name_.count(v.name); ++k) v.name = base + "." + std::to_string(k);
  }
  by_name_[v.name] = static_cast<int>(values_.size());
  values_.push_back(std::move(v));
  return static_cast<int>(values_.size()) - 1;
}

int Graph::add_input(const std::string& n, std::vector<int64_t> shape, DType dtype) {
  for (int64_t e : shape)
    if (e <= 0) throw GraphError("input '" + n + "': extents must be positive, got " + shape_str(shape));
  try {
    tensor_bytes(dtype, shape);  // a tensor that can exist here: every product of its extents fits
  } catch (const Error& e) {
    throw GraphError("input '" + n + "': " + e.what());
  }
  Value v;
  v.name = n;
  v.dtype = dtype;
  v.shape = std::move(shape);
  v.input = true;
  int id = new_value(std::move(v));
  inputs_.push_back(id);
  return id;
}

int Graph::add_constant(const std::string& n, NDArray data) {
  if (!data.defined()) throw GraphError("constant '" + n + "' has no data");
  Value v;
  v.name = n;
  v.dtype = data.dtype();
  v.shape = data.shape();
  v.data = std::move(data);
  v.constant = true;
  return new_value(std::move(v));
}

int Graph::add_node(const std::string& op, const std::vector<int>& inputs,
                    const std::map<std::string, ops::AttrValue>& attrs, const std::string& name) {
  Node nd;
  nd.name = name.empty() ? op + "_" + std::to_string(nodes_.size()) : name;
  nd.op = op;
  std::vector<te::Tensor> args;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i] < 0 || inputs[i] >= static_cast<int>(values_.size()))
      throw GraphError("node '" + nd.name + "' (" + op + "): input " + std::to_string(i) +
                       " is not a value of the graph");
    const Value& v = values_[inputs[i]];
    args.push_back(te::placeholder(v.name, v.shape, v.dtype));
  }
  te::Tensor out;
  try {
    nd.attrs = ops::node_attrs(op, attrs);
    out = ops::apply_node(op, nd.attrs, args);
    // The output is a tensor like any other: its size by the one rule that cannot wrap
    // (the compiled network's arena holds it). A Pad of 2^62 or an Expand to
    // [2^32, 2^32] is an error here, not a wrapped offset later.
    tensor_bytes(out.dtype(), out.shape());
  } catch (const Error& e) {
    std::string shapes;
    for (int v : inputs) shapes += (shapes.empty() ? "" : ", ") + shape_str(values_[v].shape);
    throw GraphError("node '" + nd.name + "' (" + op + ", inputs " + shapes + "): " + e.what());
  }
  nd.inputs = inputs;
  Value v;
  v.name = nd.name;
  v.dtype = out.dtype();
  v.shape = out.shape();
  v.producer = static_cast<int>(nodes_.size());
  nd.output = new_value(std::move(v));
  int id = static_cast<int>(boost::add_vertex(adj_->g));
  for (int in : inputs)
    if (values_[in].producer >= 0) boost::add_edge(values_[in].producer, id, adj_->g);
  if (adj_->readers.size() < values_.size()) adj_->readers.resize(values_.size());
  for (int in : inputs) {
    std::vector<int>& r = adj_->readers[static_cast<size_t>(in)];
    if (r.empty() || r.back() != id) r.push_back(id);
  }
  nodes_.push_back(std::move(nd));
  return nodes_.back().output;
}

void Graph::add_output(int v, const std::string& name) {
  if (v < 0 || v >= static_cast<int>(values_.size()))
    throw GraphError("output " + std::to_string(v) + " is not a value");
  outputs_.push_back(v);
  output_names_.push_back(name);
}

std::string Graph::output_name(size_t i) const {
  return output_names_.at(i).empty() ? values_.at(static_cast<size_t>(outputs_.at(i))).name : output_names_[i];
}

std::vector<int> Graph::consumers(int v) const {
  if (v < 0 || static_cast<size_t>(v) >= adj_->readers.size()) return {};
  return adj_->readers[static_cast<size_t>(v)];
}

std::vector<int> Graph::topo_order() const {
  std::vector<size_t> rev;
  try {
    boost::topological_sort(adj_->g, std::back_inserter(rev));
  } catch (const boost::not_a_dag&) {
    throw GraphError("graph '" + name + "' has a cycle");
  }
  return std::vector<int>(rev.rbegin(), rev.rend());
}

int Graph::find_value(const std::string& n) const {
  auto it = by_name_.find(n);
  return it == by_name_.end() ? -1 : it->second;
}

void Graph::share_constant(int v, const NDArray& same) {
  Value& val = values_.at(static_cast<size_t>(v));
  if (!val.constant || val.data.dtype() != same.dtype() || val.data.shape() != same.shape() ||
      std::memcmp(val.data.data(), same.data(), same.nbytes()) != 0)
    throw InternalError("share_constant: '" + val.name + "' is not a constant equal to the data given");
  val.data = same;
}

int64_t Graph::weight_bytes() const {
  int64_t b = 0;
  for (const Value& v : values_)
    if (v.constant) b += static_cast<int64_t>(v.data.nbytes());
  return b;
}

std::map<std::string, int> Graph::op_counts() const {
  std::map<std::string, int> m;
  for (const Node& n : nodes_) ++m[n.op];
  return m;
}

NDArray random_weight(std::vector<int64_t> shape, double bound, uint64_t seed) {
  return NDArray::random(DType::f32(), std::move(shape), -bound, bound, seed);
}

}  // namespace basin::graph
