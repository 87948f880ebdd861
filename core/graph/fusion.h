// Fusion and task extraction (DESIGN.md, "Graph"). Nodes are grouped by the
// post-dominator rule: an anchor (conv, dense, matmul) or a reduction absorbs the
// chain of elementwise/broadcast nodes that follows it, as long as each value in
// the chain is read by the next node alone (so that the group's last node
// post-dominates the rest and nothing else needs the intermediate values); chains of
// injective nodes fuse together the same way. Reshape, flatten, squeeze and unsqueeze
// are views: they move no data and become no kernel. Each other group is a task
// (core/ops/subgraph.h); structurally identical groups are one task whose weight is
// the number of groups.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "core/graph/graph.h"
#include "core/ops/subgraph.h"

namespace basin::graph {

struct FusedGroup {
  std::vector<int> nodes;   // in order
  std::vector<int> inputs;  // values read from outside the group, in the task's input order
  int output = -1;          // the value the group produces
  int task = -1;            // index into Partition::tasks; -1 for a view
  bool view = false;        // no kernel: the output aliases inputs[0] (a reshape-like node, or a slice of
                            // one contiguous run of its input's elements)
  int64_t view_offset = 0;  // a view's first byte in inputs[0]'s storage
};

struct NetworkTask {
  std::string key;    // sched::task_key of the task
  std::string label;  // readable: "conv2d+add+relu [1, 64, 56, 56]"
  ops::OpGraph graph;
  int weight = 0;    // groups computing this task
  double flops = 0;  // of one run
  // The task's inputs (by index) that are constants in every group computing it: a
  // network's weights, whose repacking a compiled network runs once and a network's
  // tuning leaves out of the timing (core/ir/split_prologue.h).
  std::set<int> constant_inputs;
  // A group of it writes a network output (directly or through views): at a 16-bit
  // precision it keeps float32 products (sched::task_precision).
  bool writes_output = false;
};

struct Partition {
  std::vector<FusedGroup> groups;  // producers first
  std::vector<NetworkTask> tasks;
  // Set on several networks' tasks merged as one (search::merge_partitions: the buckets
  // of a shape range): the most bytes of constant inputs one run of one of them reads.
  // A merged task's weight counts its uses in every network, each run reads one.
  double run_constant_bytes = -1;
};

// True for the operators that only reinterpret their input's shape.
bool is_view_op(const std::string& op);
// The values a network output is, or is a view of.
std::set<int> output_values(const Graph& g);

Partition partition(const Graph& g);

}  // namespace basin::graph
