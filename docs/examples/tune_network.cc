// Load a network (an ONNX file or zoo:NAME), tune it for a budget, compile it, run it
// and read its output: the C++ API of docs/user-guide.md. Built with basin and run by
// its tests (tests/tools/cpp_example_test.cc).    usage: tune_network MODEL [SECONDS]
#include <cstdio>
#include <cstdlib>

#include "codegen/network.h"
#include "core/graph/fusion.h"
#include "core/graph/model.h"
#include "core/graph/passes.h"
#include "search/network.h"

int main(int argc, char** argv) {
  using namespace basin;
  graph::Graph g = graph::optimize(graph::load_model(argc > 1 ? argv[1] : "zoo:resnet18"));
  graph::Partition tasks = graph::partition(g);  // fused subgraphs, identical ones merged
  search::RecordStore records("example.db");     // every measured program; a rerun resumes
  search::NetworkTuneOptions opt;
  opt.budget_seconds = argc > 2 ? std::atof(argv[2]) : 60;
  search::tune_network(tasks, records, opt);
  std::vector<int> untuned;
  auto programs = search::choose_programs(tasks, &records, "llvm", &untuned);
  codegen::CompiledNetwork net = codegen::CompiledNetwork::compile(g, tasks, programs);
  net.save("example.basin");  // codegen::CompiledNetwork::load runs it without the compiler
  const codegen::TensorInfo& in = net.inputs()[0];
  NDArray y = net.run({NDArray::random(in.dtype, in.shape, -1, 1, 0)})[0];
  std::printf("%s: output %s, y[0] = %g, %.1f us per run, %zu of %zu tasks untuned\n", net.name().c_str(),
              shape_str(y.shape()).c_str(), y.get(0), net.time({NDArray::random(in.dtype, in.shape, -1, 1, 0)}).min_us,
              untuned.size(), tasks.tasks.size());
}
