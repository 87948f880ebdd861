#include "core/graph/model.h"

#include "core/graph/onnx_import.h"
#include "core/graph/zoo.h"

namespace basin::graph {

Graph load_model(const std::string& model, const ImportOptions& options) {
  if (model.rfind("zoo:", 0) == 0) {
    if (!options.shapes.empty())
      throw GraphError("'" + model + "' is a zoo network: its shapes are fixed (--shape applies to ONNX files)");
    return zoo_network(model.substr(4));
  }
  return import_onnx(model, options);
}

}  // namespace basin::graph
