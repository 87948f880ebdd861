// The model zoo (DESIGN.md, "Graph"): common networks built in C++ with the graph
// builder, with deterministic random weights (the same network on every run and
// machine), at batch 1 in float32. `basin ... zoo:NAME` names them.
#pragma once

#include <string>
#include <vector>

#include "core/graph/graph.h"

namespace basin::graph {

struct ZooEntry {
  std::string name;
  std::string summary;
};

const std::vector<ZooEntry>& zoo_networks();
// Throws NotFoundError listing the networks when the name is unknown.
Graph zoo_network(const std::string& name);

// The index-th of a fixed sequence of small random networks (a few convolution blocks,
// or a few transformer layers, with drawn widths and sizes): the same on every run and
// machine. Their tasks are training data for the estimators (`nets:N` in
// `basin estimator dataset`).
Graph random_network(uint64_t index);

// Helpers for building networks, shared by the zoo and the tests: each adds nodes to
// `g` and returns the output value; weights are deterministic in the seed counter.
class NetBuilder {
 public:
  NetBuilder(Graph& g, uint64_t seed) : g_(g), seed_(seed) {}
  Graph& graph() { return g_; }
  // A constant uniform in [-bound, bound), or [lo, hi).
  int weight(const std::string& name, std::vector<int64_t> shape, double bound);
  int uniform(const std::string& name, std::vector<int64_t> shape, double lo, double hi);
  int conv(int x, int64_t out_channels, std::vector<int64_t> kernel, std::vector<int64_t> stride,
           std::vector<int64_t> padding, int64_t groups = 1, bool bias = false);
  int conv_transpose(int x, int64_t out_channels, int64_t kernel, int64_t stride, int64_t padding);
  int batch_norm(int x);
  int op(const std::string& op, std::vector<int> inputs, const std::map<std::string, ops::AttrValue>& attrs = {});
  // x[M, K] -> [M, N], with bias.
  int dense(int x, int64_t n, bool bias = true);
  int layer_norm(int x);

 private:
  std::string next(const std::string& name);
  Graph& g_;
  uint64_t seed_;
  int counter_ = 0;
};

}  // namespace basin::graph
