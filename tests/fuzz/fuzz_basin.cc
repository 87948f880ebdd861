// libFuzzer target: the compiled-network loader (basin run NET.basin). A .basin holds
// machine code, and loading one runs it as the user (docs/networks.md, "Trust"): what
// is fuzzed is everything around the code. The input is the file's JSON header; the
// target puts it in a file with the code and weights of a small network compiled at
// start-up and a correct SHA-256 (without one, every input stops at the digest). The
// kernels keep their own code: a header's kernel is pointed back at a real kernel's
// bytes and parameter list (the sizes its code reads and writes), since loading machine
// code is the trusted step. Every header
// either loads a network that runs or is refused with basin::Error.
#include <cstring>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "codegen/llvm_jit.h"
#include "codegen/network.h"
#include "core/graph/fusion.h"
#include "core/graph/graph.h"
#include "core/graph/model.h"
#include "core/graph/passes.h"
#include "core/schedule/sketch.h"
#include "core/util/error.h"
#include "core/util/sha256.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

using namespace basin;

// The network every input is loaded around: the seed corpus's model
// (tests/fuzz/corpus/onnx/conv_relu.onnx) compiled untuned, as `basin compile` does. Its
// blobs are laid out weights first, so the weights' offsets in a header do not depend
// on the size of the machine code (which varies with the CPU): the seed header from
// tests/fuzz/make_corpus.py is valid on any machine.
struct Compiled {
  std::string magic;       // the bytes before the size
  nlohmann::json kernels;  // each kernel's offset, size and parameters in `blobs`
  std::string blobs;       // the weights, then each kernel's code
};

const Compiled& compiled() {
  static const Compiled c = [] {
    graph::Graph g = graph::optimize(graph::load_model(BASIN_SOURCE_DIR "/tests/fuzz/corpus/onnx/conv_relu.onnx"));
    graph::Partition p = graph::partition(g);
    std::vector<codegen::ProgramChoice> choices;
    for (const auto& t : p.tasks) {
      std::vector<sched::Sketch> s = sched::cpu_sketches(t.graph);
      choices.push_back({s[0].name, sched::default_config(s[0]), false});
    }
    const std::string path = (fuzz::work_dir() / "seed.basin").string();
    codegen::CompiledNetwork::compile(g, p, choices).save(path);
    std::ifstream f(path, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    const size_t magic = bytes.find('\n') + 1, head = magic + 8 + 32;
    uint64_t n = 0;
    std::memcpy(&n, bytes.data() + magic, sizeof n);
    const nlohmann::json h = nlohmann::json::parse(bytes.substr(head, n));
    const std::string_view blob = std::string_view(bytes).substr(head + n);
    auto part = [&](const nlohmann::json& j) {
      return std::string(blob.substr(j["offset"].get<size_t>(), j["size"].get<size_t>()));
    };
    Compiled out{bytes.substr(0, magic), nlohmann::json::array(), ""};
    for (const auto& w : h["weights"]) out.blobs += part(w);
    for (const auto& k : h["kernels"]) {
      out.kernels.push_back({{"offset", out.blobs.size()}, {"size", k["size"]}, {"params", k["params"]}});
      out.blobs += part(k);
    }
    return out;
  }();
  return c;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (!codegen::llvm_enabled()) {
    std::fprintf(stderr, "fuzz_basin: built without LLVM\n");
    std::exit(1);
  }
  compiled();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Compiled& c = compiled();
  std::string header(reinterpret_cast<const char*>(data), size);
  nlohmann::json h = nlohmann::json::parse(header, nullptr, /*allow_exceptions=*/false);
  if (h.is_object()) {
    if (h.contains("host_cpu") && h["host_cpu"] == "@host") h["host_cpu"] = codegen::llvm_host_cpu();
    const nlohmann::json& kernels = c.kernels;
    if (h.contains("kernels") && h["kernels"].is_array() && h.value("target", "llvm") == "llvm") {
      size_t i = 0;
      for (auto& k : h["kernels"])
        if (k.is_object()) {
          const nlohmann::json& real = kernels[i++ % kernels.size()];
          k["offset"] = real["offset"];
          k["size"] = real["size"];
          k["params"] = real["params"];  // what the code reads and writes, part of the code
        }
    }
    header = h.dump();
  }
  std::string file = c.magic;
  const uint64_t n = header.size();
  file.append(reinterpret_cast<const char*>(&n), sizeof n);
  const std::string rest = header + c.blobs;
  const std::array<uint8_t, 32> digest = [&] {
    Sha256 s;
    s.update(rest);
    return s.digest();
  }();
  file.append(reinterpret_cast<const char*>(digest.data()), digest.size());
  file += rest;
  const std::string path = fuzz::write_input("net.basin", reinterpret_cast<const uint8_t*>(file.data()), file.size());
  try {
    codegen::CompiledNetwork net = codegen::CompiledNetwork::load(path);
    // A network that loads runs on inputs of its shapes.
    std::vector<NDArray> in;
    for (const auto& t : net.inputs()) {
      if (t.index_bound > 0)
        in.push_back(NDArray::random(t.dtype, t.shape, 0, static_cast<double>(t.index_bound - 1), 1));
      else in.push_back(NDArray::random(t.dtype, t.shape, -1, 1, 1));
    }
    net.run(in);
  } catch (const Error& e) {
    fuzz::refused(e);
  }
  return 0;
}
