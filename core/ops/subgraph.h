// A fused task as text: the subgraph of a network that fusion (core/graph/fusion.h)
// turns into one kernel, written so that it names the task in records and can be
// rebuilt from that name alone. The registry operator "subgraph" (attribute "graph")
// builds a task from it, so a fused task is tuned, recorded, measured and checked
// against LibTorch like any operator of the library.
//
//   x0:f32[1,64,56,56]@-1:1;x1:f32[64,64,3,3]@-1:1;t0=conv2d(x0,x1){dilation=1,1|groups=1|padding=1,1|stride=1,1};t1=relu(t0)
//
// Inputs (name, dtype, shape, the range random test values come from), then nodes in
// order, each a graph operator (node_ops.h) of earlier names; the last node's value
// is the task's output.
#pragma once

#include <string>
#include <vector>

#include "core/ops/registry.h"

namespace basin::ops {

struct SubgraphSpec {
  struct Input {
    std::string name;
    DType dtype = DType::f32();
    std::vector<int64_t> shape;
    InputRange range;
  };
  struct Node {
    std::string op;
    Attrs attrs;
    std::vector<std::string> inputs;  // names of inputs or earlier nodes
    std::string name;
  };
  std::vector<Input> inputs;
  std::vector<Node> nodes;
};

std::string subgraph_to_string(const SubgraphSpec& s);
// Throws ParseError naming the piece that is malformed.
SubgraphSpec parse_subgraph(const std::string& text);
// The task: placeholders for the inputs, the nodes applied in order. Throws OpError
// when a node rejects its inputs.
OpGraph build_subgraph(const SubgraphSpec& s);
// A short readable name: the operators joined by '+' and the output shape.
std::string subgraph_label(const SubgraphSpec& s, const OpGraph& g);

}  // namespace basin::ops
