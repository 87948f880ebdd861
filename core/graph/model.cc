#include "core/graph/model.h"

#include "core/graph/onnx_import.h"
#include "core/graph/zoo.h"

namespace basin::graph {

Graph load_model(const std::string& model) {
  if (model.rfind("zoo:", 0) == 0) return zoo_network(model.substr(4));
  return import_onnx(model);
}

}  // namespace basin::graph
