// Post-training quantization (codegen/quantize.h).
#include "codegen/quantize.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <unistd.h>

#include "codegen/network.h"
#include "core/graph/fusion.h"
#include "core/graph/layout.h"
#include "core/graph/onnx_quantize.h"
#include "core/graph/passes.h"
#include "core/schedule/sketch.h"
#include "core/util/output_file.h"

namespace basin::codegen {
namespace {

// The p-th percentile (0 to 100) of v (nearest rank).
float percentile_of(std::vector<float> v, double p) {
  if (v.empty()) return 0.0f;
  const size_t k = std::min(v.size() - 1, static_cast<size_t>(p / 100.0 * static_cast<double>(v.size() - 1) + 0.5));
  std::nth_element(v.begin(), v.begin() + static_cast<long>(k), v.end());
  return v[k];
}

}  // namespace

QuantizeResult quantize_model(const std::string& in, const std::string& out, const QuantizeOptions& o) {
  if (o.method != "minmax" && o.method != "percentile")
    throw Error("calibration method '" + o.method + "' is not known (minmax or percentile)");
  if (o.method == "percentile" && !(o.percentile > 50.0 && o.percentile <= 100.0))
    throw Error("the percentile must lie above 50 and at most 100, got " + std::to_string(o.percentile));
  if (o.calibration.empty()) throw Error("quantizing needs calibration inputs (at least one sample)");
  check_output_path(out, {in});
  const std::vector<graph::QuantizedProduct> products = graph::quantizable_products(in);
  if (products.empty())
    throw Error("'" + in + "' has no Conv, Gemm or MatMul with a float32 weight initializer to quantize");
  // The activations to calibrate, once each: graph inputs come from the samples, the
  // others become outputs of a copy of the model.
  std::vector<std::string> acts;
  for (const graph::QuantizedProduct& p : products)
    if (std::find(acts.begin(), acts.end(), p.activation) == acts.end()) acts.push_back(p.activation);
  const graph::Graph plain = graph::import_onnx(in, o.import);
  std::map<std::string, size_t> input_at;
  for (size_t i = 0; i < plain.inputs().size(); ++i) input_at[plain.value(plain.inputs()[i]).name] = i;
  std::vector<std::string> computed;
  for (const std::string& a : acts)
    if (!input_at.count(a)) computed.push_back(a);
  const std::string tmp =
      (std::filesystem::temp_directory_path() / ("basin_calibrate_" + std::to_string(getpid()) + ".onnx")).string();
  graph::Graph g;
  try {
    graph::write_with_outputs(in, computed, tmp);
    g = graph::import_onnx(tmp, o.import);
  } catch (...) {
    std::remove(tmp.c_str());
    throw;
  }
  std::remove(tmp.c_str());
  std::map<std::string, size_t> output_at;
  for (size_t i = 0; i < g.output_names().size(); ++i) output_at.emplace(g.output_names()[i], i);
  g = graph::optimize(g, graph::layout_lanes("llvm"));
  const graph::Partition part = graph::partition(g);
  std::vector<ProgramChoice> choices;
  for (const graph::NetworkTask& t : part.tasks) {
    const std::vector<sched::Sketch> s = sched::sketches_for(t.graph, "llvm", "");
    const sched::Sketch& k = s[sched::default_sketch(s)];
    choices.push_back({k.name, sched::default_config(k), false});
  }
  CompiledNetwork net = CompiledNetwork::compile(g, part, choices);
  // Each activation's values per sample.
  std::vector<std::vector<std::pair<float, float>>> per(acts.size());
  for (size_t n = 0; n < o.calibration.size(); ++n) {
    const std::vector<NDArray>& sample = o.calibration[n];
    if (sample.size() != plain.inputs().size())
      throw Error("calibration sample " + std::to_string(n + 1) + " has " + std::to_string(sample.size()) +
                  " inputs; the model takes " + std::to_string(plain.inputs().size()));
    const std::vector<NDArray> outs = net.run(sample);
    for (size_t a = 0; a < acts.size(); ++a) {
      const NDArray* x = nullptr;
      if (auto it = input_at.find(acts[a]); it != input_at.end()) {
        x = &sample[it->second];
      } else {
        x = &outs.at(output_at.at(acts[a]));
      }
      if (x->dtype() != DType::f32()) throw Error("'" + acts[a] + "' is not float32: it cannot be quantized");
      std::vector<float> v(x->as<float>(), x->as<float>() + x->numel());
      if (o.method == "minmax") {
        const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
        per[a].push_back(v.empty() ? std::pair{0.0f, 0.0f} : std::pair{*lo, *hi});
      } else {
        per[a].push_back({percentile_of(v, 100.0 - o.percentile), percentile_of(v, o.percentile)});
      }
    }
  }
  QuantizeResult r;
  std::map<std::string, std::pair<float, float>> ranges;
  for (size_t a = 0; a < acts.size(); ++a) {
    std::pair<float, float> range = per[a][0];
    if (o.method == "minmax") {
      for (const auto& [lo, hi] : per[a]) range = {std::min(range.first, lo), std::max(range.second, hi)};
    } else {
      double lo = 0, hi = 0;
      for (const auto& [l, h] : per[a]) {
        lo += l;
        hi += h;
      }
      range = {static_cast<float>(lo / static_cast<double>(per[a].size())),
               static_cast<float>(hi / static_cast<double>(per[a].size()))};
    }
    ranges[acts[a]] = range;
    r.activations.push_back(acts[a]);
    r.ranges.push_back(range);
  }
  graph::write_qdq(in, ranges, out);
  r.products = static_cast<int>(products.size());
  return r;
}

}  // namespace basin::codegen
