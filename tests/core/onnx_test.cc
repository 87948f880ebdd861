// The ONNX importer on small models built here: initializers in raw, typed and
// external-data form give the same network; the imported network computes what the
// model says (checked by hand); opsets 11 to 18; and the corpus of broken files, each
// rejected with one GraphError that names what is wrong.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>

#include "core/graph/fusion.h"
#include "core/graph/model.h"
#include "core/graph/onnx_import.h"
#include "core/graph/passes.h"
#include "core/util/checked.h"

#if BASIN_HAVE_ONNX
#include "tests/core/onnx_builder.h"
#endif

namespace basin::graph {
namespace {

namespace fs = std::filesystem;

#if BASIN_HAVE_ONNX

using testing::TempDir;

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

// The import of `path` is refused with a GraphError whose message contains `part`.
void expect_refused(const std::string& path, const std::string& part) {
  try {
    import_onnx(path);
    ADD_FAILURE() << path << " was accepted";
  } catch (const GraphError& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
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
    EXPECT_NE(msg.find("Unique"), std::string::npos) << msg;
    EXPECT_NE(msg.find("my_unique"), std::string::npos) << msg;
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

namespace basin::graph {
namespace {

// Slices as both exporters write them: INT64_MAX and INT64_MIN for open ends (read
// exactly, never through a double) and negative steps (x[..., ::-1]).
TEST(OnnxImport, SlicesWithOpenEndsAndNegativeSteps) {
  TempDir dir;
  testing::OnnxBuilder b(17);
  b.input("x", {2, 5});
  b.init_i64("s0", {1});
  b.init_i64("e0", {INT64_MAX});
  b.init_i64("a1", {1});
  b.node("Slice", {"x", "s0", "e0", "a1"}, {"tail"});  // x[:, 1:]
  b.init_i64("s1", {-1});
  b.init_i64("e1", {INT64_MIN});
  b.init_i64("st", {-2});
  b.node("Slice", {"tail", "s1", "e1", "a1", "st"}, {"y"});  // [:, ::-2]
  b.output("y", {2, 2});
  b.save(dir.path + "/slice.onnx");
  Graph g = import_onnx(dir.path + "/slice.onnx");
  NDArray x = NDArray::random(DType::f32(), {2, 5}, -2, 2, 5);
  NDArray y = interpret_graph(optimize(g), {x})[0];
  ASSERT_EQ(y.shape(), (std::vector<int64_t>{2, 2}));
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(y.get(r * 2 + 0), x.get(r * 5 + 4));
    EXPECT_EQ(y.get(r * 2 + 1), x.get(r * 5 + 2));
  }
}

// A mask built from a computed int64 (BERT's padding mask): Cast to bool, Not, Where.
TEST(OnnxImport, MasksOfComputedValues) {
  TempDir dir;
  testing::OnnxBuilder b(17);
  b.input("ids", {1, 6}, onnx::TensorProto::INT64);
  b.input("x", {1, 6});
  b.init_i64("zero", {0});
  b.node("Equal", {"ids", "zero"}, {"pad"});
  auto* c = b.node("Cast", {"ids"}, {"nonzero"});
  testing::OnnxBuilder::attr_int(c, "to", onnx::TensorProto::BOOL);
  b.node("Not", {"pad"}, {"keep"});
  b.node("And", {"keep", "nonzero"}, {"both"});
  b.init("minus", {1}, {-100.0f});
  b.node("Where", {"both", "x", "minus"}, {"y"});
  b.output("y", {1, 6});
  b.save(dir.path + "/mask.onnx");
  Graph g = import_onnx(dir.path + "/mask.onnx");
  NDArray ids(DType::i64(), {1, 6});
  for (int i = 0; i < 6; ++i) ids.set_int(i, i % 3 == 0 ? 0 : i);
  NDArray x = NDArray::random(DType::f32(), {1, 6}, -2, 2, 6);
  NDArray y = interpret_graph(optimize(g), {ids, x})[0];
  for (int i = 0; i < 6; ++i) EXPECT_EQ(y.get(i), i % 3 == 0 ? -100.0 : x.get(i)) << i;
}

// A node of an operator basin has no kernel for blocks nothing when its inputs are
// constant and basin can evaluate it (Where, Equal, Mod on a shape), and the error
// for a data-path one says which, grouped by operator and bounded in length.
TEST(OnnxImport, ConstantPathsFoldAndUnsupportedErrorsAreBounded) {
  TempDir dir;
  {
    testing::OnnxBuilder b(17);
    b.input("x", {2, 6});
    b.node("Shape", {"x"}, {"shape"});
    b.init_i64("three", {3});
    b.node("Mod", {"shape", "three"}, {"m"});  // [2, 0]
    b.init_i64("two", {2});
    b.node("Equal", {"m", "two"}, {"eq"});
    b.init_i64("minus_one", {-1});
    b.node("Where", {"eq", "three", "minus_one"}, {"target"});  // [3, -1]
    b.node("Reshape", {"x", "target"}, {"y"});
    b.output("y", {3, 4});
    b.save(dir.path + "/const_path.onnx");
    Graph g = optimize(import_onnx(dir.path + "/const_path.onnx"));
    EXPECT_EQ(g.value(g.outputs()[0]).shape, (std::vector<int64_t>{3, 4}));
    for (const Node& n : g.nodes()) EXPECT_EQ(n.op, "reshape");
  }
  {
    testing::OnnxBuilder b(17);
    b.input("x", {2, 6});
    std::string prev = "x";
    for (int i = 0; i < 200; ++i) {
      std::string out = "e" + std::to_string(i);
      auto* n = b.node("Unique", {prev}, {out});
      n->set_name(std::string(100, 'n') + std::to_string(i));
      prev = out;
    }
    b.node("Relu", {prev}, {"y"});
    b.output("y", {2, 6});
    b.save(dir.path + "/many.onnx");
    try {
      import_onnx(dir.path + "/many.onnx");
      FAIL() << "imported";
    } catch (const GraphError& e) {
      std::string msg = e.what();
      EXPECT_LT(msg.size(), 1200u) << msg;
      EXPECT_NE(msg.find("Unique (200 nodes"), std::string::npos) << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    }
  }
}

// Einsum as the matmuls it stands for: attention's scores (a transposed right operand,
// two batch letters), an implicit output with an ellipsis, a constant right operand,
// and letters summed on one side alone. The reference sums over every assignment of
// the letters of an explicit equation.
TEST(OnnxImport, EinsumBecomesMatmuls) {
  TempDir dir;
  struct EinCase {
    std::string eq, explicit_eq;
    std::vector<int64_t> a, b, out;
    bool const_b;
  };
  const EinCase cases[] = {{"bhqd,bhkd->bhqk", "bhqd,bhkd->bhqk", {2, 3, 4, 5}, {2, 3, 6, 5}, {2, 3, 4, 6}, false},
                           {"...ij,jk", "xyij,jk->xyik", {2, 3, 4}, {4, 5}, {2, 3, 5}, true},
                           {"ij,kjl->lik", "ij,kjl->lik", {3, 4}, {2, 4, 5}, {5, 3, 2}, false},
                           {"ia,jb->ij", "ia,jb->ij", {3, 4}, {2, 5}, {3, 2}, false}};
  for (const EinCase& c : cases) {
    SCOPED_TRACE(c.eq);
    testing::OnnxBuilder b(17);
    b.input("a", c.a);
    int64_t nb = 1;
    for (int64_t e : c.b) nb *= e;
    std::vector<float> bv = testing::test_values(static_cast<size_t>(nb), 9);
    if (c.const_b) b.init("b", c.b, bv);
    else b.input("b", c.b);
    auto* n = b.node("Einsum", {"a", "b"}, {"y"});
    auto* at = n->add_attribute();
    at->set_name("equation");
    at->set_type(onnx::AttributeProto::STRING);
    at->set_s(c.eq);
    b.output("y", c.out);
    b.save(dir.path + "/e.onnx");
    Graph g = optimize(import_onnx(dir.path + "/e.onnx"));
    ASSERT_EQ(g.value(g.outputs()[0]).shape, c.out);
    NDArray a = NDArray::random(DType::f32(), c.a, -1, 1, 4);
    NDArray bb(DType::f32(), c.b);
    for (int64_t i = 0; i < nb; ++i) bb.set(i, bv[static_cast<size_t>(i)]);
    std::vector<NDArray> ins = {a};
    if (!c.const_b) ins.push_back(bb);
    NDArray y = interpret_graph(g, ins)[0];

    // "...ij" of a rank-3 input is "yij" here: the explicit equation's first term may
    // name more letters than the input has axes; its leading ones are then absent.
    const std::string& e = c.explicit_eq;
    std::string ta = e.substr(0, e.find(',')), tb = e.substr(e.find(',') + 1, e.find("->") - e.find(',') - 1),
                to = e.substr(e.find("->") + 2);
    ta = ta.substr(ta.size() - c.a.size());
    to = to.substr(to.size() - c.out.size());
    std::map<char, int64_t> ext, idx;
    for (size_t d = 0; d < ta.size(); ++d) ext[ta[d]] = c.a[d];
    for (size_t d = 0; d < tb.size(); ++d) ext[tb[d]] = c.b[d];
    std::vector<char> letters;
    for (const auto& kv : ext) letters.push_back(kv.first);
    auto flat = [&](const std::string& t, const std::vector<int64_t>& sh) {
      int64_t f = 0;
      for (size_t d = 0; d < t.size(); ++d) f = f * sh[d] + idx[t[d]];
      return f;
    };
    std::vector<double> ref(static_cast<size_t>(y.numel()), 0.0);
    std::function<void(size_t)> walk = [&](size_t l) {
      if (l == letters.size()) {
        ref[static_cast<size_t>(flat(to, c.out))] += a.get(flat(ta, c.a)) * bb.get(flat(tb, c.b));
        return;
      }
      for (int64_t v = 0; v < ext[letters[l]]; ++v) {
        idx[letters[l]] = v;
        walk(l + 1);
      }
    };
    walk(0);
    for (int64_t i = 0; i < y.numel(); ++i) EXPECT_NEAR(y.get(i), ref[static_cast<size_t>(i)], 1e-4) << i;
  }
}

// Symbolic dimensions: without a value the error names the input, the dimension and
// the flag; with values for the dimension names (or an input's whole shape) the model
// imports; a name that is neither is refused with the names there are.
TEST(OnnxImport, SymbolicDimensionsTakeValues) {
  TempDir dir;
  testing::OnnxBuilder b(17);
  b.input("x", {1, 1});
  auto* dims = b.graph().mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape();
  dims->mutable_dim(0)->set_dim_param("batch");
  dims->mutable_dim(1)->set_dim_param("seq");
  b.node("Relu", {"x"}, {"y"});
  b.output("y");
  const std::string path = dir.path + "/sym.onnx";
  b.save(path);
  auto error_of = [&](const ImportOptions& o) {
    try {
      import_onnx(path, o);
    } catch (const GraphError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  std::string e = error_of({});
  EXPECT_NE(e.find("input 'x' dimension 0"), std::string::npos) << e;
  EXPECT_NE(e.find("--shape batch="), std::string::npos) << e;
  ImportOptions by_dim;
  by_dim.shapes = {{"batch", {2}}, {"seq", {16}}};
  Graph g = import_onnx(path, by_dim);
  EXPECT_EQ(g.value(g.inputs()[0]).shape, (std::vector<int64_t>{2, 16}));
  ImportOptions whole;
  whole.shapes = {{"x", {3, 5}}};
  g = import_onnx(path, whole);
  EXPECT_EQ(g.value(g.outputs()[0]).shape, (std::vector<int64_t>{3, 5}));
  ImportOptions bad;
  bad.shapes = {{"sequence", {16}}};
  e = error_of(bad);
  EXPECT_NE(e.find("'seq'"), std::string::npos) << e;
  EXPECT_NE(e.find("'x'"), std::string::npos) << e;
  ImportOptions zero;
  zero.shapes = {{"batch", {0}}, {"seq", {4}}};
  EXPECT_NE(error_of(zero).find("extent 0"), std::string::npos) << error_of(zero);
  ImportOptions rank;
  rank.shapes = {{"x", {3}}};
  EXPECT_NE(error_of(rank).find("rank 2"), std::string::npos) << error_of(rank);
}

// External data is read only from regular files of the model's folder or below, with
// offsets and lengths checked: an absolute location (/etc/passwd), "..", a link out of
// the folder, a folder, a FIFO (which would block in open) and an offset past the end
// are each one clear error, and nothing outside the model is read.
TEST(OnnxImport, ExternalDataStaysInTheModelsFolder) {
  TempDir dir;
  fs::create_directories(dir.path + "/m/sub");
  std::ofstream(dir.path + "/outside.bin", std::ios::binary) << std::string(64, 'x');
  std::ofstream(dir.path + "/m/sub/w.bin", std::ios::binary) << std::string(64, '\0');
  fs::create_symlink(dir.path + "/outside.bin", dir.path + "/m/link.bin");
  ASSERT_EQ(mkfifo((dir.path + "/m/fifo.bin").c_str(), 0600), 0);
  fs::create_directories(dir.path + "/m/folder.bin");
  struct Case {
    std::string location, offset, needle;
  };
  const Case cases[] = {{"/etc/passwd", "", "absolute"},
                        {"../outside.bin", "", "leaves the model's folder"},
                        {"sub/../../outside.bin", "", "leaves the model's folder"},
                        {"link.bin", "", "outside the model's folder"},
                        {"fifo.bin", "", "not a regular file"},
                        {"folder.bin", "", "not a regular file"},
                        {"sub/w.bin", "9223372036854775800", "at offset"},
                        {"sub/w.bin", "-4", "not a byte count"},
                        {"sub/w.bin", "12abc", "not a byte count"},
                        {"sub/w.bin", "", ""}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.location + " @" + c.offset);
    testing::OnnxBuilder b(17);
    b.input("x", {4, 4});
    onnx::TensorProto* t = b.empty_initializer("w", {4, 4});
    t->set_data_location(onnx::TensorProto::EXTERNAL);
    auto* kv = t->add_external_data();
    kv->set_key("location");
    kv->set_value(c.location);
    if (!c.offset.empty()) {
      auto* off = t->add_external_data();
      off->set_key("offset");
      off->set_value(c.offset);
    }
    b.node("Add", {"x", "w"}, {"y"});
    b.output("y", {4, 4});
    const std::string path = dir.path + "/m/model.onnx";
    b.save(path);
    if (c.needle.empty()) {
      Graph g = import_onnx(path);
      EXPECT_EQ(g.value(g.outputs()[0]).shape, (std::vector<int64_t>{4, 4}));
      continue;
    }
    try {
      import_onnx(path);
      ADD_FAILURE() << "imported";
    } catch (const GraphError& e) {
      EXPECT_NE(std::string(e.what()).find(c.needle), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).find("root:"), std::string::npos) << "the error quotes the file: " << e.what();
    }
  }
}

// ONNX's opset rules: opset 18's Split(num_outputs) in a file that declares opset 17 is
// an error, as ONNX Runtime says; in an opset-18 file it imports.
// Opsets after libonnx's own (Debian's stops at 17) up to the newest of the generated
// schemas: the same model imports at each, a model's output keeps its ONNX name through
// the passes, and a newer opset is one clear error.
TEST(Onnx, OpsetsUpToTheNewestImport) {
  TempDir dir;
  const int newest = newest_onnx_opset();
  EXPECT_GE(newest, 20);  // what torch 2.x's exporters write by default
  for (int opset : {19, 20, 21, 23, newest}) {
    SCOPED_TRACE(opset);
    std::string path = dir.path + "/m" + std::to_string(opset) + ".onnx";
    testing::OnnxBuilder b(opset);
    b.input("x", {2, 1, 6});
    b.init_i64("axes", {1});
    b.node("Squeeze", {"x", "axes"}, {"s"});
    auto* sm = b.node("Softmax", {"s"}, {"probs"});
    testing::OnnxBuilder::attr_int(sm, "axis", 1);
    b.output("probs", {2, 6});
    b.save(path);
    Graph g = optimize(import_onnx(path));
    EXPECT_EQ(g.output_name(0), "probs");
    NDArray y = interpret_graph(g, {NDArray::random(DType::f32(), {2, 1, 6}, -2, 2, 3)})[0];
    double s = 0;
    for (int c = 0; c < 6; ++c) s += y.get(c);
    EXPECT_NEAR(s, 1, 1e-5);
  }
  testing::OnnxBuilder b(newest + 1);
  b.input("x", {2});
  b.node("Relu", {"x"}, {"y"});
  b.output("y", {2});
  b.save(dir.path + "/future.onnx");
  try {
    import_onnx(dir.path + "/future.onnx");
    FAIL() << "opset " << newest + 1 << " accepted";
  } catch (const GraphError& e) {
    EXPECT_NE(std::string(e.what()).find("(11 to " + std::to_string(newest) + ")"), std::string::npos) << e.what();
  }
}

// The operators later opsets added, each against its ONNX definition: Gelu (20; exact
// and tanh), Mish (18), Swish (24), RMSNormalization (23); and Gelu in an opset-19 file
// is refused, as it is not yet an operator there.
TEST(Onnx, OperatorsOfLaterOpsetsMatchTheirDefinitions) {
  TempDir dir;
  auto run1 = [&](int opset, const std::string& op, auto set_attrs, std::vector<std::string> extra = {}) {
    testing::OnnxBuilder b(opset);
    b.input("x", {3, 8});
    std::vector<std::string> ins = {"x"};
    for (const auto& e : extra) {
      b.init(e, {8}, std::vector<float>(8, 1.5f));
      ins.push_back(e);
    }
    set_attrs(b.node(op, ins, {"y"}));
    b.output("y", {3, 8});
    const std::string path = dir.path + "/" + op + std::to_string(opset) + ".onnx";
    b.save(path);
    return path;
  };
  const NDArray x = NDArray::random(DType::f32(), {3, 8}, -4, 4, 11);
  auto check = [&](const std::string& path, const std::function<double(int64_t)>& want) {
    SCOPED_TRACE(path);
    NDArray y = interpret_graph(optimize(import_onnx(path)), {x})[0];
    for (int64_t i = 0; i < 24; ++i) EXPECT_NEAR(y.get(i), want(i), 1e-5 * (1 + std::abs(want(i)))) << i;
  };
  auto none = [](onnx::NodeProto*) {};
  check(run1(20, "Gelu", none), [&](int64_t i) { return 0.5 * x.get(i) * (1 + std::erf(x.get(i) / std::sqrt(2.0))); });
  check(run1(20, "Gelu", [](onnx::NodeProto* n) { testing::OnnxBuilder::attr_string(n, "approximate", "tanh"); }),
        [&](int64_t i) {
          const double v = x.get(i);
          return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
        });
  check(run1(18, "Mish", none), [&](int64_t i) { return x.get(i) * std::tanh(std::log1p(std::exp(x.get(i)))); });
  check(run1(24, "Swish", [](onnx::NodeProto* n) { testing::OnnxBuilder::attr_float(n, "alpha", 0.5f); }),
        [&](int64_t i) { return x.get(i) / (1 + std::exp(-0.5 * x.get(i))); });
  check(run1(23, "RMSNormalization", none, {"scale"}), [&](int64_t i) {
    const int64_t r = i / 8;
    double ms = 0;
    for (int64_t c = 0; c < 8; ++c) ms += x.get(r * 8 + c) * x.get(r * 8 + c) / 8;
    return 1.5 * x.get(i) / std::sqrt(ms + 1e-5);
  });
  try {
    import_onnx(run1(19, "Gelu", none));
    FAIL() << "Gelu accepted in opset 19";
  } catch (const GraphError& e) {
    EXPECT_NE(std::string(e.what()).find("not an operator of opset 19"), std::string::npos) << e.what();
  }
}

TEST(OnnxImport, AttributesOfALaterOpsetAreRefused) {
  TempDir dir;
  for (int opset : {17, 18}) {
    testing::OnnxBuilder b(opset);
    b.input("x", {2, 6});
    auto* n = b.node("Split", {"x"}, {"a", "b"});
    testing::OnnxBuilder::attr_int(n, "axis", 1);
    testing::OnnxBuilder::attr_int(n, "num_outputs", 2);
    b.node("Add", {"a", "b"}, {"y"});
    b.output("y", {2, 3});
    std::string path = dir.path + "/split" + std::to_string(opset) + ".onnx";
    b.save(path);
    if (opset == 17) {
      try {
        import_onnx(path);
        FAIL() << "opset 17 accepted num_outputs";
      } catch (const GraphError& e) {
        EXPECT_NE(std::string(e.what()).find("'num_outputs'"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("opset 17"), std::string::npos) << e.what();
      }
    } else {
      Graph g = import_onnx(path);
      EXPECT_EQ(g.value(g.outputs()[0]).shape, (std::vector<int64_t>{2, 3}));
    }
  }
}

// An attribute of another type than its operator's is an error naming it and both
// types, never read as the field of the right type (0, or the default): LeakyRelu's
// alpha given as INT 1 was a ReLU.
TEST(OnnxImport, AttributesOfTheWrongTypeAreRefused) {
  TempDir dir;
  struct Case {
    const char* op;
    const char* attr;
    std::function<void(onnx::NodeProto*)> set;
    const char* given;
    const char* wanted;
  };
  const std::vector<Case> cases = {
      {"LeakyRelu", "alpha", [](onnx::NodeProto* n) { testing::OnnxBuilder::attr_int(n, "alpha", 1); }, "INT", "FLOAT"},
      {"Softmax", "axis", [](onnx::NodeProto* n) { testing::OnnxBuilder::attr_string(n, "axis", "0"); }, "STRING",
       "INT"},
      {"Transpose", "perm",
       [](onnx::NodeProto* n) {
         auto* a = n->add_attribute();
         a->set_name("perm");
         a->set_type(onnx::AttributeProto::FLOATS);
         a->add_floats(1);
         a->add_floats(0);
       },
       "FLOATS", "INTS"},
      {"Flatten", "axis", [](onnx::NodeProto* n) { testing::OnnxBuilder::attr_float(n, "axis", 1.0f); }, "FLOAT",
       "INT"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.op);
    testing::OnnxBuilder b(13);
    b.input("x", {2, 6});
    c.set(b.node(c.op, {"x"}, {"y"}));
    b.output("y");
    const std::string path = dir.path + "/" + c.op + ".onnx";
    b.save(path);
    try {
      import_onnx(path);
      FAIL() << "accepted " << c.attr << " as " << c.given;
    } catch (const GraphError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find(std::string("attribute '") + c.attr + "' is " + c.given + "; it must be " + c.wanted),
                std::string::npos)
          << m;
    }
  }
}

// A graph that is not in SSA form (a name written twice, a node writing an input's
// name) and an axis outside its range are refused, naming the node; never imported with
// one of the writers silently winning.
TEST(OnnxImport, InvalidGraphsAreRefused) {
  TempDir dir;
  struct Case {
    const char* name;
    std::function<void(testing::OnnxBuilder&)> build;
    const char* why;
  };
  const std::vector<Case> cases = {
      {"twice",
       [](testing::OnnxBuilder& b) {
         b.node("Relu", {"x"}, {"y"});
         b.node("Sigmoid", {"x"}, {"y"});
       },
       "writes too"},
      {"input",
       [](testing::OnnxBuilder& b) {
         b.node("Relu", {"x"}, {"x"});
         b.node("Sigmoid", {"x"}, {"y"});
       },
       "already a graph input"},
      {"flatten",
       [](testing::OnnxBuilder& b) {
         testing::OnnxBuilder::attr_int(b.node("Flatten", {"x"}, {"y"}), "axis", -(int64_t{1} << 62));
       },
       "out of range for rank 2"},
      {"flatten3",
       [](testing::OnnxBuilder& b) { testing::OnnxBuilder::attr_int(b.node("Flatten", {"x"}, {"y"}), "axis", 3); },
       "axis"},  // (ONNX's shape inference names this one first)
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    testing::OnnxBuilder b(13);
    b.input("x", {2, 6});
    c.build(b);
    b.output("y");
    const std::string path = dir.path + "/" + c.name + ".onnx";
    b.save(path);
    expect_refused(path, c.why);
  }
  // Flatten's axis may be the rank itself (or minus it).
  for (int64_t axis : {int64_t{2}, int64_t{-2}}) {
    testing::OnnxBuilder b(13);
    b.input("x", {2, 6});
    testing::OnnxBuilder::attr_int(b.node("Flatten", {"x"}, {"y"}), "axis", axis);
    b.output("y");
    b.save(dir.path + "/ok.onnx");
    Graph g = import_onnx(dir.path + "/ok.onnx");
    EXPECT_EQ(g.value(g.outputs()[0]).shape, (std::vector<int64_t>{axis == 2 ? 12 : 1, axis == 2 ? 1 : 12}));
  }
}

// Opset 18's Split into num_outputs parts that the extent does not divide: parts of
// ceil(extent / n), the last one smaller; split sizes that do not add up are refused.
TEST(OnnxImport, UnevenSplitOfOpset18) {
  TempDir dir;
  testing::OnnxBuilder b(18);
  b.input("x", {2, 7});
  onnx::NodeProto* sp = b.node("Split", {"x"}, {"a", "b", "c"});
  testing::OnnxBuilder::attr_int(sp, "axis", 1);
  testing::OnnxBuilder::attr_int(sp, "num_outputs", 3);
  for (const char* o : {"a", "b", "c"}) b.output(o);
  b.save(dir.path + "/split.onnx");
  Graph g = import_onnx(dir.path + "/split.onnx");
  ASSERT_EQ(g.outputs().size(), 3u);
  EXPECT_EQ(g.value(g.outputs()[0]).shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(g.value(g.outputs()[1]).shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(g.value(g.outputs()[2]).shape, (std::vector<int64_t>{2, 1}));
  testing::OnnxBuilder bad(11);  // (split sizes an attribute)
  bad.input("x", {2, 7});
  onnx::NodeProto* bs = bad.node("Split", {"x"}, {"a", "b"});
  testing::OnnxBuilder::attr_ints(bs, "split", {3, 5});
  testing::OnnxBuilder::attr_int(bs, "axis", 1);
  bad.output("a");
  bad.output("b");
  bad.save(dir.path + "/bad.onnx");
  expect_refused(dir.path + "/bad.onnx", "8");
}

// A LayerNormalization whose axis lies outside its input's rank (a rank-0 input with
// the default axis -1, which crashed the inference of the ONNX release linked) is one
// model error.
TEST(OnnxImport, LayerNormalizationAxisOutsideTheRankIsAnError) {
  TempDir dir;
  for (int rank : {0, 2}) {
    testing::OnnxBuilder b(18);
    b.input("x", std::vector<int64_t>(static_cast<size_t>(rank), 4));
    onnx::NodeProto* ln = b.node("LayerNormalization", {"x"}, {"y", "mean", "inv"});
    if (rank == 2) testing::OnnxBuilder::attr_int(ln, "axis", 2);
    b.output("inv");
    const std::string path = dir.path + "/ln" + std::to_string(rank) + ".onnx";
    b.save(path);
    expect_refused(path, "outside the input's rank");
  }
}

// Gemm of operands that are not matrices (a constant vector, which the fuzzer drew
// through Shape and Squeeze) is one model error, not a read past the constant.
TEST(OnnxImport, GemmOfAVectorIsAnError) {
  TempDir dir;
  testing::OnnxBuilder b(12);
  b.input("x", {});
  b.node("Shape", {"x"}, {"s"});    // an empty int64 vector, whose rank ONNX's inference knows
  b.node("Squeeze", {"s"}, {"v"});  // no longer
  b.node("Gemm", {"v", "v"}, {"y"});
  b.output("y", {}, onnx::TensorProto::INT64);
  b.save(dir.path + "/gemm.onnx");
  expect_refused(dir.path + "/gemm.onnx", "has rank 1, Gemm takes two matrices");
}

// A Split node of no outputs (the linked ONNX release's inference divided by their
// count) is one model error.
TEST(OnnxImport, SplitOfNoOutputsIsAnError) {
  TempDir dir;
  testing::OnnxBuilder b(14);
  b.input("x", {6, 2});
  b.node("Split", {"x"}, {});
  b.node("Relu", {"x"}, {"y"});
  b.output("y");
  b.save(dir.path + "/split.onnx");
  expect_refused(dir.path + "/split.onnx", "no outputs");
}

// A shape input that is not a constant must be a vector of at most 64 values: a
// rank-0 one (which the linked ONNX release's ConstantOfShape inference read past) and
// one of 2^40 values (2^40 output dimensions) are one model error each.
TEST(OnnxImport, AShapeInputOfManyDimensionsIsAnError) {
  TempDir dir;
  const std::vector<std::pair<std::vector<int64_t>, std::string>> cases = {
      {{}, "has rank 0, a vector expected"}, {{int64_t{1} << 40}, "at most 64 dimensions"}};
  for (const auto& [shape, message] : cases) {
    testing::OnnxBuilder b(14);
    b.input("s", shape, onnx::TensorProto::INT64);
    b.node("ConstantOfShape", {"s"}, {"y"});
    b.output("y");
    b.save(dir.path + "/cos.onnx");
    expect_refused(dir.path + "/cos.onnx", message);
  }
}

// Element counts never wrap (core/util/checked.h): shapes of extents near 2^63, which
// the structure-aware fuzzer drew into reductions and reshapes, are one clear error.
TEST(ElementCounts, AnOverflowingShapeIsAnError) {
  EXPECT_EQ(checked_product({2, 3, 4}), 24);
  EXPECT_EQ(checked_product({}), 1);
  EXPECT_EQ(checked_product({0, INT64_MAX}), 0);
  EXPECT_THROW(checked_product({INT64_MAX, 3}), Error);
  EXPECT_THROW(checked_product({int64_t{1} << 32, int64_t{1} << 32}), Error);
  EXPECT_THROW(checked_product({64, INT64_MAX}), Error);
}

// googlenet's and squeezenet's pooling: ceil_mode=1.
TEST(OnnxImport, PoolingWithCeilMode) {
  TempDir dir;
  testing::OnnxBuilder b(17);
  b.input("x", {1, 2, 8, 8});
  auto* n = b.node("MaxPool", {"x"}, {"y"});
  testing::OnnxBuilder::attr_ints(n, "kernel_shape", {3, 3});
  testing::OnnxBuilder::attr_ints(n, "strides", {2, 2});
  testing::OnnxBuilder::attr_int(n, "ceil_mode", 1);
  b.output("y", {1, 2, 4, 4});
  b.save(dir.path + "/ceil.onnx");
  Graph g = import_onnx(dir.path + "/ceil.onnx");
  EXPECT_EQ(g.value(g.outputs()[0]).shape, (std::vector<int64_t>{1, 2, 4, 4}));
  NDArray x = NDArray::random(DType::f32(), {1, 2, 8, 8}, -2, 2, 8);
  NDArray y = interpret_graph(optimize(g), {x})[0];
  // The last, partial window covers input rows and columns 6 and 7 alone.
  for (int c = 0; c < 2; ++c) {
    double m = -1e9;
    for (int r = 6; r < 8; ++r)
      for (int q = 6; q < 8; ++q) m = std::max(m, x.get(c * 64 + r * 8 + q));
    EXPECT_EQ(y.get(c * 16 + 15), m);
  }
}

}  // namespace
}  // namespace basin::graph
