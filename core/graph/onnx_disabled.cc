// The ONNX importer and quantizer when basin is built without libonnx: a clear error.
#include "core/graph/onnx_import.h"
#include "core/graph/onnx_quantize.h"

namespace basin::graph {

bool onnx_enabled() { return false; }
int newest_onnx_opset() { return 0; }

Graph import_onnx(const std::string& path, const ImportOptions&) {
  throw GraphError("cannot import '" + path +
                   "': basin was built without libonnx (install libonnx-dev and reconfigure)");
}

QuantizationPlan quantization_plan(const std::string& path) {
  throw GraphError("cannot quantize '" + path +
                   "': basin was built without libonnx (install libonnx-dev and reconfigure)");
}
void write_with_outputs(const std::string& path, const std::vector<std::string>&, const std::string&) {
  quantization_plan(path);
}
void write_qdq(const std::string& path, const std::map<std::string, std::pair<float, float>>&, const std::string&) {
  quantization_plan(path);
}

}  // namespace basin::graph
