// Load a network (an ONNX file or zoo:NAME), tune it for a budget, compile it, save it,
// load it again and run it: basin's C++ API, <basin/basin.h> alone. Built against an
// installed basin by docs/examples/CMakeLists.txt, and in the tree by the tests
// (tests/tools/cpp_example_test.cc).    usage: tune_network MODEL [SECONDS]
#include <basin/basin.h>

#include <cstdio>
#include <cstdlib>
#include <string>

int main(int argc, char** argv) try {
  basin::Model model = basin::Model::load(argc > 1 ? argv[1] : "zoo:resnet18");
  basin::TuneOptions opt;
  opt.records = "example.db";  // every measured program; a rerun resumes
  opt.budget_seconds = argc > 2 ? std::atof(argv[2]) : 60;
  opt.on_progress = [](const basin::Progress& p) {
    std::fprintf(stderr, "\r%.0f s, %d programs", p.seconds, p.trials);
  };
  basin::TuningSession(model, opt).run();
  basin::Network compiled = basin::Network::compile(model, opt.records);
  compiled.save("example.basin");  // runs without the compiler
  basin::Network net = basin::Network::load("example.basin");
  basin::Tensor x = basin::Tensor::random(net.inputs()[0]);
  basin::Tensor y = net.run({x})[0];
  std::string shape;
  for (int64_t d : y.shape()) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
  std::printf("\n%s: output [%s], y[0] = %g, %.1f us per run, %d of %d tasks untuned\n", model.name().c_str(),
              shape.c_str(), y.at(0), net.time_us({x}), compiled.untuned_tasks(), model.tasks());
} catch (const std::exception& e) {
  std::fprintf(stderr, "tune_network: %s\n", e.what());
  return 1;
}
