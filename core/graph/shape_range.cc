#include "core/graph/shape_range.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <unordered_map>

#include "core/util/hash.h"

namespace basin::graph {

std::string extents_str(const std::map<std::string, int64_t>& at) {
  std::string s;
  for (const auto& [d, e] : at) s += (s.empty() ? "" : ", ") + d + "=" + std::to_string(e);
  return s;
}

std::vector<int64_t> bucket_extents(int64_t lo, int64_t hi) {
  if (lo < 1 || hi < lo)
    throw GraphError("the range " + std::to_string(lo) + ".." + std::to_string(hi) + " is empty or not positive");
  std::vector<int64_t> out;
  for (int64_t p = 1; p < hi; p *= 2) {
    if (p >= lo) out.push_back(p);
    const int64_t mid = p * 3 / 2;  // 3 * 2^(k-1): from 24 on (p >= 16)
    if (p >= 16 && mid >= lo && mid < hi) out.push_back(mid);
  }
  out.push_back(hi);
  return out;
}

RangedAxes ranged_axes(const Graph& g, const std::map<std::string, int64_t>& at,
                       const std::map<std::string, Graph>& moved, const std::map<std::string, int64_t>& moved_to) {
  RangedAxes r;
  r.of_value.resize(g.values().size());
  for (size_t v = 0; v < g.values().size(); ++v) r.of_value[v].assign(g.value(static_cast<int>(v)).shape.size(), "");
  for (const auto& [dim, m] : moved) {
    const int64_t a = at.at(dim), b = moved_to.at(dim);
    auto differ = [&](const std::string& what) {
      throw GraphError("the model's graph changes with '" + dim + "' (" + std::to_string(a) + " against " +
                       std::to_string(b) + ": " + what +
                       "): basin compiles a range of shapes only for models whose operators do not depend on the "
                       "extent; give '" +
                       dim + "' one value");
    };
    if (m.values().size() != g.values().size() || m.nodes().size() != g.nodes().size())
      differ(std::to_string(g.nodes().size()) + " against " + std::to_string(m.nodes().size()) + " nodes");
    for (size_t n = 0; n < g.nodes().size(); ++n) {
      const Node &x = g.nodes()[n], &y = m.nodes()[n];
      if (x.op != y.op || x.inputs != y.inputs || x.output != y.output) differ("node '" + x.name + "'");
    }
    for (size_t v = 0; v < g.values().size(); ++v) {
      const std::vector<int64_t>&s = g.values()[v].shape, &t = m.values()[v].shape;
      if (s.size() != t.size()) differ("the rank of '" + g.values()[v].name + "'");
      for (size_t d = 0; d < s.size(); ++d) {
        if (s[d] == t[d]) continue;
        std::string& tag = r.of_value[v][d];
        tag = (tag.empty() && s[d] == a && t[d] == b) ? dim : "*";
      }
    }
  }
  return r;
}

std::string padding_mask_input(const std::string& dim) { return "basin_padding_mask." + dim; }

Graph mask_padded_positions(const Graph& g, const RangedAxes& axes, const std::map<std::string, int64_t>& at,
                            std::vector<std::string>* masked) {
  // The dimension a softmax node normalizes over, "" when none that a mask can cover.
  auto softmax_dim = [&](const Node& n) -> std::string {
    if (n.op != "softmax" && n.op != "log_softmax") return "";
    const std::vector<std::string>& tags = axes.of_value.at(n.inputs[0]);
    int64_t axis = n.attrs.i("axis");
    const int64_t rank = static_cast<int64_t>(tags.size());
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank) return "";
    const std::string& t = tags[static_cast<size_t>(axis)];
    return t == "*" ? "" : t;
  };
  std::vector<std::string> dims;
  for (const Node& n : g.nodes()) {
    const std::string d = softmax_dim(n);
    if (!d.empty() && std::find(dims.begin(), dims.end(), d) == dims.end()) dims.push_back(d);
  }
  if (masked) *masked = dims;
  if (dims.empty()) return g;

  Graph out;
  out.name = g.name;
  std::unordered_map<int, int> map;
  auto get = [&](int v) -> int {
    auto it = map.find(v);
    if (it != map.end()) return it->second;
    const Value& val = g.value(v);
    if (!val.constant) throw InternalError("mask_padded_positions: value '" + val.name + "' used before it is defined");
    return map[v] = out.add_constant(val.name, val.data);
  };
  for (int v : g.inputs()) map[v] = out.add_input(g.value(v).name, g.value(v).shape, g.value(v).dtype);
  std::map<std::string, int> mask;
  for (const std::string& d : dims) mask[d] = out.add_input(padding_mask_input(d), {at.at(d)}, DType::f32());
  // The model's own additive masks: value -> the softmax it feeds, rewritten there.
  std::set<int> outputs(g.outputs().begin(), g.outputs().end());
  for (int ni : g.topo_order()) {
    const Node& n = g.node(ni);
    std::vector<int> ins;
    for (int v : n.inputs) ins.push_back(get(v));
    const std::string d = softmax_dim(n);
    if (!d.empty() && g.value(n.inputs[0]).dtype == DType::f32()) {
      const std::vector<int64_t>& shape = g.value(n.inputs[0]).shape;
      int64_t axis = n.attrs.i("axis");
      if (axis < 0) axis += static_cast<int64_t>(shape.size());
      // The mask along `axis`: [extent, 1, ..., 1] (numpy broadcasting aligns trailing axes).
      int m = mask.at(d);
      if (axis + 1 < static_cast<int64_t>(shape.size())) {
        std::vector<int64_t> s(shape.size() - static_cast<size_t>(axis), 1);
        s[0] = at.at(d);
        m = out.add_node("reshape", {m}, {{"new_shape", s}}, padding_mask_input(d) + "." + n.name);
      }
      // The logits' producer an add of the model's own mask, read by this softmax
      // alone: the padding mask joins that mask (the add stays the attention's).
      const int x = n.inputs[0];
      const int p = g.value(x).producer;
      bool joined = false;
      if (p >= 0 && g.node(p).op == "add" && !outputs.count(x) && g.consumers(x).size() == 1) {
        const Node& add = g.node(p);
        for (int side = 0; side < 2 && !joined; ++side) {
          const int own = add.inputs[side];
          const Value& ov = g.value(own);
          if (ov.dtype != DType::f32() || ov.shape.size() > shape.size() || ov.shape == shape) continue;
          // The joined mask must broadcast to the logits like the model's own did.
          const size_t off = shape.size() - ov.shape.size();
          if (static_cast<size_t>(axis) < off) continue;
          const int own_mask = out.add_node("add", {get(own), m}, {}, padding_mask_input(d) + ".joined." + n.name);
          if (out.value(own_mask).shape.size() != ov.shape.size()) continue;
          // Rebuild the add with the joined mask in place of the model's.
          const int scores = get(add.inputs[1 - side]);
          const int logits = side == 1 ? out.add_node("add", {scores, own_mask}, {}, add.name + ".masked")
                                       : out.add_node("add", {own_mask, scores}, {}, add.name + ".masked");
          if (out.value(logits).shape != shape) continue;
          ins[0] = logits;
          joined = true;
        }
      }
      if (!joined) ins[0] = out.add_node("add", {ins[0], m}, {}, padding_mask_input(d) + "." + n.name);
    }
    map[n.output] = out.add_node(n.op, ins, n.attrs.values(), n.name);
  }
  for (size_t i = 0; i < g.outputs().size(); ++i) out.add_output(get(g.outputs()[i]), g.output_names()[i]);
  return out;
}

}  // namespace basin::graph

namespace basin::graph {

struct ConstantPool::Impl {
  std::unordered_multimap<uint64_t, NDArray> by_key;
};
ConstantPool::ConstantPool() : impl_(std::make_unique<Impl>()) {}
ConstantPool::~ConstantPool() = default;

namespace {

// A key of an array's contents: its dtype, shape and 4096 words spread over its bytes
// (equal arrays have equal keys; share() compares the bytes of arrays whose keys match).
uint64_t content_key(const NDArray& a) {
  uint64_t h = fnv1a(a.dtype().str());
  for (int64_t e : a.shape()) h = fnv1a(std::string_view(reinterpret_cast<const char*>(&e), sizeof e), h);
  const size_t n = a.nbytes();
  const char* p = static_cast<const char*>(a.data());
  const size_t words = n / 8, step = std::max<size_t>(1, words / 4096);
  for (size_t w = 0; w < words; w += step) h = fnv1a(std::string_view(p + 8 * w, 8), h);
  return fnv1a(std::string_view(p + 8 * words, n - 8 * words), h);
}

bool same_contents(const NDArray& a, const NDArray& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         (a.data() == b.data() || std::memcmp(a.data(), b.data(), a.nbytes()) == 0);
}

}  // namespace

void ConstantPool::share(NDArray& a) {
  if (a.nbytes() < 64) return;  // scalars: not worth a lookup
  const uint64_t k = content_key(a);
  auto [lo, hi] = impl_->by_key.equal_range(k);
  for (auto it = lo; it != hi; ++it)
    if (same_contents(it->second, a)) {
      a = it->second;
      return;
    }
  impl_->by_key.emplace(k, a);
}

void ConstantPool::share(Graph& g) {
  for (size_t v = 0; v < g.values().size(); ++v) {
    if (!g.values()[v].constant) continue;
    NDArray d = g.values()[v].data;
    const void* before = d.data();
    share(d);
    if (d.data() != before) g.share_constant(static_cast<int>(v), d);
  }
}

namespace {

bool same_structure(const Graph& a, const Graph& b) {
  if (a.values().size() != b.values().size() || a.nodes().size() != b.nodes().size() || a.inputs() != b.inputs() ||
      a.outputs() != b.outputs())
    return false;
  for (size_t n = 0; n < a.nodes().size(); ++n)
    if (a.nodes()[n].op != b.nodes()[n].op || a.nodes()[n].inputs != b.nodes()[n].inputs) return false;
  return true;
}

}  // namespace

RangedModel ranged_model(const std::function<Graph(const std::map<std::string, int64_t>&)>& import,
                         const std::vector<DimRange>& dims, ConstantPool& pool) {
  RangedModel r;
  r.dims = dims;
  if (dims.empty()) throw GraphError("ranged_model: no ranged dimension");
  std::map<std::string, int64_t> top;
  std::vector<std::vector<int64_t>> extents;
  for (const DimRange& d : dims) {
    if (!top.emplace(d.name, d.hi).second) throw GraphError("the range of '" + d.name + "' is given twice");
    for (const auto& [v, w] : d.value_weights)
      if (v < d.lo || v > d.hi || !(w >= 0) || !std::isfinite(w))
        throw GraphError("the weight of '" + d.name + "' = " + std::to_string(v) + ": values must lie in the range " +
                         std::to_string(d.lo) + ".." + std::to_string(d.hi) + " and weights be finite, not negative");
    extents.push_back(bucket_extents(d.lo, d.hi));
  }
  // A bucket's axes: its graph against the model imported with each dimension moved
  // by one (down where that stays above 1: a model's graph at an extent of 1 often
  // drops an operator), the first of those of the same structure.
  auto analyze = [&](const Graph& g, const std::map<std::string, int64_t>& at) {
    std::map<std::string, Graph> moved;
    std::map<std::string, int64_t> moved_to;
    for (const DimRange& d : dims) {
      const int64_t e = at.at(d.name);
      for (int64_t c : {e - 1, e + 1}) {
        if (c < 2) continue;
        std::map<std::string, int64_t> other = at;
        other[d.name] = c;
        Graph m = import(other);
        if (!same_structure(m, g)) continue;
        moved.emplace(d.name, std::move(m));
        moved_to[d.name] = c;
        break;
      }
      if (!moved.count(d.name))
        throw GraphError("the model's graph at " + extents_str(at) + " changes when '" + d.name +
                         "' moves by one: basin compiles a range of shapes only for models whose operators do not "
                         "depend on the extent");
    }
    return ranged_axes(g, at, moved, moved_to);
  };
  auto check_axes = [&](const std::vector<std::vector<std::string>>& all, const std::string& what,
                        const std::function<std::string(size_t)>& name) {
    for (size_t i = 0; i < all.size(); ++i)
      for (size_t a = 0; a < all[i].size(); ++a)
        if (all[i][a] == "*")
          throw GraphError(what + " '" + name(i) + "' axis " + std::to_string(a) +
                           " grows with a ranged dimension without being its extent (two dimensions flattened "
                           "into one, or an extent computed from one): basin pads and cuts along a dimension's own "
                           "axes only; give the dimensions one value");
  };
  // The top of every range first: it defines the inputs' and outputs' axes.
  Graph ref = import(top);
  RangedAxes ref_axes = analyze(ref, top);
  {
    const RangedAxes& axes = ref_axes;
    for (int v : ref.inputs()) r.input_axes.push_back(axes.of_value.at(static_cast<size_t>(v)));
    for (int v : ref.outputs()) r.output_axes.push_back(axes.of_value.at(static_cast<size_t>(v)));
    check_axes(r.input_axes, "input", [&](size_t i) { return ref.value(ref.inputs()[i]).name; });
    check_axes(r.output_axes, "output", [&](size_t i) { return ref.output_name(i); });
  }
  for (const DimRange& d : dims) {
    bool carried = false;
    for (const auto& t : r.input_axes) carried = carried || std::find(t.begin(), t.end(), d.name) != t.end();
    if (!carried)
      throw GraphError("no input of the model has an axis that is '" + d.name +
                       "': a call's extent of it could not be read from its inputs");
  }
  // Every combination of the bucket extents, the first dimension slowest. With one
  // ranged dimension, an extent whose graph changes when it moves by one (small
  // extents, where the importer folds what it computes) is left to the next bucket up.
  std::vector<size_t> k(dims.size(), 0);
  std::vector<std::vector<int64_t>> kept(dims.size());
  for (;;) {
    ShapeBucket b;
    for (size_t d = 0; d < dims.size(); ++d) b.at[dims[d].name] = extents[d][k[d]];
    const bool is_top = b.at == top;
    Graph g = is_top ? std::move(ref) : import(b.at);
    RangedAxes axes;
    bool ok = true;
    try {
      axes = is_top ? std::move(ref_axes) : analyze(g, b.at);
    } catch (const GraphError&) {
      if (dims.size() > 1 || b.at == top) throw;
      ok = false;
    }
    if (ok) {
      std::vector<std::vector<std::string>> in, out;
      for (int v : g.inputs()) in.push_back(axes.of_value.at(static_cast<size_t>(v)));
      for (int v : g.outputs()) out.push_back(axes.of_value.at(static_cast<size_t>(v)));
      if (in != r.input_axes || out != r.output_axes)
        throw GraphError("the axes of the model's inputs or outputs that carry its ranged dimensions differ at " +
                         extents_str(b.at) + " from those at " + extents_str(top));
      for (size_t d = 0; d < dims.size(); ++d)
        if (std::find(kept[d].begin(), kept[d].end(), extents[d][k[d]]) == kept[d].end())
          kept[d].push_back(extents[d][k[d]]);
      pool.share(g);
      std::vector<std::string> masked;
      b.graph = mask_padded_positions(g, axes, b.at, &masked);
      if (!r.buckets.empty() && masked != r.masks)
        throw GraphError("the softmaxes over ranged dimensions differ at " + extents_str(b.at) + " from those at " +
                         extents_str(r.buckets.front().at));
      r.masks = masked;
      r.buckets.push_back(std::move(b));
    }
    size_t d = dims.size();
    while (d > 0 && ++k[d - 1] == extents[d - 1].size()) k[--d] = 0;
    if (d == 0) break;
  }
  // Each bucket's weight: the values it serves, each counted 1/extent (relative to the
  // top of the range), multiplied over the dimensions.
  r.extents = kept;
  for (ShapeBucket& b : r.buckets) {
    double w = 1;
    for (size_t d = 0; d < dims.size(); ++d) {
      const std::vector<int64_t>& e = kept[d];
      const auto it = std::find(e.begin(), e.end(), b.at.at(dims[d].name));
      const int64_t from = it == e.begin() ? dims[d].lo : *(it - 1) + 1;
      double served = static_cast<double>(*it - from + 1);
      if (!dims[d].value_weights.empty()) {
        served = 0;
        for (auto v = dims[d].value_weights.lower_bound(from); v != dims[d].value_weights.end() && v->first <= *it; ++v)
          served += v->second;
      }
      w *= served * static_cast<double>(dims[d].hi) / static_cast<double>(*it);
    }
    b.weight = std::max<int64_t>(1, std::llround(std::min(w, 1e9)));
  }
  return r;
}

namespace {

// Copies the elements of the block `small` (of shape s) between it and the array `big`
// (of shape l, each extent >= s's), at equal indices.
void copy_block(const NDArray& small, NDArray& big, bool into_big, const NDArray& from_big) {
  const std::vector<int64_t>& s = small.shape();
  const std::vector<int64_t>& l = big.shape();
  const size_t eb = static_cast<size_t>(small.dtype().bytes());
  if (s.empty()) {
    if (into_big) std::memcpy(big.data(), small.data(), eb);
    else std::memcpy(const_cast<void*>(small.data()), from_big.data(), eb);
    return;
  }
  for (int64_t e : s)
    if (e == 0) return;
  const size_t rank = s.size();
  const size_t run = static_cast<size_t>(s.back()) * eb;
  std::vector<int64_t> idx(rank, 0);
  const char* src = static_cast<const char*>(into_big ? small.data() : from_big.data());
  char* dst = static_cast<char*>(into_big ? big.data() : const_cast<void*>(small.data()));
  for (int64_t row = 0;; ++row) {
    int64_t off_l = 0;
    for (size_t d = 0; d < rank; ++d) off_l = off_l * l[d] + idx[d];
    const size_t at_small = static_cast<size_t>(row) * run, at_big = static_cast<size_t>(off_l) * eb;
    if (into_big) std::memcpy(dst + at_big, src + at_small, run);
    else std::memcpy(dst + at_small, src + at_big, run);
    size_t d = rank - 1;
    while (d > 0 && ++idx[d - 1] == s[d - 1]) idx[--d] = 0;
    if (d == 0) break;
  }
}

void check_block(const std::vector<int64_t>& small, const std::vector<int64_t>& large, const char* what) {
  bool ok = small.size() == large.size();
  for (size_t d = 0; ok && d < small.size(); ++d) ok = small[d] >= 0 && small[d] <= large[d];
  if (!ok) throw InternalError(std::string(what) + ": a block of another rank or larger than the array");
}

}  // namespace

NDArray padding_mask(int64_t extent, int64_t n) {
  NDArray m(DType::f32(), {extent});
  for (int64_t k = 0; k < extent; ++k) m.as<float>()[k] = k < n ? 0.0f : -std::numeric_limits<float>::infinity();
  return m;
}

NDArray pad_array(const NDArray& a, const std::vector<int64_t>& shape) {
  check_block(a.shape(), shape, "pad_array");
  if (a.shape() == shape) return a;
  NDArray out(a.dtype(), shape);
  std::memset(out.data(), 0, out.nbytes());
  copy_block(a, out, true, out);
  return out;
}

void place_array(const NDArray& a, NDArray& big) {
  check_block(a.shape(), big.shape(), "place_array");
  if (a.dtype() != big.dtype()) throw InternalError("place_array: dtypes differ");
  copy_block(a, big, true, big);
}

NDArray cut_array(const NDArray& a, const std::vector<int64_t>& shape) {
  check_block(shape, a.shape(), "cut_array");
  if (a.shape() == shape) return a;
  NDArray out(a.dtype(), shape);
  NDArray big = a;
  copy_block(out, big, false, a);
  return out;
}

}  // namespace basin::graph
