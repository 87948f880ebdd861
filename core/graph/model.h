// What MODEL means on the command line and in the C++ API: "zoo:NAME" (zoo.h) or the
// path of an ONNX file (onnx_import.h).
#pragma once

#include <string>

#include "core/graph/graph.h"
#include "core/graph/onnx_import.h"

namespace basin::graph {

// The network as built or imported, before the passes (passes.h: optimize). Throws
// NotFoundError for an unknown zoo name or a missing file, GraphError for a bad model.
// `options` fix an ONNX file's symbolic shapes (onnx_import.h); a zoo network takes none.
Graph load_model(const std::string& model, const ImportOptions& options = {});

}  // namespace basin::graph
