// Post-training quantization (codegen/quantize.h).
#include "codegen/quantize.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <functional>
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

// The p-th percentile (0 to 100) of v (nearest rank); reorders v.
float percentile_of(std::vector<float>& v, double p) {
  if (v.empty()) return 0.0f;
  const size_t k = std::min(v.size() - 1, static_cast<size_t>(p / 100.0 * static_cast<double>(v.size() - 1) + 0.5));
  std::nth_element(v.begin(), v.begin() + static_cast<long>(k), v.end());
  return v[k];
}

// The model `write` writes to a temporary file, imported; the file removed either way.
graph::Graph import_written(const std::function<void(const std::string&)>& write, const graph::ImportOptions& io) {
  static std::atomic<int> count{0};
  const std::string tmp = (std::filesystem::temp_directory_path() /
                           ("basin_quantize_" + std::to_string(getpid()) + "_" + std::to_string(count++) + ".onnx"))
                              .string();
  try {
    write(tmp);
    graph::Graph g = graph::import_onnx(tmp, io);
    std::remove(tmp.c_str());
    return g;
  } catch (...) {
    std::remove(tmp.c_str());
    throw;
  }
}

// Calibrates the model at `in` (checking the options) and writes its QDQ form through
// write_qdq to `out`.
QuantizeResult quantize_to(const std::string& in, const std::string& out, const QuantizeOptions& o) {
  if (o.method != "minmax" && o.method != "percentile")
    throw Error("calibration method '" + o.method + "' is not known (minmax or percentile)");
  if (o.method == "percentile" && !(o.percentile > 50.0 && o.percentile <= 100.0))
    throw Error("the percentile must lie above 50 and at most 100, got " + std::to_string(o.percentile));
  if (o.calibration.empty()) throw Error("quantizing needs calibration inputs (at least one sample)");
  const graph::QuantizationPlan plan = graph::quantization_plan(in);
  if (plan.products.empty())
    throw Error("'" + in + "' has no Conv, Gemm or MatMul with a float32 weight initializer to quantize");
  for (size_t n = 0; n < o.calibration.size(); ++n)
    if (o.calibration[n].size() != plan.inputs.size())
      throw Error("calibration sample " + std::to_string(n + 1) + " has " + std::to_string(o.calibration[n].size()) +
                  " inputs; the model takes " + std::to_string(plan.inputs.size()));
  // The activations to calibrate, once each: graph inputs come from the samples, the
  // others become outputs of a copy of the model.
  std::vector<std::string> acts, computed;
  for (const graph::QuantizedProduct& p : plan.products)
    if (std::find(acts.begin(), acts.end(), p.activation) == acts.end()) acts.push_back(p.activation);
  std::vector<size_t> input_of(acts.size());  // each activation's model input, or inputs.size()
  for (size_t a = 0; a < acts.size(); ++a) {
    input_of[a] = static_cast<size_t>(std::find(plan.inputs.begin(), plan.inputs.end(), acts[a]) - plan.inputs.begin());
    if (input_of[a] == plan.inputs.size()) computed.push_back(acts[a]);
  }
  graph::Graph g =
      import_written([&](const std::string& tmp) { graph::write_with_outputs(in, computed, tmp); }, o.import);
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
  // Each activation's range per sample.
  std::vector<std::vector<std::pair<float, float>>> per(acts.size());
  for (const std::vector<NDArray>& sample : o.calibration) {
    const std::vector<NDArray> outs = net.run(sample);
    for (size_t a = 0; a < acts.size(); ++a) {
      const NDArray& x = input_of[a] < plan.inputs.size() ? sample[input_of[a]] : outs.at(output_at.at(acts[a]));
      if (x.dtype() != DType::f32()) throw Error("'" + acts[a] + "' is not float32: it cannot be quantized");
      const float* v = x.as<float>();
      if (x.numel() == 0) {
        per[a].push_back({0.0f, 0.0f});
      } else if (o.method == "minmax") {
        const auto [lo, hi] = std::minmax_element(v, v + x.numel());
        per[a].push_back({*lo, *hi});
      } else {
        std::vector<float> copy(v, v + x.numel());
        per[a].push_back({percentile_of(copy, 100.0 - o.percentile), percentile_of(copy, o.percentile)});
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
  r.products = static_cast<int>(plan.products.size());
  return r;
}

}  // namespace

QuantizeResult quantize_model(const std::string& in, const std::string& out, const QuantizeOptions& o) {
  check_output_path(out, {in});
  return quantize_to(in, out, o);
}

graph::Graph quantized_graph(const std::string& in, const QuantizeOptions& o, QuantizeResult* result) {
  QuantizeResult r;
  graph::Graph g = import_written([&](const std::string& tmp) { r = quantize_to(in, tmp, o); }, o.import);
  if (result) *result = std::move(r);
  return g;
}

}  // namespace basin::codegen
