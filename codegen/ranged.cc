#include "codegen/ranged.h"

#include <algorithm>
#include <cstdio>

#include "codegen/torch_executor.h"

namespace basin::codegen {

namespace {

// The infos of a graph's inputs (index bounds included), for random_inputs.
std::vector<TensorInfo> input_infos(const graph::Graph& g) {
  std::vector<TensorInfo> infos;
  for (int v : g.inputs())
    infos.push_back({g.value(v).name, g.value(v).dtype, g.value(v).shape, input_index_bound(g, v), false});
  return infos;
}

// The largest |a - b| over the largest |b| of each output pair, and the output where.
std::pair<double, size_t> worst(const std::vector<NDArray>& a, const std::vector<NDArray>& b) {
  std::pair<double, size_t> w{0, 0};
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const double e = a[i].shape() != b[i].shape() ? 1e300 : compare_arrays(a[i], b[i]).max_rel;
    if (e > w.first) w = {e, i};
  }
  return w;
}

}  // namespace

Accuracy check_ranged(const graph::RangedModel& rm, CompiledNetwork& net,
                      const std::function<graph::Graph(const std::map<std::string, int64_t>&)>& import) {
  Accuracy acc;
  acc.note = "random inputs at each bucket's least extents";
  const size_t n_in = rm.input_axes.size();
  for (const graph::ShapeBucket& bk : rm.buckets) {
    // The least extents the bucket serves: one above the next smaller bucket's.
    std::map<std::string, int64_t> n;
    for (size_t di = 0; di < rm.dims.size(); ++di) {
      const graph::DimRange& d = rm.dims[di];
      const std::vector<int64_t>& ladder = rm.extents[di];
      const auto it = std::find(ladder.begin(), ladder.end(), bk.at.at(d.name));
      n[d.name] = it == ladder.begin() ? d.lo : *(it - 1) + 1;
    }
    const std::string where = "bucket " + graph::extents_str(bk.at) + ", a call of " + graph::extents_str(n);
    const graph::Graph g = import(n);
    const std::vector<NDArray> in = random_inputs(input_infos(g));
    std::vector<NDArray> ref, zeros, noise;
    try {
      ref = TorchExecutor(g).run(in);
      // The bucket's graph on the call padded with zeros, and with random values.
      const TorchExecutor tb(bk.graph);
      std::vector<NDArray> pz, pr = random_inputs(input_infos(bk.graph));
      for (size_t i = 0; i < n_in; ++i) {
        pz.push_back(graph::pad_array(in[i], pr[i].shape()));
        graph::place_array(in[i], pr[i]);
      }
      for (size_t k = 0; k < rm.masks.size(); ++k) {
        pz.push_back(graph::padding_mask(bk.at.at(rm.masks[k]), n.at(rm.masks[k])));
        pr[n_in + k] = pz.back();
      }
      zeros = tb.run(pz);
      noise = tb.run(pr);
    } catch (const Error& e) {
      acc.measured = false;
      acc.note = std::string("padding and accuracy not checked: no float32 reference (") + e.what() + ")";
      return acc;
    }
    for (std::vector<NDArray>* outs : {&zeros, &noise})
      for (size_t o = 0; o < outs->size(); ++o) {
        std::vector<int64_t> shape = (*outs)[o].shape();
        for (size_t a = 0; a < shape.size(); ++a)
          if (!rm.output_axes[o][a].empty()) shape[a] = n.at(rm.output_axes[o][a]);
        (*outs)[o] = graph::cut_array((*outs)[o], shape);
      }
    // One error naming the bucket, the output and the size of the difference.
    auto refuse = [&](size_t o, double by, const std::string& before, const std::string& after) {
      char num[64];
      std::snprintf(num, sizeof num, "%.3g", by);
      throw Error("padding is not exact (" + where + "): output '" + net.outputs()[o].name + "' " + before + num +
                  " of its largest value" + after + "; give the dimension one value");
    };
    if (auto [d, o] = worst(noise, zeros); d > 1e-6)
      refuse(o, d, "at the real positions changes with the values of the padded ones (by ",
             "): the model mixes positions along a ranged axis other than through a softmax (a reduction over it, a "
             "convolution along it)");
    if (auto [d, o] = worst(zeros, ref); d > 1e-4)
      refuse(o, d, "of the padded call differs from the model's at the call's extents by ",
             " (an extent the model computes with, such as a mean over the axis)");
    const Accuracy a = measure_accuracy(g, net, in, acc.note);
    if (!a.measured) return a;
    acc.max_rel = std::max(acc.max_rel, a.max_rel);
    acc.max_abs = std::max(acc.max_abs, a.max_abs);
  }
  acc.measured = true;
  return acc;
}

}  // namespace basin::codegen
