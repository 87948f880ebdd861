// Graph operators: the operator library applied to tensors that already exist, as the
// nodes of a network (core/graph) and of a fused task (subgraph.h) use it. Each has a
// name shared with the registry operator of the same computation (so that the
// LibTorch executor and the registry's input ranges apply to both), typed attributes
// without the shape parameters (shapes come from the inputs), and a builder from input
// tensors to one output tensor.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/ops/registry.h"

namespace basin::ops {

struct NodeOpDef {
  OpDef def;  // name, summary and attribute specs (def.build is unused)
  int min_inputs = 1, max_inputs = 1;
  std::function<te::Tensor(const Attrs&, const std::vector<te::Tensor>&)> build;
};

// Every graph operator, in a stable order.
const std::vector<NodeOpDef>& all_node_ops();
// Null when unknown.
const NodeOpDef* find_node_op(const std::string& name);

// The attributes of a node: defaults filled in, unknown names rejected (OpError).
Attrs node_attrs(const std::string& op, const std::map<std::string, AttrValue>& given);
// Attributes parsed from their text forms (attr_to_string), as in subgraph specs.
Attrs parse_node_attrs(const std::string& op, const std::map<std::string, std::string>& given);

// The node's output computed from `inputs` (which fixes its shape and dtype). Throws
// OpError for an unknown operator, a wrong number of inputs or incompatible shapes.
// bfloat16 is a storage type (a network's activations between kernels at --precision
// bf16, graph::store_activations_bf16): every operator but the views reads such an
// input as float32 (a cast stage of its own, inlined where it is read); a view keeps it.
te::Tensor apply_node(const std::string& op, const Attrs& attrs, const std::vector<te::Tensor>& inputs);

// Where random test values of input `index` of a node should come from: the registry
// operator's range (positive divisors, valid indices, ...), or [-1, 1).
// Whether `op` only reinterprets its input's shape (reshape, flatten, squeeze, unsqueeze).
bool is_view_node(const std::string& op);

InputRange node_input_range(const std::string& op, const Attrs& attrs, int index,
                            const std::vector<te::Tensor>& inputs);

}  // namespace basin::ops
