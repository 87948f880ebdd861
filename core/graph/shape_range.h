// Ranges of shapes (docs/networks.md, "Ranges of shapes"): a model whose symbolic
// dimensions (ONNX dim_param: batch, sequence_length) take any value in a range is
// compiled as a small set of shape buckets, each a network of fixed shapes, and a
// dispatcher that runs a call of extent n on the least bucket >= n: its inputs padded,
// its outputs cut back to n. Padding is exact when no real position reads a padded
// one: the graph of each bucket gets, per ranged dimension that a softmax normalizes
// over, an input of 0 (real) and -inf (padded) added to the softmax's logits, so that
// a padded key weighs exactly 0; every other operator that would mix positions along a
// ranged axis (a reduction over it, a convolution along it) makes padding inexact,
// which the compiler checks (codegen/ranged.h) and refuses with the node named.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/graph/graph.h"

namespace basin::graph {

// A symbolic dimension's range of values, lo..hi (1 <= lo <= hi).
struct DimRange {
  std::string name;
  int64_t lo = 1, hi = 1;
  // The distribution of the calls' values (value -> weight, each in lo..hi, weights not
  // negative; values not listed weigh 0): `--shape-weights`. Empty: uniform.
  std::map<int64_t, double> value_weights;
};

// "sequence_length=128, batch=4".
std::string extents_str(const std::map<std::string, int64_t>& at);

// The bucket extents of a range: the ladder 1, 2, 4, 8, 16, 24, 32, 48, 64, 96, ...
// (powers of two, and from 16 on also 3 * 2^k: two per octave, so that padding costs
// at most a third of a bucket's positions) inside [lo, hi), and hi itself.
std::vector<int64_t> bucket_extents(int64_t lo, int64_t hi);

// Which ranged dimension each axis of each value grows with. Built from the graph
// imported at one set of values and imported again with each dimension moved alone:
// "" a fixed axis, the dimension's name for an axis whose extent is that dimension's
// value, "*" for one that grows otherwise (two dimensions flattened into one, n - 1).
struct RangedAxes {
  std::vector<std::vector<std::string>> of_value;  // per value of the graph, per axis
};

// `g` imported at `at` (each ranged dimension's value); `moved[d]` the same model
// imported with dimension d alone at another value, moved_to[d]. Throws GraphError
// when the graphs differ in structure (the model's operators depend on the extent).
RangedAxes ranged_axes(const Graph& g, const std::map<std::string, int64_t>& at,
                       const std::map<std::string, Graph>& moved, const std::map<std::string, int64_t>& moved_to);

// The name of the input that masks dimension `dim`'s padded positions.
std::string padding_mask_input(const std::string& dim);

// `g` with the padding masks: for every softmax (and log-softmax) whose axis is a
// ranged dimension's, an input padding_mask_input(dim) of shape [extent] (float32; the
// run fills it: 0 for real positions, -inf for padded ones) added to its logits along
// that axis (into the model's own additive mask where it has one, so that the
// attention pattern still fuses). `masked` receives the dimensions given a mask, in the
// order of the inputs added (after the model's own inputs).
Graph mask_padded_positions(const Graph& g, const RangedAxes& axes, const std::map<std::string, int64_t>& at,
                            std::vector<std::string>* masked);

// Constants by their contents: share() makes each constant of a graph that equals one
// seen before (dtype, shape, bytes) hold that one's data, so that the graphs of one
// model at many shapes keep one copy of its weights.
class ConstantPool {
 public:
  ConstantPool();
  ~ConstantPool();
  void share(Graph& g);
  void share(NDArray& a);  // the same for one array

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// One bucket: the model at one extent of each ranged dimension.
struct ShapeBucket {
  std::map<std::string, int64_t> at;
  // Its weight in the task scheduler: the values of each dimension it serves (those
  // above the next smaller bucket, up to its own), each counted by its weight in the
  // distribution (1 when uniform) and in proportion to 1 / the bucket's extent (scaled
  // by the top of the range: served x hi / extent), multiplied over the dimensions; at
  // least 1. Tuning then minimizes the mean over the range, uniform, of a
  // call's latency per position: a short call counts as much as a long one relative
  // to its size (uniform values alone would leave the short calls' buckets, whose
  // kernels cost little, almost untuned).
  int64_t weight = 1;
  Graph graph;  // imported at `at`, the padding masks added (mask_padded_positions), before optimize
};

struct RangedModel {
  std::vector<DimRange> dims;
  // Each dimension's bucket extents: bucket_extents' ladder less the extents whose graph
  // differs in structure from the model's at the top of the range (served by the next).
  std::vector<std::vector<int64_t>> extents;
  std::vector<ShapeBucket> buckets;  // every combination of the dimensions' bucket extents, the first dimension slowest
  // Per model input and output, per axis: the ranged dimension it carries ("" fixed).
  std::vector<std::vector<std::string>> input_axes, output_axes;
  std::vector<std::string> masks;  // the dimensions of the buckets' mask inputs (after the model's inputs)
};

// The model (`import` gives its graph with each ranged dimension at the values asked)
// over the ranges `dims`: the buckets' graphs, their constants shared through `pool`.
// Throws GraphError for a dimension no input carries, an input or output axis that
// grows with a dimension other than as its extent, or a graph whose structure depends
// on the extent.
RangedModel ranged_model(const std::function<Graph(const std::map<std::string, int64_t>&)>& import,
                         const std::vector<DimRange>& dims, ConstantPool& pool);

// The mask input of a bucket of extent `extent` for a call of extent n: float32, 0 at
// positions below n, -inf from n on.
NDArray padding_mask(int64_t extent, int64_t n);

// `a` in a larger array of `shape` (each extent >= a's), its elements at the same
// indices, the rest zero.
NDArray pad_array(const NDArray& a, const std::vector<int64_t>& shape);
// Writes `a` into the leading block of `big` (each extent >= a's).
void place_array(const NDArray& a, NDArray& big);
// The leading block of `a` of `shape` (each extent <= a's).
NDArray cut_array(const NDArray& a, const std::vector<int64_t>& shape);

}  // namespace basin::graph
