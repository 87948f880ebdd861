// Small ONNX models built in the tests with libonnx's protobuf classes: a builder for
// valid models, and the corpus of broken files that the importer (and `basin run`)
// must reject with one clear error. Shared by tests/core/onnx_test.cc and the CLI
// tests. Only for builds with libonnx (BASIN_HAVE_ONNX).
#pragma once

#include <onnx/onnx_pb.h>

#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace basin::testing {

// A folder of the test's own under the system's temporary folder, removed with it.
struct TempDir {
  std::string path;
  explicit TempDir(const std::string& prefix = "basin_onnx_") {
    path = (std::filesystem::temp_directory_path() / (prefix + std::to_string(getpid()))).string();
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

enum class InitForm { Raw, Typed, External };

class OnnxBuilder {
 public:
  explicit OnnxBuilder(int opset = 13, std::string name = "test") {
    model_.set_ir_version(8);
    model_.set_producer_name("basin-tests");
    auto* o = model_.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
    model_.mutable_graph()->set_name(name);
  }
  onnx::ModelProto& model() { return model_; }
  onnx::GraphProto& graph() { return *model_.mutable_graph(); }

  void input(const std::string& name, const std::vector<int64_t>& shape, int elem = onnx::TensorProto::FLOAT) {
    value_info(graph().add_input(), name, shape, elem);
  }
  void output(const std::string& name, const std::vector<int64_t>& shape = {}, int elem = onnx::TensorProto::FLOAT) {
    auto* vi = graph().add_output();
    vi->set_name(name);
    vi->mutable_type()->mutable_tensor_type()->set_elem_type(elem);
    if (!shape.empty()) {
      auto* s = vi->mutable_type()->mutable_tensor_type()->mutable_shape();
      for (int64_t d : shape) s->add_dim()->set_dim_value(d);
    }
  }
  // A float initializer in one of the three storage forms. External data goes to
  // `dir`/`name`.bin and is referenced by a relative location.
  // A float initializer with a name and dims and no data yet.
  onnx::TensorProto* empty_initializer(const std::string& name, const std::vector<int64_t>& shape) {
    onnx::TensorProto* t = graph().add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : shape) t->add_dims(d);
    return t;
  }
  void init(const std::string& name, const std::vector<int64_t>& shape, const std::vector<float>& v,
            InitForm form = InitForm::Raw, const std::string& dir = "") {
    onnx::TensorProto* t = empty_initializer(name, shape);
    std::string bytes(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
    if (form == InitForm::Raw) {
      t->set_raw_data(bytes);
    } else if (form == InitForm::Typed) {
      for (float x : v) t->add_float_data(x);
    } else {
      std::string file = name + ".bin";
      std::ofstream(dir + "/" + file, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
      t->set_data_location(onnx::TensorProto::EXTERNAL);
      auto* kv = t->add_external_data();
      kv->set_key("location");
      kv->set_value(file);
    }
  }
  // An integer initializer of an ONNX integer type (INT8, UINT8, INT16, UINT16, INT32):
  // raw little-endian bytes of the type's width, or typed (int32_data) values.
  void init_int(const std::string& name, const std::vector<int64_t>& shape, const std::vector<int64_t>& v, int elem,
                bool raw = true) {
    onnx::TensorProto* t = graph().add_initializer();
    t->set_name(name);
    t->set_data_type(elem);
    for (int64_t d : shape) t->add_dims(d);
    const int width = elem == onnx::TensorProto::INT8 || elem == onnx::TensorProto::UINT8     ? 1
                      : elem == onnx::TensorProto::INT16 || elem == onnx::TensorProto::UINT16 ? 2
                                                                                              : 4;
    if (!raw) {
      for (int64_t x : v) t->add_int32_data(static_cast<int32_t>(x));
      return;
    }
    std::string bytes;
    for (int64_t x : v)
      for (int b = 0; b < width; ++b) bytes.push_back(static_cast<char>((static_cast<uint64_t>(x) >> (8 * b)) & 0xff));
    t->set_raw_data(bytes);
  }
  void init_i64(const std::string& name, const std::vector<int64_t>& v) {
    onnx::TensorProto* t = graph().add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(static_cast<int64_t>(v.size()));
    for (int64_t x : v) t->add_int64_data(x);
  }
  onnx::NodeProto* node(const std::string& op, const std::vector<std::string>& inputs,
                        const std::vector<std::string>& outputs, const std::string& name = "") {
    onnx::NodeProto* n = graph().add_node();
    n->set_op_type(op);
    n->set_name(name.empty() ? op + "_" + std::to_string(graph().node_size()) : name);
    for (const auto& i : inputs) n->add_input(i);
    for (const auto& o : outputs) n->add_output(o);
    return n;
  }
  static void attr_ints(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  }
  static void attr_int(onnx::NodeProto* n, const std::string& name, int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void attr_float(onnx::NodeProto* n, const std::string& name, float v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(v);
  }
  static void attr_string(onnx::NodeProto* n, const std::string& name, const std::string& v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(v);
  }
  void save(const std::string& path) const {
    std::string bytes;
    model_.SerializeToString(&bytes);
    std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }

 private:
  static void value_info(onnx::ValueInfoProto* vi, const std::string& name, const std::vector<int64_t>& shape,
                         int elem) {
    vi->set_name(name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elem);
    auto* s = tt->mutable_shape();
    for (int64_t d : shape) s->add_dim()->set_dim_value(d);
  }
  onnx::ModelProto model_;
};

// Deterministic values in [-1, 1).
inline std::vector<float> test_values(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  uint32_t s = seed * 2654435761u + 1;
  for (float& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<float>((s >> 8) & 0xffff) / 32768.0f - 1.0f;
  }
  return v;
}

// A small CNN: x[1,3,8,8] -> Conv(4, 3x3, pad 1) + bias -> Relu -> MaxPool 2x2 ->
// Flatten -> Gemm(4*4*4 -> 10, transB) -> y[1,10].
inline OnnxBuilder small_cnn(InitForm form = InitForm::Raw, const std::string& dir = "", int opset = 13) {
  OnnxBuilder b(opset, "small_cnn");
  b.input("x", {1, 3, 8, 8});
  b.init("w", {4, 3, 3, 3}, test_values(4 * 27, 1), form, dir);
  b.init("b", {4}, test_values(4, 2), form, dir);
  b.init("fc_w", {10, 64}, test_values(640, 3), form, dir);
  b.init("fc_b", {10}, test_values(10, 4), form, dir);
  auto* c = b.node("Conv", {"x", "w", "b"}, {"c"}, "conv0");
  OnnxBuilder::attr_ints(c, "pads", {1, 1, 1, 1});
  OnnxBuilder::attr_ints(c, "kernel_shape", {3, 3});
  b.node("Relu", {"c"}, {"r"}, "relu0");
  auto* p = b.node("MaxPool", {"r"}, {"p"}, "pool0");
  OnnxBuilder::attr_ints(p, "kernel_shape", {2, 2});
  OnnxBuilder::attr_ints(p, "strides", {2, 2});
  auto* f = b.node("Flatten", {"p"}, {"f"}, "flatten0");
  OnnxBuilder::attr_int(f, "axis", 1);
  auto* g = b.node("Gemm", {"f", "fc_w", "fc_b"}, {"y"}, "fc0");
  OnnxBuilder::attr_int(g, "transB", 1);
  b.output("y", {1, 10});
  return b;
}

// The bad-input corpus: file name -> what the one error line must contain. Writes
// every file into `dir`.
inline std::map<std::string, std::string> write_bad_onnx_corpus(const std::string& dir) {
  std::map<std::string, std::string> expect;
  {
    // Truncated: the first 60% of a valid file.
    std::string bytes;
    small_cnn().model().SerializeToString(&bytes);
    std::ofstream(dir + "/truncated.onnx", std::ios::binary)
        .write(bytes.data(), static_cast<std::streamsize>(bytes.size() * 6 / 10));
    expect["truncated.onnx"] = "truncated or corrupt";
  }
  {
    std::ofstream(dir + "/not_onnx.onnx") << "this is not a protobuf at all\n";
    expect["not_onnx.onnx"] = "truncated or corrupt";
  }
  {
    // Wrong dtype: a string input.
    OnnxBuilder b;
    b.input("x", {2, 3}, onnx::TensorProto::STRING);
    b.node("Relu", {"x"}, {"y"}, "relu_of_strings");
    b.output("y");
    b.save(dir + "/wrong_dtype.onnx");
    expect["wrong_dtype.onnx"] = "x";
  }
  {
    // Missing initializer: the node reads a weight that nothing defines.
    OnnxBuilder b;
    b.input("x", {2, 3});
    b.node("MatMul", {"x", "weight_not_there"}, {"y"}, "mm0");
    b.output("y");
    b.save(dir + "/missing_initializer.onnx");
    expect["missing_initializer.onnx"] = "weight_not_there";
  }
  {
    // A constant larger than the machine's memory (the fuzz target's first finding:
    // ConstantOfShape [2, 3 x 2^48] reached the allocator).
    OnnxBuilder b;
    b.input("x", {1, 1});
    b.init_i64("huge_shape", {int64_t{1} << 24, int64_t{1} << 24});
    b.node("ConstantOfShape", {"huge_shape"}, {"c"}, "huge_constant");
    b.node("Add", {"x", "c"}, {"y"}, "add_huge");
    b.output("y");
    b.save(dir + "/huge_constant.onnx");
    expect["huge_constant.onnx"] = "memory";
  }
  {
    // A cycle: a = relu(b), b = relu(a).
    OnnxBuilder b;
    b.input("x", {2, 3});
    b.node("Add", {"x", "b"}, {"a"}, "add_in_cycle");
    b.node("Relu", {"a"}, {"b"}, "relu_in_cycle");
    b.output("b");
    b.save(dir + "/cycle.onnx");
    expect["cycle.onnx"] = "cycle";
  }
  {
    OnnxBuilder b(99);
    b.input("x", {2, 3});
    b.node("Relu", {"x"}, {"y"});
    b.output("y");
    b.save(dir + "/unknown_opset.onnx");
    expect["unknown_opset.onnx"] = "opset 99";
  }
  {
    // Two unsupported operators: both named in the one error.
    OnnxBuilder b;
    b.input("x", {2, 3});
    b.node("Relu", {"x"}, {"r"});
    b.node("Unique", {"r"}, {"e"}, "my_unique");
    b.node("NonZero", {"e"}, {"y"}, "my_nonzero");
    b.output("y");
    b.save(dir + "/unsupported_ops.onnx");
    expect["unsupported_ops.onnx"] = "my_nonzero";
  }
  {
    // Mismatched shapes: [2, 3] + [4, 5].
    OnnxBuilder b;
    b.input("x", {2, 3});
    b.init("c", {4, 5}, test_values(20, 5));
    b.node("Add", {"x", "c"}, {"y"}, "bad_add");
    b.output("y");
    b.save(dir + "/mismatched_shapes.onnx");
    expect["mismatched_shapes.onnx"] = "bad_add";
  }
  {
    // An initializer whose raw data is shorter than its shape says.
    OnnxBuilder b;
    b.input("x", {2, 3});
    b.empty_initializer("short_weight", {3, 4})->set_raw_data(std::string(8, '\0'));
    b.node("MatMul", {"x", "short_weight"}, {"y"});
    b.output("y");
    b.save(dir + "/short_initializer.onnx");
    expect["short_initializer.onnx"] = "short_weight";
  }
  {
    // A symbolic batch extent.
    OnnxBuilder b;
    auto* vi = b.graph().add_input();
    vi->set_name("x");
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(onnx::TensorProto::FLOAT);
    tt->mutable_shape()->add_dim()->set_dim_param("batch");
    tt->mutable_shape()->add_dim()->set_dim_value(3);
    b.node("Relu", {"x"}, {"y"});
    b.output("y");
    b.save(dir + "/symbolic_shape.onnx");
    expect["symbolic_shape.onnx"] = "batch";
  }
  {
    // Externally stored data whose file is missing.
    OnnxBuilder b;
    b.input("x", {2, 3});
    onnx::TensorProto* t = b.empty_initializer("ext_w", {3, 4});
    t->set_data_location(onnx::TensorProto::EXTERNAL);
    auto* kv = t->add_external_data();
    kv->set_key("location");
    kv->set_value("no_such_file.bin");
    b.node("MatMul", {"x", "ext_w"}, {"y"});
    b.output("y");
    b.save(dir + "/missing_external_data.onnx");
    expect["missing_external_data.onnx"] = "no_such_file.bin";
  }
  // Convolutions and pools whose ranks or attribute lengths disagree: libonnx's own
  // shape inference indexes past its vectors on these, so the importer checks first.
  // Each is one node `op` on input x (and a weight w when given) with ints attributes.
  using Ints = std::vector<int64_t>;
  auto conv_family = [&](const std::string& file, const std::string& op, const Ints& x, const Ints& w,
                         const std::map<std::string, Ints>& attrs, const std::string& needle) {
    OnnxBuilder b(17);
    b.input("x", x);
    std::vector<std::string> inputs = {"x"};
    if (!w.empty()) {
      int64_t n = 1;
      for (int64_t e : w) n *= e;
      b.init("w", w, std::vector<float>(static_cast<size_t>(n), 0.5f));
      inputs.push_back("w");
    }
    auto* node = b.node(op, inputs, {"y"}, file.substr(0, file.size() - std::string(".onnx").size()));
    for (const auto& [name, values] : attrs) OnnxBuilder::attr_ints(node, name, values);
    b.output("y");
    b.save(dir + "/" + file);
    expect[file] = needle;
  };
  // A rank-2 input; the kernel comes from a 4-D weight (the fuzzer's finding).
  conv_family("conv_rank2_input.onnx", "Conv", {1, 6}, {3, 2, 3, 3}, {{"pads", {1, 1, 1, 117}}}, "rank 2");
  // A 1-D convolution's input with a 2-D convolution's weight and no kernel_shape.
  conv_family("conv_weight_rank.onnx", "Conv", {1, 2, 9}, {3, 2, 3, 3}, {}, "weight W has rank 4");
  conv_family("pool_strides_length.onnx", "MaxPool", {1, 2, 6, 6}, {},
              {{"kernel_shape", {2, 2}}, {"strides", {1, 1, 1}}}, "strides has 3 values");
  conv_family("conv_transpose_output_padding.onnx", "ConvTranspose", {1, 2, 4, 4}, {2, 3, 3, 3},
              {{"output_padding", {1}}}, "output_padding has 1 values");
  {
    // A rank-2 input computed by an earlier node.
    OnnxBuilder b(17);
    b.input("x", {1, 2, 5, 5});
    b.init("w", {3, 2, 3, 3}, std::vector<float>(54, 0.5f));
    OnnxBuilder::attr_int(b.node("Flatten", {"x"}, {"f"}), "axis", 2);
    b.node("Conv", {"f", "w"}, {"y"}, "conv_of_a_flattened");
    b.output("y");
    b.save(dir + "/conv_of_intermediate_rank2.onnx");
    expect["conv_of_intermediate_rank2.onnx"] = "rank 2";
  }
  return expect;
}

}  // namespace basin::testing
