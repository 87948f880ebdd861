// The ONNX importer (DESIGN.md, "Graph"): an .onnx file (opsets 11 to 18) to a Graph.
// Initializers in raw, typed and external-data form; attributes; ONNX's own shape
// inference, whose shapes are checked against basin's node by node. Shape
// computations (Shape, Gather, Concat, Unsqueeze, Cast ... on constants) are evaluated
// at import. Bad input never crashes: a file that cannot be read, parsed or imported
// raises GraphError naming the file and the node or value at fault, and every
// unsupported operator is listed in one error.
#pragma once

#include <string>

#include "core/graph/graph.h"

namespace basin::graph {

// True when basin was built with libonnx.
bool onnx_enabled();

Graph import_onnx(const std::string& path);

}  // namespace basin::graph
