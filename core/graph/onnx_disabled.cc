// The ONNX importer when basin is built without libonnx: a clear error.
#include "core/graph/onnx_import.h"

namespace basin::graph {

bool onnx_enabled() { return false; }
int newest_onnx_opset() { return 0; }

Graph import_onnx(const std::string& path, const ImportOptions&) {
  throw GraphError("cannot import '" + path +
                   "': basin was built without libonnx (install libonnx-dev and reconfigure)");
}

}  // namespace basin::graph
