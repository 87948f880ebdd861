// The ONNX importer (DESIGN.md, "Graph"): an .onnx file (opsets 11 to newest_onnx_opset())
// to a Graph. Each opset's operator rules come from libonnx, and for opset 18 and later
// from schemas generated from the pinned onnx package (onnx_schemas.inc).
// Initializers in raw, typed and external-data form; attributes; ONNX's own shape
// inference, whose shapes are checked against basin's node by node. Shape
// computations (Shape, Gather, Concat, Unsqueeze, Cast ... on constants) are evaluated
// at import. Bad input never crashes: a file that cannot be read, parsed or imported
// raises GraphError naming the file and the node or value at fault, and every
// unsupported operator is listed in one error.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/graph/graph.h"

namespace basin::graph {

// True when basin was built with libonnx.
bool onnx_enabled();
// The newest default-domain opset the importer reads: libonnx's or the generated
// schemas' (scripts/onnx_schemas.py), whichever is newer.
int newest_onnx_opset();

// Values for what the file leaves symbolic. A key is either an input's name (the value
// is its whole shape) or a symbolic dimension's name (`dim_param`; the value is one
// extent, used wherever the model names it). A key that names neither is an error,
// and so is a symbolic dimension left without a value.
struct ImportOptions {
  std::map<std::string, std::vector<int64_t>> shapes;
  // When set, receives the external-data files the model read (their resolved paths):
  // inputs of the command, which its output must never replace.
  std::vector<std::string>* files_read = nullptr;
};

Graph import_onnx(const std::string& path, const ImportOptions& options = {});

}  // namespace basin::graph
