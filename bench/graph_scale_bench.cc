// How loading a network scales with its size: the seconds of import (ONNX to graph),
// optimization (graph::optimize, the passes) and partition (fusion into kernels and
// tasks) of generated graphs of 1,000 to 100,000 nodes, and what each costs per node.
// Two shapes: a chain of Adds, each with a constant of its own (a hostile probe's
// case), and a deep MLP (MatMul, Add, Relu per layer). Prints a table, or one JSON
// object with --json; the target (100,000 nodes within 10 s) is printed as met or not,
// never a failure.
//
//   build/bin/graph_scale_bench [--json] [--nodes 1000,10000,100000]
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "bench/machine.h"
#include "core/graph/fusion.h"
#include "core/graph/onnx_import.h"
#include "core/graph/passes.h"
#include "tests/core/onnx_builder.h"

namespace {

using basin::testing::OnnxBuilder;
using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// A chain of n Adds of [1, 16] values, each adding a constant of its own.
OnnxBuilder add_chain(int n) {
  OnnxBuilder b(13, "add_chain");
  b.input("x", {1, 16});
  std::string prev = "x";
  for (int i = 0; i < n; ++i) {
    const std::string c = "c" + std::to_string(i), out = i + 1 == n ? "y" : "v" + std::to_string(i);
    b.init(c, {1, 16}, basin::testing::test_values(16, static_cast<uint32_t>(i % 97)));
    b.node("Add", {prev, c}, {out});
    prev = out;
  }
  b.output("y", {1, 16});
  return b;
}

// A deep MLP of 16 features: n / 3 layers of MatMul, Add (bias), Relu.
OnnxBuilder mlp(int n) {
  OnnxBuilder b(13, "mlp");
  b.input("x", {4, 16});
  std::string prev = "x";
  const int layers = std::max(1, n / 3);
  for (int i = 0; i < layers; ++i) {
    const std::string s = std::to_string(i);
    b.init("w" + s, {16, 16}, basin::testing::test_values(256, static_cast<uint32_t>(i % 89)));
    b.init("b" + s, {16}, basin::testing::test_values(16, static_cast<uint32_t>(i % 83)));
    b.node("MatMul", {prev, "w" + s}, {"m" + s});
    b.node("Add", {"m" + s, "b" + s}, {"a" + s});
    const std::string out = i + 1 == layers ? "y" : "r" + s;
    b.node("Relu", {"a" + s}, {out});
    prev = out;
  }
  b.output("y", {4, 16});
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace basin;
  bool json = false;
  std::vector<int> sizes = {1000, 10000, 100000};
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--json") == 0) {
      json = true;
    } else if (std::strcmp(argv[i], "--nodes") == 0 && i + 1 < argc) {
      sizes.clear();
      std::stringstream ss(argv[++i]);
      for (std::string x; std::getline(ss, x, ',');) sizes.push_back(std::stoi(x));
    } else {
      std::cerr << "usage: graph_scale_bench [--json] [--nodes N,N,...]\n";
      return 2;
    }
  }
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("basin_graph_scale_" + std::to_string(getpid()))).string();
  std::filesystem::create_directories(dir);
  nlohmann::json rows = nlohmann::json::array();
  if (!json)
    std::cout << "machine: " << bench::cpu_model() << ", " << std::thread::hardware_concurrency() << " cores\n"
              << "graph       nodes   import_s  optimize_s  partition_s  total_s  us/node  kernels\n";
  double largest_total = 0;
  int largest = 0;
  for (const char* shape : {"add_chain", "mlp"}) {
    for (int n : sizes) {
      const std::string path = dir + "/" + shape + ".onnx";
      (std::strcmp(shape, "mlp") == 0 ? mlp(n) : add_chain(n)).save(path);
      auto t0 = Clock::now();
      graph::Graph g = graph::import_onnx(path);
      const double import_s = since(t0);
      t0 = Clock::now();
      g = graph::optimize(g);
      const double optimize_s = since(t0);
      t0 = Clock::now();
      graph::Partition p = graph::partition(g);
      const double partition_s = since(t0);
      const double total = import_s + optimize_s + partition_s;
      const int nodes = std::strcmp(shape, "mlp") == 0 ? 3 * std::max(1, n / 3) : n;
      rows.push_back({{"graph", shape},
                      {"nodes", nodes},
                      {"import_seconds", import_s},
                      {"optimize_seconds", optimize_s},
                      {"partition_seconds", partition_s},
                      {"total_seconds", total},
                      {"kernels", p.groups.size()}});
      if (!json) {
        std::printf("%-10s %6d %10.3f %11.3f %12.3f %8.3f %8.1f %8zu\n", shape, nodes, import_s, optimize_s,
                    partition_s, total, 1e6 * total / nodes, p.groups.size());
        std::fflush(stdout);
      }
    }
  }
  std::filesystem::remove_all(dir);
  // The target: every graph of the largest size (within 1%: the MLP's layers are 3
  // nodes each) within 10 s.
  for (const auto& r : rows) largest = std::max(largest, r["nodes"].get<int>());
  for (const auto& r : rows)
    if (r["nodes"].get<int>() * 100 >= largest * 99)
      largest_total = std::max(largest_total, r["total_seconds"].get<double>());
  const bool met = largest_total <= 10.0;
  if (json) {
    std::cout << nlohmann::json{{"machine", bench::cpu_model()},
                                {"results", rows},
                                {"target", "the largest graph within 10 s"},
                                {"largest_nodes", largest},
                                {"largest_seconds", largest_total},
                                {"met", met}}
                     .dump(2)
              << "\n";
  } else {
    std::printf("target: %d nodes within 10 s: %s (%.2f s)\n", largest, met ? "met" : "NOT met", largest_total);
  }
  return 0;
}
