// basin's QDQ writer (core/graph/onnx_quantize.h).
#include "core/graph/onnx_quantize.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <set>

#include "core/graph/graph.h"
#include "core/util/io.h"
#include "core/util/output_file.h"

namespace basin::graph {
namespace {

onnx::ModelProto read_model(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw GraphError("cannot open ONNX model '" + path + "'");
  const std::string bytes = read_rest(f);
  onnx::ModelProto m;
  if (bytes.empty() || !m.ParseFromString(bytes))
    throw GraphError("ONNX model '" + path + "': not a valid ONNX protobuf (the file is truncated or corrupt)");
  if (!m.has_graph()) throw GraphError("ONNX model '" + path + "': the model has no graph");
  int64_t opset = 0;
  for (const auto& o : m.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") opset = o.version();
  if (opset < 13)
    throw GraphError("ONNX model '" + path + "': opset " + std::to_string(opset) +
                     "; quantizing needs opset 13 or later (per-channel DequantizeLinear): export it so");
  return m;
}

// Written by the rules of every output file (core/util/output_file.h): never over the
// model it came from, a special file or a link, and whole or not at all.
void write_model(const onnx::ModelProto& m, const std::string& out, const std::string& from) {
  std::string bytes;
  if (!m.SerializeToString(&bytes)) throw GraphError("cannot serialize the model for '" + out + "'");
  write_output_file(out, [&](OutputFile& f) { f.write(bytes); }, {from});
}

const onnx::TensorProto* initializer(const onnx::GraphProto& g, const std::string& name) {
  for (const auto& t : g.initializer())
    if (t.name() == name) return &t;
  return nullptr;
}

int64_t attr_i(const onnx::NodeProto& n, const std::string& name, int64_t def) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return a.i();
  return def;
}
float attr_f(const onnx::NodeProto& n, const std::string& name, float def) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return a.f();
  return def;
}

// A float32 initializer's values (raw or typed; external data refused).
std::vector<float> floats_of(const onnx::TensorProto& t) {
  if (t.data_location() == onnx::TensorProto::EXTERNAL)
    throw GraphError("initializer '" + t.name() +
                     "' is in an external data file: basin quantize reads weights inside the model only");
  int64_t n = 1;
  for (int64_t d : t.dims()) n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  if (t.has_raw_data()) {
    if (t.raw_data().size() != v.size() * sizeof(float))
      throw GraphError("initializer '" + t.name() + "' holds " + std::to_string(t.raw_data().size()) + " bytes for " +
                       std::to_string(n) + " floats");
    std::memcpy(v.data(), t.raw_data().data(), t.raw_data().size());
  } else {
    if (t.float_data_size() != n) throw GraphError("initializer '" + t.name() + "' has the wrong number of values");
    for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = t.float_data(static_cast<int>(i));
  }
  return v;
}

bool is_float_initializer(const onnx::GraphProto& g, const std::string& name, size_t rank = 0) {
  const onnx::TensorProto* t = initializer(g, name);
  return t && t->data_type() == onnx::TensorProto::FLOAT && (rank == 0 || static_cast<size_t>(t->dims_size()) == rank);
}

std::vector<QuantizedProduct> products_of(const onnx::GraphProto& g) {
  std::vector<QuantizedProduct> out;
  for (const auto& n : g.node()) {
    if (!n.domain().empty() && n.domain() != "ai.onnx") continue;
    if (n.input_size() < 2 || n.output_size() < 1) continue;
    QuantizedProduct p;
    p.node = n.name().empty() ? n.output(0) : n.name();
    p.op = n.op_type();
    p.activation = n.input(0);
    p.weight = n.input(1);
    if (n.op_type() == "Conv") {
      if (!is_float_initializer(g, p.weight) || initializer(g, p.weight)->dims_size() < 3) continue;
      p.axis = 0;
      if (n.input_size() > 2 && is_float_initializer(g, n.input(2), 1)) p.bias = n.input(2);
    } else if (n.op_type() == "Gemm") {
      if (!is_float_initializer(g, p.weight, 2) || attr_i(n, "transA", 0) != 0 || attr_f(n, "alpha", 1.0f) != 1.0f ||
          attr_f(n, "beta", 1.0f) != 1.0f)
        continue;
      p.axis = attr_i(n, "transB", 0) != 0 ? 0 : 1;
      if (n.input_size() > 2 && is_float_initializer(g, n.input(2), 1)) p.bias = n.input(2);
    } else if (n.op_type() == "MatMul") {
      if (!is_float_initializer(g, p.weight, 2)) continue;
      p.axis = 1;
    } else {
      continue;
    }
    out.push_back(p);
  }
  return out;
}

onnx::TensorProto tensor(const std::string& name, int type, const std::vector<int64_t>& dims) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(type);
  for (int64_t d : dims) t.add_dims(d);
  return t;
}

onnx::NodeProto qdq_node(const std::string& op, const std::string& x, const std::string& scale, const std::string& zp,
                         const std::string& y, int64_t axis = -1) {
  onnx::NodeProto n;
  n.set_op_type(op);
  n.set_name(y);
  n.add_input(x);
  n.add_input(scale);
  n.add_input(zp);
  n.add_output(y);
  if (axis >= 0) {
    auto* a = n.add_attribute();
    a->set_name("axis");
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(axis);
  }
  return n;
}

}  // namespace

QuantizationPlan quantization_plan(const std::string& path) {
  const onnx::ModelProto m = read_model(path);
  QuantizationPlan plan;
  for (const auto& i : m.graph().input())
    if (!initializer(m.graph(), i.name())) plan.inputs.push_back(i.name());
  plan.products = products_of(m.graph());
  return plan;
}

void write_with_outputs(const std::string& path, const std::vector<std::string>& tensors, const std::string& out) {
  onnx::ModelProto m = read_model(path);
  std::set<std::string> have;
  for (const auto& o : m.graph().output()) have.insert(o.name());
  for (const std::string& t : tensors) {
    if (!have.insert(t).second) continue;
    auto* o = m.mutable_graph()->add_output();
    o->set_name(t);
    o->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  }
  write_model(m, out, path);
}

void write_qdq(const std::string& path, const std::map<std::string, std::pair<float, float>>& ranges,
               const std::string& out) {
  onnx::ModelProto m = read_model(path);
  onnx::GraphProto& g = *m.mutable_graph();
  std::set<std::string> names;
  for (const auto& t : g.initializer()) names.insert(t.name());
  for (const auto& n : g.node())
    for (const auto& o : n.output()) names.insert(o);
  for (const auto& i : g.input()) names.insert(i.name());
  auto fresh = [&](const std::string& base) {
    std::string name = base;
    for (int k = 1; names.count(name); ++k) name = base + "_" + std::to_string(k);
    names.insert(name);
    return name;
  };
  std::vector<onnx::TensorProto> added;
  std::vector<onnx::NodeProto> weight_nodes;
  std::map<std::string, std::vector<onnx::NodeProto>> before;  // Q/DQ nodes to insert before a node
  std::map<std::string, std::string> act_dq;                   // activation -> its dequantized tensor
  std::map<std::string, float> act_scale;
  std::map<std::pair<std::string, std::string>, std::string> renamed;  // (node, input) -> new input
  std::map<std::string, std::string> weight_dq;
  std::map<std::string, std::vector<float>> weight_scales;
  for (const QuantizedProduct& p : products_of(g)) {
    auto r = ranges.find(p.activation);
    if (r == ranges.end()) continue;
    // The activation: uint8 over its range, one Q/DQ pair however many products read it.
    if (!act_dq.count(p.activation)) {
      const float lo = std::min(0.0f, r->second.first), hi = std::max(0.0f, r->second.second);
      float scale = (hi - lo) / 255.0f;
      if (!(scale > 0.0f) || !std::isfinite(scale)) scale = 1.0f;
      const float z = std::nearbyint(-lo / scale);
      const int64_t zp = static_cast<int64_t>(std::min(255.0f, std::max(0.0f, z)));
      const std::string s = fresh(p.activation + "_scale"), zn = fresh(p.activation + "_zero_point");
      onnx::TensorProto st = tensor(s, onnx::TensorProto::FLOAT, {});
      st.add_float_data(scale);
      onnx::TensorProto zt = tensor(zn, onnx::TensorProto::UINT8, {});
      zt.add_int32_data(static_cast<int32_t>(zp));
      added.push_back(st);
      added.push_back(zt);
      const std::string q = fresh(p.activation + "_quantized"), dq = fresh(p.activation + "_dequantized");
      before[p.node].push_back(qdq_node("QuantizeLinear", p.activation, s, zn, q));
      before[p.node].push_back(qdq_node("DequantizeLinear", q, s, zn, dq));
      act_dq[p.activation] = dq;
      act_scale[p.activation] = scale;
    }
    renamed[{p.node, p.activation}] = act_dq[p.activation];
    // The weight: int8 per output channel, symmetric.
    if (!weight_dq.count(p.weight)) {
      const onnx::TensorProto& w = *initializer(g, p.weight);
      const std::vector<float> v = floats_of(w);
      std::vector<int64_t> dims(w.dims().begin(), w.dims().end());
      const int64_t channels = dims[static_cast<size_t>(p.axis)];
      int64_t inner = 1;
      for (size_t d = static_cast<size_t>(p.axis) + 1; d < dims.size(); ++d) inner *= dims[d];
      std::vector<float> amax(static_cast<size_t>(channels), 0.0f), scales(static_cast<size_t>(channels));
      for (size_t i = 0; i < v.size(); ++i) {
        const size_t c = static_cast<size_t>((static_cast<int64_t>(i) / inner) % channels);
        amax[c] = std::max(amax[c], std::fabs(v[i]));
      }
      for (size_t c = 0; c < scales.size(); ++c) scales[c] = amax[c] > 0.0f ? amax[c] / 127.0f : 1.0f;
      const std::string qn = fresh(p.weight + "_quantized"), s = fresh(p.weight + "_scale"),
                        zn = fresh(p.weight + "_zero_point"), dq = fresh(p.weight + "_dequantized");
      onnx::TensorProto qt = tensor(qn, onnx::TensorProto::INT8, dims);
      std::string bytes(v.size(), '\0');
      for (size_t i = 0; i < v.size(); ++i) {
        const size_t c = static_cast<size_t>((static_cast<int64_t>(i) / inner) % channels);
        const float q = std::min(127.0f, std::max(-127.0f, std::nearbyint(v[i] / scales[c])));
        bytes[i] = static_cast<char>(static_cast<int8_t>(q));
      }
      qt.set_raw_data(bytes);
      onnx::TensorProto st = tensor(s, onnx::TensorProto::FLOAT, {channels});
      for (float x : scales) st.add_float_data(x);
      onnx::TensorProto zt = tensor(zn, onnx::TensorProto::INT8, {channels});
      for (int64_t c = 0; c < channels; ++c) zt.add_int32_data(0);
      added.push_back(qt);
      added.push_back(st);
      added.push_back(zt);
      weight_nodes.push_back(qdq_node("DequantizeLinear", qn, s, zn, dq, p.axis));
      weight_dq[p.weight] = dq;
      weight_scales[p.weight] = scales;
    }
    renamed[{p.node, p.weight}] = weight_dq[p.weight];
    // The bias: int32 at the product's scale (float32 products, as the runtimes form them).
    if (!p.bias.empty()) {
      const std::vector<float> b = floats_of(*initializer(g, p.bias));
      const std::vector<float>& sw = weight_scales[p.weight];
      if (b.size() == sw.size()) {
        const float sx = act_scale[p.activation];
        const std::string qn = fresh(p.bias + "_quantized"), s = fresh(p.bias + "_scale"),
                          zn = fresh(p.bias + "_zero_point"), dq = fresh(p.bias + "_dequantized");
        onnx::TensorProto qt = tensor(qn, onnx::TensorProto::INT32, {static_cast<int64_t>(b.size())});
        onnx::TensorProto st = tensor(s, onnx::TensorProto::FLOAT, {static_cast<int64_t>(b.size())});
        onnx::TensorProto zt = tensor(zn, onnx::TensorProto::INT32, {static_cast<int64_t>(b.size())});
        for (size_t c = 0; c < b.size(); ++c) {
          const float scale = sx * sw[c];
          const double q = std::nearbyint(static_cast<double>(b[c]) / static_cast<double>(scale));
          qt.add_int32_data(static_cast<int32_t>(std::min(2147483647.0, std::max(-2147483648.0, q))));
          st.add_float_data(scale);
          zt.add_int32_data(0);
        }
        added.push_back(qt);
        added.push_back(st);
        added.push_back(zt);
        before[p.node].push_back(qdq_node("DequantizeLinear", qn, s, zn, dq, 0));
        renamed[{p.node, p.bias}] = dq;
      }
    }
  }
  // The nodes again: the weights' dequantizations first, each product's activation pair
  // and bias just before it, its inputs renamed.
  std::vector<onnx::NodeProto> nodes = weight_nodes;
  for (const auto& n : g.node()) {
    const std::string key = n.name().empty() ? (n.output_size() ? n.output(0) : "") : n.name();
    for (const onnx::NodeProto& b : before[key]) nodes.push_back(b);
    onnx::NodeProto copy = n;
    for (int i = 0; i < copy.input_size(); ++i) {
      auto it = renamed.find({key, copy.input(i)});
      if (it != renamed.end()) copy.set_input(i, it->second);
    }
    nodes.push_back(copy);
  }
  g.clear_node();
  for (onnx::NodeProto& n : nodes) *g.add_node() = std::move(n);
  // Float initializers no node reads any more (the quantized weights') are dropped.
  std::set<std::string> read;
  for (const auto& n : g.node())
    for (const auto& i : n.input()) read.insert(i);
  for (const auto& o : g.output()) read.insert(o.name());
  for (const auto& i : g.input()) read.insert(i.name());
  google::protobuf::RepeatedPtrField<onnx::TensorProto> kept;
  for (const auto& t : g.initializer())
    if (read.count(t.name())) *kept.Add() = t;
  for (const onnx::TensorProto& t : added) *kept.Add() = t;
  g.mutable_initializer()->Swap(&kept);
  write_model(m, out, path);
}

}  // namespace basin::graph
