// basin's post-training quantization of an ONNX model into the QDQ form that ONNX
// Runtime's quantize_static writes and basin's importer folds into integer operators
// (docs/user-guide.md, "Quantizing a model"). The calibration, which runs the model, is
// codegen/quantize.h's; this is the file side: which products are quantized, a copy of
// the model that exposes their inputs, and the QDQ model written from their ranges.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace basin::graph {

// The products the rule quantizes: a Conv, a Gemm (no transposed A, alpha and beta 1) or
// a MatMul whose weight (its second input) is a float32 initializer (a MatMul's of rank
// 2). Every other operator stays float32: normalizations, softmax, activations,
// additions, pooling, and products of two computed values (attention's), whose error
// would not average out over a constant weight's channels.
struct QuantizedProduct {
  std::string node;        // the node's name, or its first output's where it has none
  std::string op;          // Conv, Gemm or MatMul
  std::string activation;  // the float32 tensor quantized to uint8 at its first input
  std::string weight;      // the initializer quantized to int8 per output channel
  int64_t axis = 0;        // the weight's output-channel axis
  std::string bias;        // a Conv's or Gemm's one-dimensional float32 bias initializer, or ""
};
// What quantizing the model at `path` involves: its inputs (the graph inputs that are no
// initializers, in order) and its products, in node order. Throws GraphError for a file
// that cannot be read or parsed, or whose opset is below 13 (per-axis DequantizeLinear).
struct QuantizationPlan {
  std::vector<std::string> inputs;
  std::vector<QuantizedProduct> products;
};
QuantizationPlan quantization_plan(const std::string& path);

// The model at `path` written to `out` with `tensors` added to its outputs, for a
// calibration run to read them.
void write_with_outputs(const std::string& path, const std::vector<std::string>& tensors, const std::string& out);

// The QDQ model of `path` written to `out`: each product's activation quantized to uint8
// over its range (ranges[activation]: min and max, widened to include 0; scale
// (max - min) / 255, zero point round(-min / scale)), its weight to int8 per output
// channel and symmetric (zero point 0, scale max|w| / 127, values in [-127, 127],
// ties to even), its bias to int32 at the activation's scale times the weight's (zero
// point 0), each through a DequantizeLinear as quantize_static writes them. A product
// whose activation has no range is left float32.
void write_qdq(const std::string& path, const std::map<std::string, std::pair<float, float>>& ranges,
               const std::string& out);

}  // namespace basin::graph
