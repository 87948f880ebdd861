// libFuzzer target: the ONNX importer and the graph passes that follow it in `basin
// compile` (constant folding, fusion into tasks). Any bytes either import as a graph or
// are refused with basin::Error; nothing is read outside the model's folder (the model
// lies alone in a fresh folder, and external data that leaves it is refused).
#include <cstdint>

#include "core/graph/fusion.h"
#include "core/graph/model.h"
#include "core/graph/passes.h"
#include "core/util/error.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = basin::fuzz::write_input("model.onnx", data, size);
  try {
    basin::graph::Graph g = basin::graph::optimize(basin::graph::load_model(path));
    basin::graph::Partition p = basin::graph::partition(g);
    (void)p;
  } catch (const basin::Error& e) {
    basin::fuzz::refused(e);
  }
  return 0;
}
