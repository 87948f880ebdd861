// libFuzzer target, structure-aware: the input bytes are the decisions of a graph
// builder, not the file's bytes, so that every input is a well-formed ONNX protobuf
// whose *graph* is hostile: node counts up to a few hundred, operators of basin's
// table and unknown ones, inputs named before, after or never, outputs written twice or
// over a graph input, attributes of every type under their own and others' names,
// tensors of every element type, extents near the limits (0, 1, 2^31, 2^62, -1) and
// opsets 1 to 25. The importer and the passes of `basin compile` (constant folding,
// fusion into tasks) either build a graph or refuse it with basin::Error.
#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/graph/fusion.h"
#include "core/graph/model.h"
#include "core/graph/passes.h"
#include "core/util/error.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

// The decisions, read from the input; zeros once it is used up.
class Choices {
 public:
  Choices(const uint8_t* data, size_t size) : p_(data), end_(data + size) {}
  uint64_t bits(int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; i += 8) v = (v << 8) | (p_ < end_ ? *p_++ : 0);
    return n >= 64 ? v : v & ((uint64_t{1} << n) - 1);
  }
  size_t pick(size_t n) { return n <= 1 ? 0 : static_cast<size_t>(bits(16) % n); }
  bool coin() { return bits(8) & 1; }
  bool empty() const { return p_ >= end_; }
  // An extent: mostly small, sometimes at a limit.
  int64_t extent() {
    static const int64_t edge[] = {0, 1, 2, 3, 7, 64, int64_t{1} << 31, int64_t{1} << 62, -1, INT64_MAX};
    return bits(8) < 224 ? static_cast<int64_t>(1 + pick(6)) : edge[pick(std::size(edge))];
  }
  int64_t integer() {
    static const int64_t edge[] = {0, 1, -1, 2, -2, 3, int64_t{1} << 31, -(int64_t{1} << 62), INT64_MAX, INT64_MIN};
    return bits(8) < 160 ? static_cast<int64_t>(pick(5)) - 1 : edge[pick(std::size(edge))];
  }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
};

const char* const kOps[] = {"Add",
                            "Sub",
                            "Mul",
                            "Div",
                            "Relu",
                            "Sigmoid",
                            "Tanh",
                            "Conv",
                            "MatMul",
                            "Gemm",
                            "MaxPool",
                            "AveragePool",
                            "Reshape",
                            "Transpose",
                            "Concat",
                            "Split",
                            "Slice",
                            "Gather",
                            "Softmax",
                            "Flatten",
                            "Squeeze",
                            "Unsqueeze",
                            "ReduceSum",
                            "ReduceMean",
                            "ReduceMax",
                            "Clip",
                            "Pad",
                            "Expand",
                            "Where",
                            "Cast",
                            "Shape",
                            "ConstantOfShape",
                            "Constant",
                            "Range",
                            "Mod",
                            "Pow",
                            "Sqrt",
                            "Erf",
                            "LayerNormalization",
                            "BatchNormalization",
                            "Resize",
                            "Tile",
                            "GlobalAveragePool",
                            "ConvTranspose",
                            "Einsum",
                            "TopK",
                            "Equal",
                            "Less",
                            "Not",
                            "LeakyRelu",
                            "HardSwish",
                            "Identity",
                            "Dropout",
                            "NoSuchOp"};
const char* const kAttrs[] = {"axis",      "axes",      "perm",   "kernel_shape", "strides",     "pads",
                              "group",     "dilations", "split",  "keepdims",     "to",          "value",
                              "alpha",     "beta",      "transA", "transB",       "num_outputs", "epsilon",
                              "mode",      "equation",  "min",    "max",          "allowzero",   "auto_pad",
                              "ceil_mode", "fmod",      "k",      "largest"};
const int kTypes[] = {onnx::TensorProto::FLOAT,  onnx::TensorProto::INT64,  onnx::TensorProto::INT32,
                      onnx::TensorProto::DOUBLE, onnx::TensorProto::BOOL,   onnx::TensorProto::FLOAT16,
                      onnx::TensorProto::UINT8,  onnx::TensorProto::STRING, 0};

void tensor(Choices& c, onnx::TensorProto* t) {
  const int type = kTypes[c.pick(std::size(kTypes))];
  t->set_data_type(type);
  const size_t rank = c.pick(4);
  int64_t n = 1;
  for (size_t d = 0; d < rank; ++d) {
    const int64_t e = c.extent();
    t->add_dims(e);
    n = e >= 0 && e <= 8 && n <= 64 ? n * e : 65;
  }
  // Sometimes fewer or more values than the dims say.
  const int64_t values = c.bits(8) < 200 ? std::min<int64_t>(n, 64) : static_cast<int64_t>(c.pick(9));
  for (int64_t i = 0; i < values; ++i) {
    if (type == onnx::TensorProto::FLOAT) t->add_float_data(static_cast<float>(c.integer()) / 2);
    else if (type == onnx::TensorProto::DOUBLE) t->add_double_data(static_cast<double>(c.integer()));
    else if (type == onnx::TensorProto::INT64) t->add_int64_data(c.integer());
    else t->add_int32_data(static_cast<int32_t>(c.integer()));
  }
}

void attribute(Choices& c, onnx::NodeProto* n) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(c.bits(8) < 240 ? kAttrs[c.pick(std::size(kAttrs))] : "");
  switch (c.pick(7)) {
    case 0:
      a->set_type(onnx::AttributeProto::INT);
      a->set_i(c.integer());
      break;
    case 1:
      a->set_type(onnx::AttributeProto::INTS);
      for (size_t i = 0, k = c.pick(7); i < k; ++i) a->add_ints(c.integer());
      break;
    case 2:
      a->set_type(onnx::AttributeProto::FLOAT);
      a->set_f(static_cast<float>(c.integer()) / 4);
      break;
    case 3:
      a->set_type(onnx::AttributeProto::STRING);
      a->set_s(c.coin() ? "constant" : "ij,jk->ik");
      break;
    case 4:
      a->set_type(onnx::AttributeProto::TENSOR);
      tensor(c, a->mutable_t());
      break;
    case 5:
      a->set_type(onnx::AttributeProto::FLOATS);
      for (size_t i = 0, k = c.pick(5); i < k; ++i) a->add_floats(static_cast<float>(c.integer()));
      break;
    default:
      a->set_type(onnx::AttributeProto::UNDEFINED);
      break;
  }
}

void shape(Choices& c, onnx::ValueInfoProto* v, int type) {
  auto* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(type);
  auto* s = t->mutable_shape();
  for (size_t d = 0, rank = c.pick(5); d < rank; ++d) {
    auto* dim = s->add_dim();
    if (c.bits(8) < 16) dim->set_dim_param("n");
    else dim->set_dim_value(c.extent());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Choices c(data, size);
  onnx::ModelProto m;
  m.set_ir_version(static_cast<int64_t>(3 + c.pick(7)));
  auto* o = m.add_opset_import();
  o->set_domain("");
  o->set_version(static_cast<int64_t>(c.bits(8) < 200 ? 11 + c.pick(8) : c.pick(26)));
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("fuzz");
  std::vector<std::string> names;
  for (size_t i = 0, k = 1 + c.pick(3); i < k; ++i) {
    names.push_back("in" + std::to_string(i));
    auto* v = g->add_input();
    v->set_name(names.back());
    shape(c, v, c.bits(8) < 200 ? onnx::TensorProto::FLOAT : kTypes[c.pick(std::size(kTypes))]);
  }
  for (size_t i = 0, k = c.pick(4); i < k; ++i) {
    onnx::TensorProto* t = g->add_initializer();
    names.push_back("w" + std::to_string(i));
    t->set_name(names.back());
    tensor(c, t);
  }
  // A chain most of the time (each node reads recent values), up to 300 nodes.
  const size_t nodes = c.bits(8) < 240 ? 1 + c.pick(12) : 1 + c.pick(300);
  for (size_t i = 0; i < nodes && !c.empty(); ++i) {
    onnx::NodeProto* n = g->add_node();
    n->set_op_type(kOps[c.pick(std::size(kOps))]);
    if (c.coin()) n->set_name("n" + std::to_string(i));
    for (size_t k = 0, ins = c.pick(4); k <= ins; ++k) {
      const size_t r = c.bits(8);
      if (r < 8) n->add_input("");                 // an absent optional input
      else if (r < 12) n->add_input("undefined");  // read before (never) written
      else n->add_input(names[names.size() - 1 - c.pick(std::min<size_t>(names.size(), 4))]);
    }
    for (size_t k = 0, outs = c.bits(8) < 240 ? 1 : c.pick(4); k < outs; ++k) {
      const size_t r = c.bits(8);
      // Mostly a fresh name; sometimes one already written, or a graph input's.
      std::string name = r < 6 ? names[c.pick(names.size())] : "v" + std::to_string(i) + "_" + std::to_string(k);
      n->add_output(name);
      names.push_back(name);
    }
    for (size_t k = 0, attrs = c.pick(4); k < attrs; ++k) attribute(c, n);
  }
  for (size_t i = 0, k = 1 + c.pick(2); i < k; ++i) {
    auto* v = g->add_output();
    v->set_name(names[names.size() - 1 - c.pick(std::min<size_t>(names.size(), 3))]);
    if (c.coin()) shape(c, v, onnx::TensorProto::FLOAT);
  }
  std::string bytes;
  if (!m.SerializeToString(&bytes)) return 0;
  const std::string path =
      basin::fuzz::write_input("graph.onnx", reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  try {
    basin::graph::Graph gr = basin::graph::optimize(basin::graph::load_model(path));
    basin::graph::Partition p = basin::graph::partition(gr);
    (void)p;
  } catch (const basin::Error& e) {
    basin::fuzz::refused(e);
  }
  return 0;
}
