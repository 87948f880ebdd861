// `basin quantize`: post-training quantization of an ONNX model (docs/user-guide.md,
// "Quantizing a model"). The model runs in float32 (compiled, untuned) on calibration
// inputs; the inputs of the products that the rule quantizes (graph::QuantizedProduct)
// get ranges, and the QDQ model is written from them (graph::write_qdq), which basin
// then imports, tunes and runs in int8 like any quantize_static file.
#pragma once

#include <string>
#include <vector>

#include "core/graph/onnx_import.h"
#include "core/ir/ndarray.h"

namespace basin::codegen {

struct QuantizeOptions {
  // Calibration samples: each one value per model input, in the model's input order.
  std::vector<std::vector<NDArray>> calibration;
  // "minmax" (the default: the extremes of every sample, as onnxruntime's quantize_static
  // calibrates by default, so that basin's file and the runtimes' agree on ranges; no
  // value of the samples saturates) or "percentile" (per sample the `percentile` and
  // 100 - `percentile` percentiles, averaged over the samples: outliers saturate, the
  // rest gets finer steps).
  std::string method = "minmax";
  double percentile = 99.99;
  graph::ImportOptions import;
};

struct QuantizeResult {
  int products = 0;                      // the products quantized
  std::vector<std::string> activations;  // their quantized inputs, calibrated
  std::vector<std::pair<float, float>> ranges;
};

// Calibrates the model at `in` and writes its QDQ form to `out`. Throws Error for no
// samples, a sample of the wrong count, shapes or types of inputs, an unknown method,
// or a model with nothing to quantize.
QuantizeResult quantize_model(const std::string& in, const std::string& out, const QuantizeOptions& o);
// The same quantization imported as a graph (the QDQ model written to a temporary file,
// removed after): what --precision int8 compiles. *result, where given, says what it did.
graph::Graph quantized_graph(const std::string& in, const QuantizeOptions& o, QuantizeResult* result = nullptr);

}  // namespace basin::codegen
