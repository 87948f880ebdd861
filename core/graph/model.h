// What MODEL means on the command line and in the C++ API: "zoo:NAME" (zoo.h) or the
// path of an ONNX file (onnx_import.h).
#pragma once

#include <string>

#include "core/graph/graph.h"

namespace basin::graph {

// The network as built or imported, before the passes (passes.h: optimize). Throws
// NotFoundError for an unknown zoo name or a missing file, GraphError for a bad model.
Graph load_model(const std::string& model);

}  // namespace basin::graph
