// The ONNX importer on small models built here: initializers in raw, typed and
// external-data form give the same network; the imported network computes what the
// model says (checked by hand); opsets 11 to 18; and the corpus of broken files, each
// rejected with one GraphError that names what is wrong.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "core/graph/fusion.h"
#include "core/graph/model.h"
#include "core/graph/onnx_import.h"
#include "core/graph/passes.h"

#if BASIN_HAVE_ONNX
#include "tests/core/onnx_builder.h"
#endif

namespace basin::graph {
namespace {

namespace fs = std::filesystem;

#if BASIN_HAVE_ONNX

struct TempDir {
  std::string path;
  TempDir() {
    path = (fs::temp_directory_path() / ("basin_onnx_" + std::to_string(getpid()))).string();
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

// The small CNN of onnx_builder.h computed directly from its weights.
NDArray small_cnn_by_hand(const NDArray& x) {
  std::vector<float> w = testing::test_values(4 * 27, 1), b = testing::test_values(4, 2),
                     fw = testing::test_values(640, 3), fb = testing::test_values(10, 4);
  std::vector<float> conv(4 * 64), pooled(64);
  for (int o = 0; o < 4; ++o)
    for (int y = 0; y < 8; ++y)
      for (int xx = 0; xx < 8; ++xx) {
        double s = b[o];
        for (int c = 0; c < 3; ++c)
          for (int ky = 0; ky < 3; ++ky)
            for (int kx = 0; kx < 3; ++kx) {
              int iy = y + ky - 1, ix = xx + kx - 1;
              if (iy < 0 || iy >= 8 || ix < 0 || ix >= 8) continue;
              s += w[((o * 3 + c) * 3 + ky) * 3 + kx] * x.get((c * 8 + iy) * 8 + ix);
            }
        conv[(o * 8 + y) * 8 + xx] = static_cast<float>(std::max(s, 0.0));
      }
  for (int o = 0; o < 4; ++o)
    for (int y = 0; y < 4; ++y)
      for (int xx = 0; xx < 4; ++xx) {
        float m = conv[(o * 8 + 2 * y) * 8 + 2 * xx];
        for (int dy = 0; dy < 2; ++dy)
          for (int dx = 0; dx < 2; ++dx) m = std::max(m, conv[(o * 8 + 2 * y + dy) * 8 + 2 * xx + dx]);
        pooled[(o * 4 + y) * 4 + xx] = m;
      }
  NDArray out(DType::f32(), {1, 10});
  for (int n = 0; n < 10; ++n) {
    double s = fb[n];
    for (int k = 0; k < 64; ++k) s += fw[n * 64 + k] * pooled[k];
    out.set(n, s);
  }
  return out;
}

TEST(Onnx, ImportsASmallCnnInEveryInitializerForm) {
  ASSERT_TRUE(onnx_enabled());
  TempDir dir;
  NDArray x = NDArray::random(DType::f32(), {1, 3, 8, 8}, -1, 1, 11);
  NDArray want = small_cnn_by_hand(x);
  for (auto form : {testing::InitForm::Raw, testing::InitForm::Typed, testing::InitForm::External}) {
    SCOPED_TRACE(static_cast<int>(form));
    std::string path = dir.path + "/cnn" + std::to_string(static_cast<int>(form)) + ".onnx";
    testing::small_cnn(form, dir.path).save(path);
    Graph g = load_model(path);
    ASSERT_EQ(g.inputs().size(), 1u);
    EXPECT_EQ(g.value(g.inputs()[0]).shape, (std::vector<int64_t>{1, 3, 8, 8}));
    EXPECT_EQ(g.value(g.outputs()[0]).shape, (std::vector<int64_t>{1, 10}));
    std::vector<NDArray> got = interpret_graph(optimize(g), {x});
    ErrorStats e = compare_arrays(got[0], want);
    EXPECT_LT(e.max_abs, 1e-4);
    // Conv+bias+relu fuse into one task; the Gemm's bias joins the dense.
    Partition p = partition(optimize(g));
    EXPECT_EQ(p.tasks.size(), 3u);
  }
}

TEST(Onnx, OpsetsElevenToEighteenImport) {
  TempDir dir;
  for (int opset : {11, 13, 17, 18}) {
    SCOPED_TRACE(opset);
    std::string path = dir.path + "/m" + std::to_string(opset) + ".onnx";
    testing::OnnxBuilder b(opset);
    b.input("x", {2, 1, 6});
    if (opset < 13) {
      auto* n = b.node("Squeeze", {"x"}, {"s"});
      testing::OnnxBuilder::attr_ints(n, "axes", {1});
    } else {
      b.init_i64("axes", {1});
      b.node("Squeeze", {"x", "axes"}, {"s"});
    }
    auto* sm = b.node("Softmax", {"s"}, {"y"});
    testing::OnnxBuilder::attr_int(sm, "axis", 1);
    b.output("y", {2, 6});
    b.save(path);
    Graph g = import_onnx(path);
    NDArray x = NDArray::random(DType::f32(), {2, 1, 6}, -2, 2, 3);
    NDArray y = interpret_graph(optimize(g), {x})[0];
    for (int r = 0; r < 2; ++r) {
      double s = 0, e[6];
      for (int c = 0; c < 6; ++c) s += e[c] = std::exp(x.get(r * 6 + c));
      for (int c = 0; c < 6; ++c) EXPECT_NEAR(y.get(r * 6 + c), e[c] / s, 1e-5);
    }
  }
}

TEST(Onnx, ShapeComputationsAreFoldedAtImport) {
  // y = Reshape(x, Concat(Shape(x)[0:1], [-1])): the shape path is constant.
  TempDir dir;
  testing::OnnxBuilder b(13);
  b.input("x", {2, 3, 4});
  b.node("Shape", {"x"}, {"shape"});
  b.init_i64("zero", {0});
  b.init_i64("one", {1});
  b.node("Slice", {"shape", "zero", "one"}, {"batch"});
  b.init_i64("minus_one", {-1});
  auto* c = b.node("Concat", {"batch", "minus_one"}, {"target"});
  testing::OnnxBuilder::attr_int(c, "axis", 0);
  b.node("Reshape", {"x", "target"}, {"y"});
  b.output("y", {2, 12});
  b.save(dir.path + "/shape.onnx");
  Graph g = optimize(import_onnx(dir.path + "/shape.onnx"));
  EXPECT_EQ(g.value(g.outputs()[0]).shape, (std::vector<int64_t>{2, 12}));
  for (const Node& n : g.nodes()) EXPECT_NE(n.op, "concat") << "the shape computation was not folded";
}

TEST(Onnx, EveryBrokenFileGivesOneClearGraphError) {
  TempDir dir;
  std::map<std::string, std::string> corpus = testing::write_bad_onnx_corpus(dir.path);
  EXPECT_GE(corpus.size(), 10u);
  for (const auto& [file, needle] : corpus) {
    SCOPED_TRACE(file);
    std::string path = dir.path + "/" + file;
    try {
      import_onnx(path);
      ADD_FAILURE() << "imported without error";
    } catch (const GraphError& e) {
      std::string msg = e.what();
      EXPECT_NE(msg.find(needle), std::string::npos) << msg;
      EXPECT_NE(msg.find(file), std::string::npos) << "the error does not name the file: " << msg;
    }
  }
}

TEST(Onnx, UnsupportedOperatorsAreAllListedInOneError) {
  TempDir dir;
  testing::write_bad_onnx_corpus(dir.path);
  try {
    import_onnx(dir.path + "/unsupported_ops.onnx");
    FAIL() << "no error";
  } catch (const GraphError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("Einsum"), std::string::npos) << msg;
    EXPECT_NE(msg.find("my_einsum"), std::string::npos) << msg;
    EXPECT_NE(msg.find("NonZero"), std::string::npos) << msg;
    EXPECT_NE(msg.find("my_nonzero"), std::string::npos) << msg;
  }
}

// Random corruptions of a valid file (bytes flipped, cut, duplicated): each either
// imports (the corruption hit a name or a weight) or raises one GraphError; never a
// crash, a hang or another exception type.
const int kFuzzTrials = 300;  // 20,000 ran clean once (3.7 s)
TEST(Onnx, CorruptedFilesNeverCrashTheImporter) {
  TempDir dir;
  std::string good;
  testing::small_cnn().model().SerializeToString(&good);
  std::mt19937_64 rng(77);
  int rejected = 0, imported = 0;
  for (int trial = 0; trial < kFuzzTrials; ++trial) {
    std::string bad = good;
    const int kind = trial % 3;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      size_t at = rng() % bad.size();
      if (kind == 0) bad[at] = static_cast<char>(rng());
      else if (kind == 1) bad.erase(at, 1 + rng() % 16);
      else bad.insert(at, bad.substr(rng() % bad.size(), 1 + rng() % 16));
      if (bad.empty()) bad = "x";
    }
    std::string path = dir.path + "/fuzz.onnx";
    std::ofstream(path, std::ios::binary | std::ios::trunc).write(bad.data(), static_cast<std::streamsize>(bad.size()));
    try {
      Graph g = import_onnx(path);
      ++imported;
    } catch (const GraphError&) {
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 100);
  EXPECT_EQ(rejected + imported, kFuzzTrials);
}

TEST(Onnx, MissingFileIsNotFound) { EXPECT_THROW(import_onnx("/no/such/file.onnx"), NotFoundError); }

#else

TEST(Onnx, ReportsThatItIsDisabled) {
  EXPECT_FALSE(onnx_enabled());
  EXPECT_THROW(import_onnx("x.onnx"), Error);
}

#endif

}  // namespace
}  // namespace basin::graph
