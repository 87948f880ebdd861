// The network graph (DESIGN.md, "Graph"): operator nodes and the tensor values
// between them, with shapes, dtypes, attributes and constant weights. Each node is a
// graph operator (core/ops/node_ops.h) with one output; its shape and dtype are
// inferred when it is added, from its inputs, by the same operator code that builds
// its tensor expression. The producer -> consumer structure is a Boost.Graph
// adjacency list (one vertex per node), which gives the topological order and finds
// cycles. Graphs are built forward (an input or constant, then nodes of existing
// values); passes (passes.h) return new graphs.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/ir/ndarray.h"
#include "core/ops/registry.h"
#include "core/util/error.h"

namespace basin::graph {

// A network that cannot be built or imported: names the node, value or file.
class GraphError : public Error {
 public:
  using Error::Error;
};

struct Value {
  std::string name;
  DType dtype = DType::f32();
  std::vector<int64_t> shape;
  int producer = -1;  // node index; -1 for inputs and constants
  NDArray data;       // a constant's contents (undefined otherwise)
  bool constant = false;
  bool input = false;
  int64_t numel() const;
};

struct Node {
  std::string name;
  std::string op;
  ops::Attrs attrs;
  std::vector<int> inputs;  // value indices
  int output = -1;          // value index
};

class Graph {
 public:
  Graph();
  ~Graph();
  Graph(const Graph&);
  Graph& operator=(const Graph&);
  Graph(Graph&&) noexcept;
  Graph& operator=(Graph&&) noexcept;

  std::string name = "network";

  int add_input(const std::string& name, std::vector<int64_t> shape, DType dtype = DType::f32());
  int add_constant(const std::string& name, NDArray data);
  // Adds op(inputs) and returns its output value. The name defaults to op_<index>.
  // Throws GraphError naming the node when the operator rejects its inputs.
  int add_node(const std::string& op, const std::vector<int>& inputs,
               const std::map<std::string, ops::AttrValue>& attrs = {}, const std::string& name = "");
  // An output, named as the model names it (an ONNX graph output's name; empty: the
  // value's name). Passes that rebuild a graph keep the names (output_name).
  void add_output(int value, const std::string& name = "");

  const std::vector<Value>& values() const { return values_; }
  const std::vector<Node>& nodes() const { return nodes_; }
  const Value& value(int v) const { return values_.at(v); }
  const Node& node(int n) const { return nodes_.at(n); }
  const std::vector<int>& inputs() const { return inputs_; }
  const std::vector<int>& outputs() const { return outputs_; }
  // Output i's name: as add_output was given it, else its value's.
  std::string output_name(size_t i) const;
  // As add_output was given them ("" where none was).
  const std::vector<std::string>& output_names() const { return output_names_; }
  // Nodes that read value v, in node order.
  std::vector<int> consumers(int v) const;
  // Node indices, producers first (Boost.Graph topological sort).
  std::vector<int> topo_order() const;
  // A value by name (-1 when none).
  int find_value(const std::string& name) const;

  // Makes constant v hold `same` (its dtype, shape and bytes: InternalError otherwise)
  // in place of its own copy: graphs of one model at several shapes share their weights.
  void share_constant(int v, const NDArray& same);

  // Constant bytes, and the number of nodes of each operator (for summaries).
  int64_t weight_bytes() const;
  std::map<std::string, int> op_counts() const;

 private:
  int new_value(Value v);
  struct Adjacency;
  std::unique_ptr<Adjacency> adj_;
  std::vector<Value> values_;
  std::vector<Node> nodes_;
  std::vector<int> inputs_, outputs_;
  std::vector<std::string> output_names_;
  std::map<std::string, int> by_name_;
};

// A deterministic initializer for zoo and test weights: uniform in [-bound, bound).
NDArray random_weight(std::vector<int64_t> shape, double bound, uint64_t seed);

}  // namespace basin::graph
