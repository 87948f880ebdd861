#include "core/graph/onnx_import.h"
#include "core/util/checked.h"

#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <system_error>

#include "core/graph/passes.h"
#include "core/ops/operators.h"
#include "core/util/io.h"

namespace basin::graph {

bool onnx_enabled() { return true; }

namespace {

using I = std::vector<int64_t>;

// libonnx's inference of Conv, ConvTranspose and the pools trusts the ranks of its
// inputs and the lengths of their attributes (a kernel taken from a weight of another
// rank indexes past the end of its vectors). Each of their inference functions is
// wrapped once by one that checks those against the input's rank first and fails
// with an InferenceError, which the importer reports as a model error.
void check_conv_pool_ranks(onnx::InferenceContext& ctx, const std::string& op) {
  auto shape_of = [&](size_t i) -> const onnx::TensorShapeProto* {
    if (i >= ctx.getNumInputs()) return nullptr;
    const onnx::TypeProto* t = ctx.getInputType(i);
    if (!t || !t->has_tensor_type() || !t->tensor_type().has_shape()) return nullptr;
    return &t->tensor_type().shape();
  };
  const onnx::TensorShapeProto* x = shape_of(0);
  if (!x) return;
  const int rank = x->dim_size();
  if (rank < 3) fail_shape_inference(op, ": input X has rank ", rank, ", at least 3 (N, C and a spatial axis)");
  const size_t spatial = static_cast<size_t>(rank - 2);
  if (op == "Conv" || op == "ConvTranspose") {
    const onnx::TensorShapeProto* w = shape_of(1);
    if (w && w->dim_size() != rank)
      fail_shape_inference(op, ": weight W has rank ", w->dim_size(), ", the input X ", rank);
  }
  auto check_length = [&](const char* name, size_t want) {
    const onnx::AttributeProto* a = ctx.getAttribute(name);
    if (a && static_cast<size_t>(a->ints_size()) != want)
      fail_shape_inference(op, ": attribute ", name, " has ", a->ints_size(), " values, ", want, " expected");
  };
  check_length("kernel_shape", spatial);
  check_length("strides", spatial);
  check_length("dilations", spatial);
  check_length("pads", 2 * spatial);
  if (op == "ConvTranspose") {
    check_length("output_padding", spatial);
    const onnx::AttributeProto* os = ctx.getAttribute("output_shape");
    if (os && os->ints_size() != static_cast<int>(spatial) && os->ints_size() != rank)
      fail_shape_inference(op, ": attribute output_shape has ", os->ints_size(), " values, ", spatial, " or ", rank,
                           " expected");
  }
}

// Opset 18's Split into `parts` without sizes: parts of ceil(extent / parts), the last
// one what is left; empty where that leaves a part empty or negative.
std::vector<int64_t> uneven_split(int64_t extent, int64_t parts) {
  if (parts < 1) return {};
  const int64_t chunk = (extent + parts - 1) / parts;
  if (parts > 1 && chunk * (parts - 1) >= extent) return {};
  std::vector<int64_t> sizes;
  for (int64_t p = 0; p < parts; ++p) sizes.push_back(std::min(chunk, extent - chunk * p));
  return sizes;
}

// The most dimensions a shape given as a tensor may have.
constexpr int64_t kMaxShapeRank = 64;

// Puts `first` before the linked release's inference of every version of `op` up to
// opset `newest`: first(ctx, whether the schema is the newest) checks the node, failing
// with an InferenceError, and returns true where it inferred the outputs itself.
void wrap_inference(const std::string& op, int newest,
                    const std::function<bool(onnx::InferenceContext&, bool)>& first) {
  bool is_newest = true;
  for (int version = newest; version >= 1; is_newest = false) {
    const onnx::OpSchema* schema = onnx::OpSchemaRegistry::Schema(op, version);
    if (!schema) break;
    version = schema->SinceVersion() - 1;
    onnx::InferenceFunction inner = schema->GetTypeAndShapeInferenceFunction();
    // The registry owns its schemas as mutable objects and hands out const views.
    const_cast<onnx::OpSchema*>(schema)->TypeAndShapeInferenceFunction(
        [first, inner, is_newest](onnx::InferenceContext& ctx) {
          if (!first(ctx, is_newest) && inner) inner(ctx);
        });
  }
}

void guard_onnx_inference() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (const std::string op : {"Conv", "ConvTranspose", "MaxPool", "AveragePool", "LpPool"})
      wrap_inference(op, 18, [op](onnx::InferenceContext& ctx, bool) {
        check_conv_pool_ranks(ctx, op);
        return false;
      });
    // LayerNormalization whose axis is outside the input's rank: the inference of the
    // ONNX release linked writes the mean's shape at that axis unchecked (a rank-0 input
    // and the default axis -1 crash it).
    wrap_inference("LayerNormalization", 25, [](onnx::InferenceContext& ctx, bool) {
      if (ctx.getNumInputs() > 0 && onnx::hasInputShape(ctx, 0)) {
        const int64_t rank = onnx::getInputShape(ctx, 0).dim_size();
        const onnx::AttributeProto* ax = ctx.getAttribute("axis");
        const int64_t axis = ax ? ax->i() : -1;
        if (axis < -rank || axis >= rank)
          fail_shape_inference("LayerNormalization: axis ", axis, " is outside the input's rank ", rank);
      }
      return false;
    });
    // A shape given as a tensor (ConstantOfShape's, Expand's and Reshape's) that is not
    // a constant: the linked release's inference makes one output dimension per element
    // of it, reading a rank-0 tensor's missing extent and allocating 2^62 dimensions
    // for one of that extent. Such a shape is a vector of at most kMaxShapeRank values.
    for (const auto& [op, index] :
         {std::pair<std::string, size_t>{"ConstantOfShape", 0}, std::pair<std::string, size_t>{"Expand", 1},
          std::pair<std::string, size_t>{"Reshape", 1}})
      wrap_inference(op, 25, [op = op, index = index](onnx::InferenceContext& ctx, bool) {
        if (ctx.getNumInputs() > index && onnx::hasInputShape(ctx, index)) {
          const onnx::TensorShapeProto& shape = onnx::getInputShape(ctx, index);
          if (shape.dim_size() != 1)
            fail_shape_inference(op, ": its shape input has rank ", shape.dim_size(), ", a vector expected");
          if (shape.dim(0).has_dim_value() &&
              (shape.dim(0).dim_value() < 0 || shape.dim(0).dim_value() > kMaxShapeRank))
            fail_shape_inference(op, ": its shape input has ", shape.dim(0).dim_value(), " values, at most ",
                                 kMaxShapeRank, " dimensions");
        }
        return false;
      });
    // A Split of no outputs: the linked release's inference divides by their count.
    // Split of opset 18 into num_outputs parts that the extent does not divide: the
    // specification makes the last part smaller, where the inference of the ONNX
    // release linked (whose newest Split may be opset 13's) refuses it. Only a node
    // with num_outputs (opset 18's attribute) is inferred here.
    wrap_inference("Split", 18, [](onnx::InferenceContext& ctx, bool newest) {
      if (ctx.getNumOutputs() == 0) fail_shape_inference("Split: the node has no outputs");
      const onnx::AttributeProto* num = newest ? ctx.getAttribute("num_outputs") : nullptr;
      const bool sizes_given = ctx.getNumInputs() > 1 && ctx.getInputType(1) != nullptr;
      if (!num || sizes_given || !onnx::hasInputShape(ctx, 0)) return false;
      const onnx::TensorShapeProto& shape = onnx::getInputShape(ctx, 0);
      const onnx::AttributeProto* ax = ctx.getAttribute("axis");
      const int64_t rank = shape.dim_size(), parts = static_cast<int64_t>(ctx.getNumOutputs());
      int64_t axis = ax ? ax->i() : 0;
      if (axis < 0) axis += rank;
      const std::vector<int64_t> sizes =
          axis >= 0 && axis < rank && shape.dim(static_cast<int>(axis)).has_dim_value() && num->i() == parts
              ? uneven_split(shape.dim(static_cast<int>(axis)).dim_value(), parts)
              : std::vector<int64_t>();
      if (sizes.empty()) return false;
      for (size_t i = 0; i < ctx.getNumOutputs(); ++i) {
        onnx::propagateElemTypeFromInputToOutput(ctx, 0, i);
        onnx::TensorShapeProto* out = ctx.getOutputType(i)->mutable_tensor_type()->mutable_shape();
        *out = shape;
        out->mutable_dim(static_cast<int>(axis))->set_dim_value(sizes[i]);
      }
      return true;
    });
  });
}

std::string dtype_name(int t) { return onnx::TensorProto_DataType_Name(static_cast<onnx::TensorProto_DataType>(t)); }

// The bytes of a narrow ONNX integer type (the quantized types: INT8 and UINT8, int8 and
// uint8 in basin's graphs; INT16 and UINT16, int32 holding their range), 0 for another.
int narrow_int_bytes(int t) {
  switch (t) {
    case onnx::TensorProto::INT8:
    case onnx::TensorProto::UINT8:
      return 1;
    case onnx::TensorProto::INT16:
    case onnx::TensorProto::UINT16:
      return 2;
    default:
      return 0;
  }
}

// The range of a quantized integer type (QuantizeLinear's saturation).
std::pair<int64_t, int64_t> int_range(int t) {
  switch (t) {
    case onnx::TensorProto::INT8:
      return {-128, 127};
    case onnx::TensorProto::UINT8:
      return {0, 255};
    case onnx::TensorProto::INT16:
      return {-32768, 32767};
    case onnx::TensorProto::UINT16:
      return {0, 65535};
    default:
      return {INT32_MIN, INT32_MAX};
  }
}

DType dtype_of(int t, const std::string& what) {
  if (t == onnx::TensorProto::INT8) return DType::i8();
  if (t == onnx::TensorProto::UINT8) return DType::u8();
  if (narrow_int_bytes(t)) return DType::i32();
  switch (t) {
    case onnx::TensorProto::FLOAT:
      return DType::f32();
    case onnx::TensorProto::INT64:
      return DType::i64();
    case onnx::TensorProto::INT32:
      return DType::i32();
    case onnx::TensorProto::DOUBLE:
      return DType::f64();
    case onnx::TensorProto::BOOL:
      return DType::boolean();
    default:
      throw GraphError(what + ": data type " + (t == 0 ? std::string("UNDEFINED") : dtype_name(t)) +
                       " is not supported (FLOAT, INT64, INT32, DOUBLE, BOOL; INT8, UINT8, INT16, UINT16 inside a "
                       "graph)");
  }
}

int64_t product(const I& s) { return checked_product(s); }

NDArray transpose2d(const NDArray& a) {
  const int64_t r = a.shape()[0], c = a.shape()[1];
  NDArray b(a.dtype(), {c, r});
  const size_t e = a.dtype().bytes();
  const auto* src = static_cast<const uint8_t*>(a.data());
  auto* dst = static_cast<uint8_t*>(b.data());
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < c; ++j) std::memcpy(dst + (j * r + i) * e, src + (i * c + j) * e, e);
  return b;
}

class Importer {
 public:
  Importer(std::string path, ImportOptions options) : path_(std::move(path)), options_(std::move(options)) {
    size_t slash = path_.find_last_of('/');
    dir_ = slash == std::string::npos ? "." : slash == 0 ? "/" : path_.substr(0, slash);
  }

  Graph run();

 private:
  // ---- errors ----
  [[noreturn]] void fail(const std::string& msg) const { throw GraphError("ONNX model '" + path_ + "': " + msg); }
  std::string node_desc(const onnx::NodeProto& n) const {
    return "node '" + (n.name().empty() ? n.output_size() ? n.output(0) : std::string("?") : n.name()) + "' (" +
           n.op_type() + ")";
  }

  // ---- tensors and attributes ----
  NDArray tensor(const onnx::TensorProto& t, const std::string& what) const;
  const onnx::AttributeProto* attr(const onnx::NodeProto& n, const std::string& name) const {
    for (const auto& a : n.attribute())
      if (a.name() == name) return &a;
    return nullptr;
  }
  // The attribute `name` when it is of `type` (null when absent). One of another type is
  // an error, never read as its field of `type` (0, or a default): an INT alpha is not a
  // FLOAT alpha of 0. An attribute without a type (UNDEFINED, written by old exporters)
  // is read by the field asked for.
  const onnx::AttributeProto* attr(const onnx::NodeProto& n, const std::string& name,
                                   onnx::AttributeProto::AttributeType type) const {
    const auto* a = attr(n, name);
    if (a && a->type() != type && a->type() != onnx::AttributeProto::UNDEFINED)
      fail(node_desc(n) + ": attribute '" + name + "' is " + onnx::AttributeProto::AttributeType_Name(a->type()) +
           "; it must be " + onnx::AttributeProto::AttributeType_Name(type));
    return a;
  }
  int64_t attr_i(const onnx::NodeProto& n, const std::string& name, int64_t def) const {
    const auto* a = attr(n, name, onnx::AttributeProto::INT);
    return a ? a->i() : def;
  }
  double attr_f(const onnx::NodeProto& n, const std::string& name, double def) const {
    const auto* a = attr(n, name, onnx::AttributeProto::FLOAT);
    return a ? a->f() : def;
  }
  std::string attr_s(const onnx::NodeProto& n, const std::string& name, const std::string& def) const {
    const auto* a = attr(n, name, onnx::AttributeProto::STRING);
    return a ? a->s() : def;
  }
  I attr_ints(const onnx::NodeProto& n, const std::string& name, I def) const {
    const auto* a = attr(n, name, onnx::AttributeProto::INTS);
    return a ? I(a->ints().begin(), a->ints().end()) : def;
  }

  // ---- values ----
  bool has_input(const onnx::NodeProto& n, int i) const { return i < n.input_size() && !n.input(i).empty(); }
  int in(const onnx::NodeProto& n, int i) const {
    if (!has_input(n, i)) fail(node_desc(n) + ": input " + std::to_string(i) + " is missing");
    auto it = vals_.find(n.input(i));
    if (it == vals_.end()) fail(node_desc(n) + " reads '" + n.input(i) + "', which nothing defines");
    return it->second;
  }
  const Value& val(int v) const { return g_.value(v); }
  const I& shape(int v) const { return g_.value(v).shape; }
  // A constant input's contents (shape arguments, axes, pads ...).
  const NDArray& const_in(const onnx::NodeProto& n, int i) const {
    int v = in(n, i);
    if (!val(v).constant)
      fail(node_desc(n) + ": input " + std::to_string(i) + " ('" + n.input(i) +
           "') must be a constant (basin compiles static shapes)");
    return val(v).data;
  }
  I const_ints(const onnx::NodeProto& n, int i) const {
    const NDArray& a = const_in(n, i);
    I out;
    for (int64_t k = 0; k < a.numel(); ++k) out.push_back(a.get_int(k));
    return out;
  }
  double const_scalar(const onnx::NodeProto& n, int i) const {
    const NDArray& a = const_in(n, i);
    if (a.numel() != 1) fail(node_desc(n) + ": input " + std::to_string(i) + " must be a scalar");
    return a.get(0);
  }
  int constant(const std::string& name, NDArray a) { return g_.add_constant(name, std::move(a)); }
  // A name for constants a node's conversion adds, unique to the node.
  std::string unique_name(const onnx::NodeProto& n) const {
    return (n.name().empty() ? (n.output_size() ? n.output(0) : n.op_type()) : n.name()) + ".k" +
           std::to_string(counter_);
  }
  int scalar(const std::string& name, double v) {
    NDArray a(DType::f32(), {});
    a.set(0, v);
    return constant(name, std::move(a));
  }
  // Adds a node; one whose inputs are all small constants is evaluated at once (shape
  // computations), so that the nodes after it see constants.
  int add(const onnx::NodeProto& n, const std::string& op, std::vector<int> inputs,
          const std::map<std::string, ops::AttrValue>& attrs = {}) {
    std::string name = (n.name().empty() ? n.op_type() : n.name()) + (counter_ ? "." + std::to_string(counter_) : "");
    ++counter_;
    int v;
    try {
      v = g_.add_node(op, inputs, attrs, name);
    } catch (const GraphError& e) {
      fail(node_desc(n) + ": " + e.what());
    }
    bool all_const = !inputs.empty();
    for (int i : inputs) all_const &= val(i).constant;
    if (all_const && val(v).numel() <= (1 << 16)) {
      std::vector<NDArray> data;
      for (int i : inputs) data.push_back(val(i).data);
      const Node& nd = g_.node(val(v).producer);
      return constant(name + ".folded", evaluate_node(op, nd.attrs, data));
    }
    return v;
  }
  int reshape(const onnx::NodeProto& n, int v, I s) {
    if (s == shape(v)) return v;
    if (val(v).constant) return constant(val(v).name + ".reshaped", val(v).data.reshaped(s));
    return add(n, "reshape", {v}, {{"new_shape", s}});
  }
  int axis(const onnx::NodeProto& n, int64_t a, size_t rank) const {
    int64_t r = static_cast<int64_t>(rank);
    if (a < -r || a >= r)
      fail(node_desc(n) + ": axis " + std::to_string(a) + " is out of range for rank " + std::to_string(r));
    return static_cast<int>(a < 0 ? a + r : a);
  }

  // ---- operators ----
  using Converter = std::function<std::vector<int>(Importer&, const onnx::NodeProto&)>;
  static const std::map<std::string, Converter>& converters();
  std::vector<int> conv(const onnx::NodeProto& n, bool transpose);
  // The convolution of x by w (Conv's attributes; no bias), the matrix product a b.
  // (pad_value: what x is padded with; 0 unless x holds integers with a zero point.)
  int conv_of(const onnx::NodeProto& n, int x, int w, bool transpose, int64_t pad_value = 0);
  int matmul_of(const onnx::NodeProto& n, int a, int b);
  std::vector<int> pool(const onnx::NodeProto& n, bool avg);
  std::vector<int> matmul(const onnx::NodeProto& n);
  std::vector<int> gemm(const onnx::NodeProto& n);
  std::vector<int> reduce(const onnx::NodeProto& n, const std::string& kind);
  std::vector<int> slice(const onnx::NodeProto& n);
  std::vector<int> split(const onnx::NodeProto& n);
  std::vector<int> softmax(const onnx::NodeProto& n, bool log);
  std::vector<int> scatter_nd(const onnx::NodeProto& n);
  std::vector<int> einsum(const onnx::NodeProto& n);
  std::vector<int> resize(const onnx::NodeProto& n);
  int transposed(const onnx::NodeProto& n, int v, const I& perm) {
    bool identity = true;
    for (size_t i = 0; i < perm.size(); ++i) identity &= perm[i] == static_cast<int64_t>(i);
    return identity ? v : add(n, "transpose", {v}, {{"perm", perm}});
  }
  I conv_pads(const onnx::NodeProto& n, const I& in_spatial, const I& kernel, const I& stride, const I& dilation);

  void check_support(const onnx::GraphProto& gp) const;
  void check_opset(const onnx::NodeProto& n) const;

  // ---- quantization ----
  // The quantized values (8- and 16-bit integers) and their ONNX type: initializers of
  // those types and the outputs of the operators that quantize.
  int qtype(const onnx::NodeProto& n, int v) const {
    auto it = qtype_.find(v);
    if (it == qtype_.end())
      fail(node_desc(n) + ": '" + val(v).name + "' is not a quantized tensor (INT8, UINT8, INT16 or UINT16)");
    return it->second;
  }
  int quantized(int v, int type) {
    qtype_[v] = type;
    return v;
  }
  // Input i of n if present, else a zero point of 0 shaped as the scale.
  int zero_point(const onnx::NodeProto& n, int i, int scale);
  // Integers q (or the float32 values they quantize), their scale and zero point, and
  // the axis of per-axis parameters: the operands of quantize_linear and
  // dequantize_linear. Or, for DequantizeLinear's outputs, what they came from, so that
  // an operator reading dequantized 8-bit integers runs on the integers.
  struct Dequantized {
    int q = -1, scale = -1, zero_point = -1;
    int64_t axis = 1;
  };
  std::map<int, Dequantized> dq_;
  // The parameters checked (a float32 scale; a zero point of its shape; one value, made
  // a scalar, or one per index of `axis` of x) and made the operators' (an int32 zero
  // point, the axis non-negative).
  Dequantized quant_params(const onnx::NodeProto& n, int x, int scale, int zp, int64_t axis);
  int quantize(const onnx::NodeProto& n, int x, int scale, int zp, int64_t axis, int type);
  int dequantize(const onnx::NodeProto& n, int q, int scale, int zp, int64_t axis);
  // v's Dequantized: DequantizeLinear's output, or a view of one (per tensor); null for
  // another value.
  const Dequantized* dequantized(const onnx::NodeProto& n, int v);
  std::map<int, int> qtype_;
  // INT8 activations held as uint8, each value plus 128 (their zero points too): the
  // integer dot-product instructions multiply unsigned bytes by signed ones, and the
  // weights are the signed side. Every QuantizeLinear to INT8 of a computed value makes
  // one; the operators that read them know it (kShiftAware); any other sees them
  // converted back to int8 (unshift).
  std::set<int> shifted_;
  int unshift(const onnx::NodeProto& n, int v);
  // v (an integer value or constant) as int32 plus k.
  int plus(const onnx::NodeProto& n, int v, int64_t k);
  // The integer form of a product (convolution, matrix product) of a dequantized 8-bit
  // activation x (per-tensor scale and zero point) by a dequantized 8-bit constant w
  // (per tensor, or per index of w_axis, its output channels): x's integers less its
  // zero point and w's less its own, whose product the operator sums exactly in int32,
  // and the float32 factor of the sum (x's scale times w's: [] or [w's extent along
  // w_axis]). QDQ models (onnxruntime.quantization's QDQ format) write every quantized
  // operator so. No value (ok false) where the operands are not of that form.
  //
  // Where w is a constant with zero points 0 (ONNX Runtime's int8 weights), the product
  // takes the 8-bit integers as they are, x's zero point then a correction of the sum
  // (-zero point x w's sum per output channel) and the value a convolution pads x with.
  // Otherwise both are int32 less their zero points.
  //
  // With `activations` (a matrix product, whose w may be computed: attention's), a w
  // that is another activation with parameters per tensor and a uint8 x also take the
  // 8-bit form: w held as int8 values w8 = w - 128 (a uint8 w; an int8 one as it is),
  // and sum (x - zx)(w - zw) = sum x w8 + c sum x - zx sum w8 - K zx c, c = (w - w8) -
  // zw; integer_matmul adds the sums of x's rows and w8's columns.
  struct IntegerOperands {
    bool ok = false;
    int x = -1, w = -1;
    NDArray scale, correction;  // correction: int32 [C] (empty: none)
    int64_t pad = 0;
    // The 8-bit form of two activations: c times the sum of x's row, -zx times the sum
    // of w8's column (0: no such term).
    int64_t row_factor = 0, col_factor = 0;
  };
  IntegerOperands integer_operands(const onnx::NodeProto& n, int x, int w, int64_t w_axis, bool activations = false);
  IntegerOperands integer_operands(const onnx::NodeProto& n, const Dequantized& qx, const Dequantized& qw,
                                   int64_t w_axis, bool activations = false);
  // The int32 matrix product of q's operands (matmul_of), with the sums of the 8-bit
  // form of two activations.
  int integer_matmul(const onnx::NodeProto& n, const IntegerOperands& q);
  // The int32 sum of an integer product plus q's correction and the int32 bias (a value
  // [C], or -1), as float32 scaled by q's factor; C placed on `axis` of acc.
  int integer_result(const onnx::NodeProto& n, int acc, const IntegerOperands& q, int bias, int64_t axis);
  // The int32 integers of a bias dequantized with the product's own factor (per channel
  // or per tensor, zero point 0: how QDQ models store a bias), so that it joins the sum
  // before the one scaling, as the runtimes add it; -1 for another bias.
  int integer_bias(const onnx::NodeProto& n, int bias, const NDArray& factor);
  // x (int32, a sum of products) as float32 times factor (shape [] or [C], C placed on
  // `axis` of x).
  int scale_sum(const onnx::NodeProto& n, int acc, const NDArray& factor, int64_t axis);
  std::vector<int> dynamic_quantize(const onnx::NodeProto& n);
  std::vector<int> qlinear(const onnx::NodeProto& n, bool conv);
  std::vector<int> integer_product(const onnx::NodeProto& n, bool conv);

  void fix_symbolic_shapes(onnx::GraphProto& gp) const;

  std::string path_, dir_;
  ImportOptions options_;
  int opset_ = 0;
  Graph g_;
  std::map<std::string, int> vals_;
  int counter_ = 0;
};

NDArray Importer::tensor(const onnx::TensorProto& t, const std::string& what) const {
  DType dt = dtype_of(t.data_type(), what);
  I s(t.dims().begin(), t.dims().end());
  for (int64_t e : s)
    if (e < 0) fail(what + ": negative extent in " + shape_str(s));
  NDArray a(dt, s);
  // The narrow integers: 8-bit ones keep their bytes; 16-bit ones are stored in two
  // bytes and widened to int32 here.
  const int narrow = narrow_int_bytes(t.data_type());
  const bool is_signed = t.data_type() == onnx::TensorProto::INT8 || t.data_type() == onnx::TensorProto::INT16;
  const bool widened = narrow == 2;
  const size_t nbytes = widened ? static_cast<size_t>(a.numel()) * 2 : a.nbytes();
  std::string narrow_bytes;
  char* dest = static_cast<char*>(a.data());
  if (widened) {
    narrow_bytes.resize(nbytes);
    dest = narrow_bytes.data();
  }
  auto widen = [&](const char* src) {
    for (int64_t i = 0; i < a.numel(); ++i) {
      const auto* b = reinterpret_cast<const unsigned char*>(src) + i * 2;
      const int64_t v = b[0] | (b[1] << 8);  // little-endian, as ONNX stores raw data
      a.set_int(i, is_signed && v >= 32768 ? v - 65536 : v);
    }
  };
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    std::string location;
    int64_t offset = 0, length = -1;
    auto number = [&](const std::string& key, const std::string& v) {
      int64_t x = -1;
      size_t used = 0;
      try {
        x = std::stoll(v, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used == 0 || used != v.size() || x < 0)
        fail(what + ": external data " + key + " '" + v + "' is not a byte count");
      return x;
    };
    for (const auto& kv : t.external_data()) {
      if (kv.key() == "location") location = kv.value();
      else if (kv.key() == "offset") offset = number("offset", kv.value());
      else if (kv.key() == "length") length = number("length", kv.value());
    }
    if (location.empty()) fail(what + ": external data without a location");
    // Only files of the model's folder or below: no absolute path, no "..", and the
    // resolved path (links followed) still inside the folder.
    if (location[0] == '/' || location.find('\0') != std::string::npos)
      fail(what + ": external data location '" + location + "' is absolute; it must be relative to the model's folder");
    for (size_t at = 0; at <= location.size();) {
      size_t next = location.find('/', at);
      if (next == std::string::npos) next = location.size();
      if (location.compare(at, next - at, "..") == 0 && next - at == 2)
        fail(what + ": external data location '" + location + "' leaves the model's folder");
      at = next + 1;
    }
    const std::string file = dir_ + "/" + location;
    std::error_code ec;
    const std::filesystem::path real = std::filesystem::canonical(file, ec);
    const std::filesystem::path root = std::filesystem::canonical(dir_.empty() ? "." : dir_, ec);
    if (real.empty() || root.empty()) fail(what + ": cannot open its external data file '" + file + "'");
    const std::string rs = real.string(), ro = root.string();
    if (rs.compare(0, ro.size(), ro) != 0 || (rs.size() > ro.size() && rs[ro.size()] != '/' && ro != "/"))
      fail(what + ": external data '" + location + "' resolves outside the model's folder");
    if (!std::filesystem::is_regular_file(real, ec))
      fail(what + ": external data '" + file + "' is not a regular file");
    const int64_t size = static_cast<int64_t>(std::filesystem::file_size(real, ec));
    if (ec) fail(what + ": cannot read the size of external data file '" + file + "'");
    if (length < 0) length = static_cast<int64_t>(nbytes);
    if (length != static_cast<int64_t>(nbytes) || offset > size || length > size - offset)
      fail(what + ": external data '" + file + "' holds " + std::to_string(size) + " bytes; the tensor needs " +
           std::to_string(nbytes) + " at offset " + std::to_string(offset));
    std::ifstream f(real, std::ios::binary);
    if (!f) fail(what + ": cannot open its external data file '" + file + "'");
    if (options_.files_read) options_.files_read->push_back(rs);
    f.seekg(offset);
    f.read(dest, static_cast<std::streamsize>(nbytes));
    if (f.gcount() != static_cast<std::streamsize>(nbytes)) fail(what + ": external data '" + file + "' ended early");
    if (widened) widen(dest);
    return a;
  }
  if (t.has_raw_data()) {
    if (t.raw_data().size() != nbytes)
      fail(what + ": raw data has " + std::to_string(t.raw_data().size()) + " bytes; shape " + shape_str(s) + " of " +
           dtype_name(t.data_type()) + " needs " + std::to_string(nbytes));
    if (widened) widen(t.raw_data().data());
    else std::memcpy(a.data(), t.raw_data().data(), nbytes);
    return a;
  }
  auto typed = [&](int64_t count, const std::function<double(int)>& get) {
    if (count != a.numel())
      fail(what + ": has " + std::to_string(count) + " values; shape " + shape_str(s) + " needs " +
           std::to_string(a.numel()));
    for (int64_t i = 0; i < count; ++i) a.set(i, get(static_cast<int>(i)));
  };
  switch (t.data_type()) {
    case onnx::TensorProto::FLOAT:
      typed(t.float_data_size(), [&](int i) { return t.float_data(i); });
      break;
    case onnx::TensorProto::DOUBLE:
      typed(t.double_data_size(), [&](int i) { return t.double_data(i); });
      break;
    case onnx::TensorProto::INT64:
      if (t.int64_data_size() != a.numel())
        fail(what + ": has " + std::to_string(t.int64_data_size()) + " values; shape " + shape_str(s) + " needs " +
             std::to_string(a.numel()));
      for (int64_t i = 0; i < a.numel(); ++i) a.set_int(i, t.int64_data(static_cast<int>(i)));
      break;
    default:  // INT32, BOOL, and the narrow integers (wrapped to their width, as a C cast would)
      if (t.int32_data_size() != a.numel())
        fail(what + ": has " + std::to_string(t.int32_data_size()) + " values; shape " + shape_str(s) + " needs " +
             std::to_string(a.numel()));
      for (int64_t i = 0; i < a.numel(); ++i) {
        int64_t v = t.int32_data(static_cast<int>(i));
        if (narrow) {
          const int64_t span = int64_t{1} << (8 * narrow);
          v &= span - 1;
          if (is_signed && v >= span / 2) v -= span;
        }
        a.set_int(i, v);
      }
      break;
  }
  return a;
}

I Importer::conv_pads(const onnx::NodeProto& n, const I& in_s, const I& k, const I& st, const I& dil) {
  const size_t r = k.size();
  std::string auto_pad = attr_s(n, "auto_pad", "NOTSET");
  I pads = attr_ints(n, "pads", I(2 * r, 0));
  if (auto_pad == "VALID") pads.assign(2 * r, 0);
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    pads.assign(2 * r, 0);
    for (size_t d = 0; d < r; ++d) {
      int64_t out = (in_s[d] + st[d] - 1) / st[d];
      int64_t total = std::max<int64_t>(0, (out - 1) * st[d] + (k[d] - 1) * dil[d] + 1 - in_s[d]);
      pads[d] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      pads[d + r] = total - pads[d];
    }
  }
  if (pads.size() != 2 * r)
    fail(node_desc(n) + ": pads has " + std::to_string(pads.size()) + " values, expected " + std::to_string(2 * r));
  return pads;
}

std::vector<int> Importer::conv(const onnx::NodeProto& n, bool transpose) {
  int x = in(n, 0), w = in(n, 1);
  int y;
  const IntegerOperands q = transpose ? IntegerOperands{} : integer_operands(n, x, w, 0);
  if (q.ok) {
    y = conv_of(n, q.x, q.w, false, q.pad);
    const int b = has_input(n, 2) ? integer_bias(n, in(n, 2), q.scale) : -1;
    y = integer_result(n, y, q, b, 1);
    if (b >= 0) return {y};
  } else {
    y = conv_of(n, x, w, transpose);
  }
  if (has_input(n, 2)) {
    int b = in(n, 2);
    I bs(shape(x).size() - 1, 1);
    bs[0] = shape(b).at(0);
    y = add(n, "add", {y, reshape(n, b, bs)});
  }
  return {y};
}

int Importer::conv_of(const onnx::NodeProto& n, int x, int w, bool transpose, int64_t pad_value) {
  const I& xs = shape(x);
  const I& ws = shape(w);
  if (xs.size() < 3 || ws.size() != xs.size())
    fail(node_desc(n) + ": input " + shape_str(xs) + " and weight " + shape_str(ws) + " do not match");
  const size_t r = xs.size() - 2;
  I k = attr_ints(n, "kernel_shape", I(ws.begin() + 2, ws.end()));
  I st = attr_ints(n, "strides", I(r, 1)), dil = attr_ints(n, "dilations", I(r, 1));
  int64_t group = attr_i(n, "group", 1);
  I in_s(xs.begin() + 2, xs.end());
  int y;
  if (transpose) {
    if (r != 2) fail(node_desc(n) + ": only 2-D transposed convolutions are supported");
    if (attr(n, "output_shape")) fail(node_desc(n) + ": attribute output_shape is not supported (give pads)");
    I pads = attr_ints(n, "pads", I(4, 0));
    if (pads[0] != pads[2] || pads[1] != pads[3]) fail(node_desc(n) + ": asymmetric pads are not supported");
    y = add(n, "conv2d_transpose", {x, w},
            {{"stride", st},
             {"padding", I{pads[0], pads[1]}},
             {"output_padding", attr_ints(n, "output_padding", I{0, 0})},
             {"dilation", dil},
             {"groups", group}});
  } else {
    I pads = conv_pads(n, in_s, k, st, dil);
    I begin(pads.begin(), pads.begin() + static_cast<long>(r)), end(pads.begin() + static_cast<long>(r), pads.end());
    if (begin != end) {
      I full(2 * (r + 2), 0);
      for (size_t d = 0; d < r; ++d) {
        full[d + 2] = begin[d];
        full[r + 2 + d + 2] = end[d];
      }
      x = add(n, "pad", {x},
              {{"pads", full}, {"value", static_cast<double>(pad_value)}, {"mode", std::string("constant")}});
      begin.assign(r, 0);
    }
    y = add(n, "conv" + std::to_string(r) + "d", {x, w},
            {{"stride", st}, {"padding", begin}, {"dilation", dil}, {"groups", group}, {"pad_value", pad_value}});
  }
  return y;
}

std::vector<int> Importer::pool(const onnx::NodeProto& n, bool avg) {
  int x = in(n, 0);
  if (shape(x).size() != 4) fail(node_desc(n) + ": only 2-D pooling is supported, input " + shape_str(shape(x)));
  I k = attr_ints(n, "kernel_shape", {});
  if (k.size() != 2) fail(node_desc(n) + ": kernel_shape must have 2 values");
  I st = attr_ints(n, "strides", I{1, 1}), dil = attr_ints(n, "dilations", I{1, 1});
  I pads = conv_pads(n, {shape(x)[2], shape(x)[3]}, k, st, dil);
  if (pads[0] != pads[2] || pads[1] != pads[3]) fail(node_desc(n) + ": asymmetric pads are not supported");
  std::map<std::string, ops::AttrValue> a = {{"kernel", k},
                                             {"stride", st},
                                             {"padding", I{pads[0], pads[1]}},
                                             {"dilation", dil},
                                             {"ceil_mode", attr_i(n, "ceil_mode", 0) != 0 ? int64_t{1} : int64_t{0}}};
  if (avg) a["count_include_pad"] = attr_i(n, "count_include_pad", 0);
  return {add(n, avg ? "avg_pool2d" : "max_pool2d", {x}, a)};
}

std::vector<int> Importer::matmul(const onnx::NodeProto& n) {
  const int a = in(n, 0), b = in(n, 1);
  const IntegerOperands q = integer_operands(n, a, b, static_cast<int64_t>(shape(b).size()) - 1, true);
  if (q.ok) return {integer_result(n, integer_matmul(n, q), q, -1, -1)};
  return {matmul_of(n, a, b)};
}

int Importer::matmul_of(const onnx::NodeProto& n, int a, int b) {
  I as = shape(a), bs = shape(b);
  if (as.size() < 2 || bs.size() < 2) fail(node_desc(n) + ": 1-D operands are not supported");
  const int64_t k = as.back();
  if (bs[bs.size() - 2] != k)
    fail(node_desc(n) + ": shapes " + shape_str(as) + " and " + shape_str(bs) + " do not multiply");
  if (bs.size() == 2) {
    // x[..., K] w[K, N]: rows of x through a dense layer (a constant w is stored transposed).
    const int64_t m = product(as) / k, nn = bs[1];
    int x2 = reshape(n, a, {m, k});
    int y = val(b).constant ? add(n, "dense", {x2, constant(val(b).name + ".T", transpose2d(val(b).data))})
                            : add(n, "matmul", {x2, b});
    I out(as.begin(), as.end() - 1);
    out.push_back(nn);
    return reshape(n, y, out);
  }
  if (as.size() != bs.size() || !std::equal(as.begin(), as.end() - 2, bs.begin()))
    fail(node_desc(n) + ": batched operands " + shape_str(as) + " and " + shape_str(bs) +
         " must have equal batch extents");
  const int64_t batch = product(I(as.begin(), as.end() - 2));
  const int64_t m = as[as.size() - 2], nn = bs.back();
  int y = add(n, "batch_matmul", {reshape(n, a, {batch, m, k}), reshape(n, b, {batch, k, nn})});
  I out(as.begin(), as.end() - 1);
  out.push_back(nn);
  return reshape(n, y, out);
}

std::vector<int> Importer::gemm(const onnx::NodeProto& n) {
  int a = in(n, 0), b = in(n, 1);
  for (int v : {a, b})
    if (val(v).shape.size() != 2)
      fail(node_desc(n) + ": operand '" + val(v).name + "' has rank " + std::to_string(val(v).shape.size()) +
           ", Gemm takes two matrices");
  const bool trans_b = attr_i(n, "transB", 0) != 0;
  const IntegerOperands q = attr_i(n, "transA", 0) ? IntegerOperands{} : integer_operands(n, a, b, trans_b ? 0 : 1);
  if (attr_i(n, "transA", 0)) a = add(n, "transpose", {a}, {{"perm", I{1, 0}}});
  int y;
  const int int_bias = q.ok && has_input(n, 2) && attr_f(n, "alpha", 1) == 1 && attr_f(n, "beta", 1) == 1
                           ? integer_bias(n, in(n, 2), q.scale)
                           : -1;
  if (q.ok) {
    y = integer_result(n, trans_b ? add(n, "dense", {q.x, q.w}) : matmul_of(n, q.x, q.w), q, int_bias, -1);
    if (int_bias >= 0) return {y};
  } else if (trans_b) {
    y = add(n, "dense", {a, b});
  } else if (val(b).constant) {
    y = add(n, "dense", {a, constant(val(b).name + ".T", transpose2d(val(b).data))});
  } else {
    y = add(n, "matmul", {a, b});
  }
  double alpha = attr_f(n, "alpha", 1), beta = attr_f(n, "beta", 1);
  if (alpha != 1) y = add(n, "mul", {y, scalar(n.name() + ".alpha", alpha)});
  if (has_input(n, 2) && beta != 0) {
    int c = in(n, 2);
    if (beta != 1) c = add(n, "mul", {c, scalar(n.name() + ".beta", beta)});
    y = add(n, "add", {y, c});
  }
  return {y};
}

// ---- quantization ----

int Importer::zero_point(const onnx::NodeProto& n, int i, int scale) {
  if (has_input(n, i)) return in(n, i);
  return quantized(constant(unique_name(n) + ".zero_point", NDArray(DType::i32(), shape(scale))),
                   onnx::TensorProto::UINT8);
}

Importer::Dequantized Importer::quant_params(const onnx::NodeProto& n, int x, int scale, int zp, int64_t axis) {
  if (val(scale).dtype != DType::f32())
    fail(node_desc(n) + ": scale '" + val(scale).name + "' is " + val(scale).dtype.str() + "; basin takes FLOAT");
  Dequantized d{x, scale, zp, 1};
  if (shifted_.count(x)) d.zero_point = zp = plus(n, zp, 128);  // the zero point of values held plus 128
  if (val(scale).numel() == 1 && val(zp).numel() == 1) {        // one value each, of any rank
    d.scale = reshape(n, scale, {});
    d.zero_point = reshape(n, zp, {});
  } else {
    if (shape(scale) != shape(zp))
      fail(node_desc(n) + ": zero point " + shape_str(shape(zp)) + " and scale " + shape_str(shape(scale)) +
           " differ in shape");
    d.axis = this->axis(n, axis, shape(x).size());
    if (shape(scale).size() != 1 || shape(scale)[0] != shape(x)[static_cast<size_t>(d.axis)])
      fail(node_desc(n) + ": scale " + shape_str(shape(scale)) + " is neither one value nor one per index of axis " +
           std::to_string(d.axis) + " of " + shape_str(shape(x)) +
           (shape(scale).size() > 1 ? " (blocked quantization is not supported)" : ""));
  }
  if (val(d.zero_point).dtype != DType::i32())
    d.zero_point = add(n, "cast", {d.zero_point}, {{"to", std::string("int32")}});
  return d;
}

int Importer::quantize(const onnx::NodeProto& n, int x, int scale, int zp, int64_t axis, int type) {
  // Q(DQ(q)) with DQ's own scale, zero point and type is q, exactly: (q - z) s / s rounds
  // back to the integer q - z (|q - z| <= 255, s normal), within the type's range. QDQ
  // models requantize so around every view and transpose.
  if (!val(x).constant && val(scale).constant && val(scale).numel() == 1 && val(zp).constant && val(zp).numel() == 1 &&
      val(scale).dtype == DType::f32()) {
    if (const Dequantized* src = dequantized(n, x)) {
      const auto t = qtype_.find(src->q);
      const double s = val(scale).data.get(0);
      const bool shifted = shifted_.count(src->q) != 0;
      if (t != qtype_.end() && t->second == type && narrow_int_bytes(type) == 1 && val(src->scale).constant &&
          val(src->scale).numel() == 1 && val(src->zero_point).constant && std::isnormal(static_cast<float>(s)) &&
          std::isfinite(static_cast<float>(s) * 256.0f) &&
          static_cast<float>(val(src->scale).data.get(0)) == static_cast<float>(s) &&
          shifted == (type == onnx::TensorProto::INT8) &&
          val(src->zero_point).data.get_int(0) == val(zp).data.get_int(0) + (shifted ? 128 : 0))
        return src->q;
    }
  }
  Dequantized d = quant_params(n, x, scale, zp, axis);
  auto [lo, hi] = int_range(type);
  const bool shift = type == onnx::TensorProto::INT8 && !val(x).constant && val(d.zero_point).constant;
  if (shift) {  // held as uint8 plus 128 (shifted_)
    d.zero_point = plus(n, d.zero_point, 128);
    lo += 128;
    hi += 128;
  }
  const int q = quantized(
      add(n, "quantize_linear", {x, d.scale, d.zero_point}, {{"axis", d.axis}, {"qmin", lo}, {"qmax", hi}}), type);
  if (shift) shifted_.insert(q);
  return q;
}

int Importer::unshift(const onnx::NodeProto& n, int v) {
  return quantized(add(n, "cast", {plus(n, v, -128)}, {{"to", std::string("int8")}}), onnx::TensorProto::INT8);
}

int Importer::plus(const onnx::NodeProto& n, int v, int64_t k) {
  const int wide = val(v).dtype == DType::i32() ? v : add(n, "cast", {v}, {{"to", std::string("int32")}});
  NDArray offset(DType::i32(), {});
  offset.set_int(0, k);
  return add(n, "add", {wide, constant(unique_name(n) + ".offset", std::move(offset))});
}

int Importer::dequantize(const onnx::NodeProto& n, int q, int scale, int zp, int64_t axis) {
  const Dequantized d = quant_params(n, q, scale, zp, axis);
  const int y = add(n, "dequantize_linear", {q, d.scale, d.zero_point}, {{"axis", d.axis}});
  dq_[y] = d;
  return y;
}

const Importer::Dequantized* Importer::dequantized(const onnx::NodeProto& n, int v) {
  auto it = dq_.find(v);
  if (it != dq_.end()) return &it->second;
  // A view (Flatten, Reshape, Squeeze ...) of per-tensor dequantized integers is the
  // dequantized view of the integers.
  // A transpose of them is the dequantized transpose of the integers.
  const int p = val(v).producer;
  if (p < 0 || (g_.node(p).op != "reshape" && g_.node(p).op != "transpose")) return nullptr;
  const bool transpose = g_.node(p).op == "transpose";
  const std::map<std::string, ops::AttrValue> attrs = g_.node(p).attrs.values();
  const Dequantized* src = dequantized(n, g_.node(p).inputs[0]);
  if (!src || val(src->scale).numel() != 1) return nullptr;
  Dequantized d = *src;
  d.q = transpose ? add(n, "transpose", {src->q}, attrs) : reshape(n, src->q, shape(v));
  if (auto t = qtype_.find(src->q); t != qtype_.end()) quantized(d.q, t->second);
  if (shifted_.count(src->q)) shifted_.insert(d.q);
  return &(dq_[v] = d);
}

Importer::IntegerOperands Importer::integer_operands(const onnx::NodeProto& n, int x, int w, int64_t w_axis,
                                                     bool activations) {
  const Dequantized *dx = dequantized(n, x), *dw = dequantized(n, w);
  if (!dx || !dw) return {};
  const Dequantized qx = *dx, qw = *dw;  // (copies: adding values moves dq_'s)
  return integer_operands(n, qx, qw, w_axis, activations);
}

Importer::IntegerOperands Importer::integer_operands(const onnx::NodeProto& n, const Dequantized& qx,
                                                     const Dequantized& qw, int64_t w_axis, bool activations) {
  IntegerOperands r;
  auto constant_of = [&](int v) { return val(v).constant; };
  auto eight_bit = [&](int v) {
    auto it = qtype_.find(v);
    return it != qtype_.end() && narrow_int_bytes(it->second) == 1;
  };
  // 8-bit integers; scales and zero points constants; x's per tensor; w's per tensor or
  // per index of w_axis; w's integers a constant unless its parameters are per tensor.
  if (!eight_bit(qx.q) || !eight_bit(qw.q) || !constant_of(qx.scale) || !constant_of(qx.zero_point) ||
      !constant_of(qw.scale) || !constant_of(qw.zero_point) || val(qx.scale).numel() != 1)
    return r;
  // (Copies: adding values below moves the graph's values.)
  const NDArray sw = val(qw.scale).data, zw = val(qw.zero_point).data;
  const bool per_axis = sw.numel() != 1;
  if (per_axis && (qw.axis != w_axis || !constant_of(qw.q))) return r;
  const float sx = static_cast<float>(val(qx.scale).data.get(0));
  r.scale = NDArray(DType::f32(), per_axis ? I{sw.numel()} : I{});
  for (int64_t c = 0; c < r.scale.numel(); ++c)
    r.scale.as<float>()[c] = sx * static_cast<float>(sw.get(c));  // float32 products, as the runtimes compute them
  const int64_t zx = val(qx.zero_point).data.get_int(0);
  bool zero_zw = true;
  for (int64_t i = 0; i < zw.numel(); ++i) zero_zw &= zw.get_int(i) == 0;
  r.ok = true;
  if (!constant_of(qw.q) && activations && !per_axis && val(qx.q).dtype == DType::u8() &&
      (val(qw.q).dtype == DType::u8() || val(qw.q).dtype == DType::i8())) {
    // Two activations in the 8-bit form (see IntegerOperands).
    const bool wide = val(qw.q).dtype == DType::u8();
    r.x = qx.q;
    r.w = wide ? unshift(n, qw.q) : qw.q;
    r.row_factor = (wide ? 128 : 0) - zw.get_int(0);
    r.col_factor = -zx;
    return r;
  }
  if (!constant_of(qw.q)) {  // two activations otherwise: int32 less their zero points
    const int xi = add(n, "cast", {qx.q}, {{"to", std::string("int32")}}),
              wi = add(n, "cast", {qw.q}, {{"to", std::string("int32")}});
    r.x = zx == 0 ? xi : add(n, "sub", {xi, qx.zero_point});
    r.w = zero_zw ? wi : add(n, "sub", {wi, qw.zero_point});
    return r;
  }
  const NDArray q = val(qw.q).data;
  const I ws = shape(qw.q);
  const int64_t channels = ws[static_cast<size_t>(w_axis)];
  int64_t inner = 1;
  for (size_t d = static_cast<size_t>(w_axis) + 1; d < ws.size(); ++d) inner *= ws[d];
  auto channel = [&](int64_t i) { return (i / inner) % channels; };  // w's element i's index along w_axis
  if (zero_zw) {
    // The 8-bit form: sum (x - zx) w = sum x w - zx sum w.
    // (A signed activation arrives held as uint8 plus 128, zx with it: shifted_.)
    r.x = qx.q;
    r.w = qw.q;
    r.pad = zx;
    if (zx != 0) {
      std::vector<int64_t> sums(static_cast<size_t>(channels), 0);
      for (int64_t i = 0; i < q.numel(); ++i) sums[static_cast<size_t>(channel(i))] += q.get_int(i);
      r.correction = NDArray(DType::i32(), {channels});
      for (int64_t c = 0; c < channels; ++c) r.correction.set_int(c, -zx * sums[static_cast<size_t>(c)]);
    }
    return r;
  }
  // Weights with zero points: int32, (w - zero point) computed here.
  const std::string name = unique_name(n) + ".w_int";
  const int xi = add(n, "cast", {qx.q}, {{"to", std::string("int32")}});
  r.x = zx == 0 ? xi : add(n, "sub", {xi, qx.zero_point});
  NDArray wi(DType::i32(), ws);
  for (int64_t i = 0; i < wi.numel(); ++i) wi.set_int(i, q.get_int(i) - zw.get_int(per_axis ? channel(i) : 0));
  r.w = constant(name, std::move(wi));
  return r;
}

int Importer::integer_matmul(const onnx::NodeProto& n, const IntegerOperands& q) {
  int y = matmul_of(n, q.x, q.w);
  if (q.row_factor == 0 && q.col_factor == 0) return y;
  const I xs = shape(q.x), ws = shape(q.w), ys = shape(y);
  const int64_t k = xs.back(), cols_n = ws.back(), rows_m = product(xs) / k;
  auto scaled = [&](int v, int64_t f) {
    NDArray c(DType::i32(), {});
    c.set_int(0, f);
    return f == 1 ? v : add(n, "mul", {v, constant(unique_name(n) + ".factor", std::move(c))});
  };
  // The sum along `axis` of v seen as `frame` (the product's own rows and columns),
  // widened to int32 and read where v's integers are stored, not through a view (a
  // reduction reading a view is a kernel of its own, its cast another), as shape `out`.
  auto sum = [&](int v, const I& frame, int64_t axis, const I& out) {
    for (int u = v; u >= 0 && val(u).producer >= 0 && g_.node(val(u).producer).op == "reshape";) {
      u = g_.node(val(u).producer).inputs[0];
      if (shape(u) == frame) v = u;
    }
    const int wide = add(n, "cast", {reshape(n, v, frame)}, {{"to", std::string("int32")}});
    return reshape(n, add(n, "sum", {wide}, {{"axes", I{axis}}, {"keepdims", int64_t{1}}}), out);
  };
  const bool batched = ws.size() > 2;
  const int64_t batch = batched ? product(I(ws.begin(), ws.end() - 2)) : 1;
  if (q.row_factor != 0) {  // c sum_k x[.., m, k]: [.., M, 1], y's rank
    I out(xs.begin(), xs.end() - 1);
    out.push_back(1);
    const int rows = batched ? sum(q.x, {batch, rows_m / batch, k}, 2, out) : sum(q.x, {rows_m, k}, 1, out);
    y = add(n, "add", {y, scaled(rows, q.row_factor)});
  }
  if (q.col_factor != 0) {  // -zx sum_k w8[.., k, n]: [.., 1, N], y's rank
    I out(ys.size(), 1);
    if (batched) std::copy(ws.begin(), ws.end() - 2, out.begin());
    out.back() = cols_n;
    const int cols = batched ? sum(q.w, {batch, k, cols_n}, 1, out) : sum(q.w, {k, cols_n}, 0, out);
    y = add(n, "add", {y, scaled(cols, q.col_factor)});
  }
  // - K zx c = K (-zx) c
  return q.row_factor != 0 && q.col_factor != 0 ? plus(n, y, k * q.col_factor * q.row_factor) : y;
}

int Importer::integer_result(const onnx::NodeProto& n, int acc, const IntegerOperands& q, int bias, int64_t axis) {
  int add_in = bias;
  if (q.correction.numel() > 0) {
    // The correction folded into a constant bias, else added to the bias.
    const bool fold = bias >= 0 && val(bias).constant && val(bias).numel() == q.correction.numel();
    NDArray c = q.correction.clone();
    if (fold)
      for (int64_t i = 0; i < c.numel(); ++i) c.set_int(i, c.get_int(i) + val(bias).data.get_int(i));
    const int k = constant(unique_name(n) + ".correction", std::move(c));
    add_in = bias >= 0 && !fold ? add(n, "add", {bias, k}) : k;
  }
  if (add_in >= 0) {
    const size_t r = shape(acc).size();
    I s(r - (axis < 0 ? r - 1 : static_cast<size_t>(axis)), 1);
    s[0] = val(add_in).numel();
    acc = add(n, "add", {acc, reshape(n, add_in, s)});
  }
  return scale_sum(n, acc, q.scale, axis);
}

int Importer::integer_bias(const onnx::NodeProto& n, int bias, const NDArray& factor) {
  const Dequantized* d = dequantized(n, bias);
  if (!d || shape(bias).size() != 1 || !val(d->q).constant || !val(d->scale).constant || !val(d->zero_point).constant)
    return -1;
  const NDArray &s = val(d->scale).data, &z = val(d->zero_point).data;
  for (int64_t c = 0; c < shape(bias)[0]; ++c) {
    const float want = factor.as<float>()[factor.numel() == 1 ? 0 : c];
    if (z.get_int(s.numel() == 1 ? 0 : c) != 0 || static_cast<float>(s.get(s.numel() == 1 ? 0 : c)) != want) return -1;
  }
  return d->q;
}

int Importer::scale_sum(const onnx::NodeProto& n, int acc, const NDArray& factor, int64_t axis) {
  const int f = add(n, "cast", {acc}, {{"to", std::string("float32")}});
  const size_t r = shape(f).size();
  I fs(factor.numel() == 1 ? 0 : r - (axis < 0 ? r - 1 : static_cast<size_t>(axis)), 1);
  if (!fs.empty()) fs[0] = factor.numel();
  return add(n, "mul", {f, constant(unique_name(n) + ".scale", factor.reshaped(fs))});
}

// y, y_scale, y_zero_point = DynamicQuantizeLinear(x): uint8 over x's range with 0 in
// it: scale = (max(x, 0) - min(x, 0)) / 255, zero point = saturate(round(-min / scale)).
std::vector<int> Importer::dynamic_quantize(const onnx::NodeProto& n) {
  const int x = in(n, 0);
  const std::string k = unique_name(n);
  I all;
  for (size_t d = 0; d < shape(x).size(); ++d) all.push_back(static_cast<int64_t>(d));
  const int zero = scalar(k + ".zero", 0.0);
  const int lo = add(n, "minimum", {add(n, "min", {x}, {{"axes", all}, {"keepdims", int64_t{0}}}), zero});
  const int hi = add(n, "maximum", {add(n, "max", {x}, {{"axes", all}, {"keepdims", int64_t{0}}}), zero});
  const int scale = add(n, "div", {add(n, "sub", {hi, lo}), scalar(k + ".levels", 255.0)});
  const int none = constant(k + ".no_zero_point", NDArray(DType::i32(), {}));
  const int zp = quantize(n, add(n, "neg", {lo}), scale, none, 1, onnx::TensorProto::UINT8);
  return {quantize(n, x, scale, zp, 1, onnx::TensorProto::UINT8), scale, zp};
}

// QLinearConv (x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale,
// y_zero_point, B) and QLinearMatMul (a, a_scale, a_zero_point, b, b_scale,
// b_zero_point, y_scale, y_zero_point): the integer product (plus B, int32, for the
// convolution) scaled by x's and w's scales and quantized to y's.
std::vector<int> Importer::qlinear(const onnx::NodeProto& n, bool is_conv) {
  const int x = in(n, 0), w = in(n, 3);
  qtype(n, x);
  qtype(n, w);
  const int64_t w_axis = is_conv ? 0 : static_cast<int64_t>(shape(w).size()) - 1;
  const Dequantized qx = quant_params(n, x, in(n, 1), in(n, 2), 1), qw = quant_params(n, w, in(n, 4), in(n, 5), w_axis);
  const IntegerOperands q = integer_operands(n, qx, qw, w_axis, !is_conv);
  if (!q.ok)
    fail(node_desc(n) +
         ": basin takes 8-bit operands, constant scales and zero points, per tensor for the data and "
         "per tensor or per output channel for the weight");
  int y;
  if (is_conv) {
    y = integer_result(n, conv_of(n, q.x, q.w, false, q.pad), q, has_input(n, 8) ? in(n, 8) : -1, 1);
  } else {
    y = integer_result(n, integer_matmul(n, q), q, -1, -1);
  }
  const int ys = in(n, 6), yz = in(n, 7);
  return {quantize(n, y, ys, yz, 1, qtype(n, yz))};
}

// MatMulInteger (A, B, a_zero_point, b_zero_point) and ConvInteger (x, w,
// x_zero_point, w_zero_point): int32 sums of the operands less their zero points (a's
// per tensor or per row, b's per tensor or per column; x's per tensor, w's per tensor
// or per output channel).
std::vector<int> Importer::integer_product(const onnx::NodeProto& n, bool is_conv) {
  int a = in(n, 0), b = in(n, 1);
  qtype(n, a);
  qtype(n, b);
  auto i32 = [&](int v) {
    return val(v).dtype == DType::i32() ? v : add(n, "cast", {v}, {{"to", std::string("int32")}});
  };
  auto less = [&](int v, int i, int64_t axis, const char* what) {
    v = i32(v);
    if (!has_input(n, i)) return v;
    const int zp = i32(in(n, i));
    if (val(zp).numel() == 1) return add(n, "sub", {v, reshape(n, zp, {})});
    const int64_t r = static_cast<int64_t>(shape(v).size()), ax = axis < 0 ? axis + r : axis;
    if (shape(zp).size() != 1 || shape(zp)[0] != shape(v)[static_cast<size_t>(ax)])
      fail(node_desc(n) + ": " + what + " zero point " + shape_str(shape(zp)) + " is neither one value nor one per " +
           (is_conv      ? "output channel"
            : axis == -2 ? "row"
                         : "column"));
    I s(static_cast<size_t>(r - ax), 1);
    s[0] = shape(zp)[0];
    return add(n, "sub", {v, reshape(n, zp, s)});
  };
  if (is_conv) {
    if (has_input(n, 2) && val(in(n, 2)).numel() != 1) fail(node_desc(n) + ": x_zero_point must be one value");
    return {conv_of(n, less(a, 2, 0, "x"), less(b, 3, 0, "w"), false)};
  }
  if (shape(a).size() < 2 || shape(b).size() < 2) fail(node_desc(n) + ": 1-D operands are not supported");
  return {matmul_of(n, less(a, 2, -2, "a"), less(b, 3, -1, "b"))};
}

std::vector<int> Importer::reduce(const onnx::NodeProto& n, const std::string& kind) {
  int x = in(n, 0);
  I axes = attr_ints(n, "axes", {});
  if (has_input(n, 1)) axes = const_ints(n, 1);
  if (axes.empty() && attr_i(n, "noop_with_empty_axes", 0)) return {x};
  return {add(n, kind, {x}, {{"axes", axes}, {"keepdims", attr_i(n, "keepdims", 1)}})};
}

std::vector<int> Importer::slice(const onnx::NodeProto& n) {
  int x = in(n, 0);
  const I& s = shape(x);
  I starts, ends, axes, steps;
  if (opset_ < 10) {
    starts = attr_ints(n, "starts", {});
    ends = attr_ints(n, "ends", {});
    axes = attr_ints(n, "axes", {});
  } else {
    starts = const_ints(n, 1);
    ends = const_ints(n, 2);
    if (has_input(n, 3)) axes = const_ints(n, 3);
    if (has_input(n, 4)) steps = const_ints(n, 4);
  }
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    fail(node_desc(n) + ": starts, ends, axes and steps differ in length");
  // Per axis of x: the first index, the step and the count taken.
  I first(s.size(), 0), step(s.size(), 1), count = s;
  bool any_empty = false;
  for (size_t i = 0; i < starts.size(); ++i) {
    int ax = axis(n, axes[i], s.size());
    axes[i] = ax;
    const int64_t d = s[ax];
    if (steps[i] == 0) fail(node_desc(n) + ": a step is 0");
    const ops::SliceRange sr = ops::slice_range(starts[i], ends[i], steps[i], d);
    count[ax] = sr.count;
    first[ax] = sr.first;
    step[ax] = steps[i];
    any_empty |= count[ax] == 0;
  }
  if (val(x).constant) {
    // Constants (shape vectors above all) are sliced here, exactly and possibly empty:
    // x.shape[2:] of a rank-2 tensor is an empty shape that a Concat then drops.
    const NDArray& src = val(x).data;
    NDArray out(src.dtype(), count);
    const size_t r = s.size();
    I at(r, 0);
    for (int64_t o = 0; o < out.numel(); ++o) {
      int64_t flat = 0;
      for (size_t d = 0; d < r; ++d) flat = flat * s[d] + first[d] + at[d] * step[d];
      if (src.dtype().is_float()) out.set(o, src.get(flat));
      else out.set_int(o, src.get_int(flat));
      for (size_t d = r; d-- > 0;) {
        if (++at[d] < count[d]) break;
        at[d] = 0;
      }
    }
    return {constant(n.output(0), out)};
  }
  if (any_empty) fail(node_desc(n) + ": the slice is empty (basin has no empty tensors on the data path)");
  return {add(n, "slice", {x}, {{"starts", starts}, {"ends", ends}, {"axes", axes}, {"steps", steps}})};
}

std::vector<int> Importer::split(const onnx::NodeProto& n) {
  int x = in(n, 0);
  const I& s = shape(x);
  int ax = axis(n, attr_i(n, "axis", 0), s.size());
  I sizes = attr_ints(n, "split", {});
  if (has_input(n, 1)) sizes = const_ints(n, 1);
  const int parts = n.output_size();
  if (parts < 1) fail(node_desc(n) + ": no outputs");
  if (sizes.empty()) {
    if (opset_ >= 18) {
      // num_outputs parts of ceil(extent / num_outputs), the last one what is left.
      const int64_t num = attr_i(n, "num_outputs", parts);
      if (num != parts)
        fail(node_desc(n) + ": num_outputs is " + std::to_string(num) + " but the node has " + std::to_string(parts) +
             " outputs");
      sizes = uneven_split(s[ax], parts);
      if (sizes.empty())
        fail(node_desc(n) + ": axis extent " + std::to_string(s[ax]) + " does not split into " + std::to_string(parts) +
             " parts of the same size and a smaller last one");
    } else {
      if (s[ax] % parts)
        fail(node_desc(n) + ": axis extent " + std::to_string(s[ax]) + " does not split into " + std::to_string(parts));
      sizes.assign(parts, s[ax] / parts);
    }
  }
  if (static_cast<int>(sizes.size()) != parts) fail(node_desc(n) + ": split sizes and outputs differ in number");
  int64_t total = 0;
  for (int64_t sz : sizes) {
    if (sz < 0 || sz > s[ax]) fail(node_desc(n) + ": a split size of " + std::to_string(sz));
    total += sz;
  }
  if (total != s[ax])
    fail(node_desc(n) + ": split sizes add up to " + std::to_string(total) + ", not the axis extent " +
         std::to_string(s[ax]));
  std::vector<int> out;
  int64_t start = 0;
  for (int64_t sz : sizes) {
    out.push_back(
        add(n, "slice", {x}, {{"starts", I{start}}, {"ends", I{start + sz}}, {"axes", I{ax}}, {"steps", I{1}}}));
    start += sz;
  }
  return out;
}

std::vector<int> Importer::softmax(const onnx::NodeProto& n, bool log) {
  int x = in(n, 0);
  const I s = shape(x);
  int ax = axis(n, attr_i(n, "axis", opset_ >= 13 ? -1 : 1), s.size());
  const char* op = log ? "log_softmax" : "softmax";
  if (opset_ >= 13 || ax == static_cast<int>(s.size()) - 1) return {add(n, op, {x}, {{"axis", int64_t{ax}}})};
  // Before opset 13: softmax over the flattened axes from `axis` on.
  int64_t rows = product(I(s.begin(), s.begin() + ax)), cols = product(I(s.begin() + ax, s.end()));
  int y = add(n, op, {reshape(n, x, {rows, cols})}, {{"axis", int64_t{1}}});
  return {reshape(n, y, s)};
}

// ScatterND on constants (Swin's attention masks are built so): evaluated here, with
// every index checked. On the data path it is refused by check_support.
std::vector<int> Importer::scatter_nd(const onnx::NodeProto& n) {
  const NDArray& data = const_in(n, 0);
  const NDArray& idx = const_in(n, 1);
  const NDArray& upd = const_in(n, 2);
  const std::string red = attr_s(n, "reduction", "none");
  if (red != "none" && red != "add" && red != "mul" && red != "max" && red != "min")
    fail(node_desc(n) + ": reduction '" + red + "' is not one of none, add, mul, max, min");
  const I& ds = data.shape();
  const I& is = idx.shape();
  if (is.empty()) fail(node_desc(n) + ": indices must have rank 1 or more");
  const int64_t k = is.back();
  if (k < 1 || k > static_cast<int64_t>(ds.size()))
    fail(node_desc(n) + ": index depth " + std::to_string(k) + " for data of rank " + std::to_string(ds.size()));
  I us(is.begin(), is.end() - 1);
  us.insert(us.end(), ds.begin() + k, ds.end());
  if (upd.shape() != us)
    fail(node_desc(n) + ": updates have shape " + shape_str(upd.shape()) + ", expected " + shape_str(us));
  if (upd.dtype() != data.dtype()) fail(node_desc(n) + ": updates and data differ in type");
  const int64_t slice = product(I(ds.begin() + k, ds.end()));
  const int64_t rows = product(I(is.begin(), is.end() - 1));
  NDArray out = data.clone();
  for (int64_t r = 0; r < rows; ++r) {
    int64_t off = 0;
    for (int64_t d = 0; d < k; ++d) {
      int64_t v = idx.get_int(r * k + d), e = ds[d];
      if (v < -e || v >= e)
        fail(node_desc(n) + ": index " + std::to_string(v) + " is out of range for extent " + std::to_string(e));
      off = off * e + (v < 0 ? v + e : v);
    }
    for (int64_t j = 0; j < slice; ++j) {
      const int64_t o = off * slice + j, u = r * slice + j;
      if (!data.dtype().is_float()) {
        int64_t a = out.get_int(o), b = upd.get_int(u);
        out.set_int(o, red == "add"   ? a + b
                       : red == "mul" ? a * b
                       : red == "max" ? std::max(a, b)
                       : red == "min" ? std::min(a, b)
                                      : b);
      } else {
        double a = out.get(o), b = upd.get(u);
        out.set(o, red == "add"   ? a + b
                   : red == "mul" ? a * b
                   : red == "max" ? std::max(a, b)
                   : red == "min" ? std::min(a, b)
                                  : b);
      }
    }
  }
  return {constant(n.output(0), out)};
}

// Einsum of one or two operands as transposes, sums, reshapes and one batched matmul
// (batch letters, then the left operand's free letters, then the right's), so that it
// becomes the same tasks as the matmuls it stands for. Ellipses broadcast.
std::vector<int> Importer::einsum(const onnx::NodeProto& n) {
  std::string eq;
  for (char c : attr_s(n, "equation", ""))
    if (c != ' ') eq += c;
  const int nin = n.input_size();
  if (nin < 1 || nin > 2) fail(node_desc(n) + ": einsum of " + std::to_string(nin) + " operands (basin takes 1 or 2)");
  size_t arrow = eq.find("->");
  std::string lhs = eq.substr(0, arrow), rhs = arrow == std::string::npos ? "" : eq.substr(arrow + 2);
  std::vector<std::string> terms = {""};
  for (char c : lhs) {
    if (c == ',') terms.emplace_back();
    else terms.back() += c;
  }
  if (static_cast<int>(terms.size()) != nin)
    fail(node_desc(n) + ": equation '" + eq + "' has " + std::to_string(terms.size()) + " terms for " +
         std::to_string(nin) + " inputs");
  std::vector<int> v(nin);
  for (int i = 0; i < nin; ++i) v[i] = in(n, i);
  // Ellipses become letters of their own ('0', '1', ...), right-aligned across terms.
  size_t ell = 0;
  for (int i = 0; i < nin; ++i) {
    size_t at = terms[i].find("...");
    if (at == std::string::npos) continue;
    size_t named = terms[i].size() - 3;
    if (shape(v[i]).size() < named)
      fail(node_desc(n) + ": term '" + terms[i] + "' has more letters than input " + std::to_string(i) + "'s rank");
    ell = std::max(ell, shape(v[i]).size() - named);
  }
  auto expand = [&](std::string t, size_t rank) {
    size_t at = t.find("...");
    if (at == std::string::npos) return t;
    size_t k = rank - (t.size() - 3);
    std::string e;
    for (size_t j = ell - k; j < ell; ++j) e += static_cast<char>('0' + j);
    return t.substr(0, at) + e + t.substr(at + 3);
  };
  for (int i = 0; i < nin; ++i) terms[i] = expand(terms[i], shape(v[i]).size());
  if (arrow == std::string::npos) {  // implicit output: the ellipsis, then letters used once, sorted
    std::map<char, int> count;
    for (const auto& t : terms)
      for (char c : t) ++count[c];
    for (size_t j = 0; j < ell; ++j) rhs += static_cast<char>('0' + j);
    for (const auto& [c, k] : count)
      if (k == 1 && !(c >= '0' && c <= '9')) rhs += c;
  } else if (rhs.find("...") != std::string::npos) {
    std::string e;
    for (size_t j = 0; j < ell; ++j) e += static_cast<char>('0' + j);
    rhs = rhs.substr(0, rhs.find("...")) + e + rhs.substr(rhs.find("...") + 3);
  }
  std::map<char, int64_t> extent;
  for (int i = 0; i < nin; ++i) {
    const std::string& t = terms[i];
    if (t.size() != shape(v[i]).size())
      fail(node_desc(n) + ": term '" + t + "' does not match input " + std::to_string(i) + "'s rank " +
           std::to_string(shape(v[i]).size()));
    for (size_t d = 0; d < t.size(); ++d) {
      if (t.find(t[d]) != d)
        fail(node_desc(n) + ": a letter repeated within one term (a diagonal) is not supported: '" + eq + "'");
      int64_t e = shape(v[i])[d];
      auto it = extent.find(t[d]);
      if (it == extent.end() || it->second == 1) extent[t[d]] = e;
      else if (e != 1 && e != it->second)
        fail(node_desc(n) + ": letter '" + std::string(1, t[d]) + "' has extents " + std::to_string(it->second) +
             " and " + std::to_string(e));
    }
  }
  for (char c : rhs)
    if (!extent.count(c)) fail(node_desc(n) + ": output letter '" + std::string(1, c) + "' is in no input");
  auto in_str = [](const std::string& t, char c) { return t.find(c) != std::string::npos; };
  // Letters in one operand alone and not in the output are summed first; extent-1
  // letters that broadcast are expanded.
  for (int i = 0; i < nin; ++i) {
    std::string& t = terms[i];
    I axes;
    std::string kept;
    for (size_t d = 0; d < t.size(); ++d) {
      bool elsewhere = in_str(rhs, t[d]) || (nin == 2 && in_str(terms[1 - i], t[d]));
      if (!elsewhere) axes.push_back(static_cast<int64_t>(d));
      else kept += t[d];
    }
    if (!axes.empty()) {
      v[i] = add(n, "sum", {v[i]}, {{"axes", axes}, {"keepdims", int64_t{0}}});
      t = kept;
    }
    I full;
    for (char c : t) full.push_back(extent[c]);
    if (full != shape(v[i])) v[i] = add(n, "broadcast_to", {v[i]}, {{"new_shape", full}});
  }
  if (nin == 1) {
    I perm;
    for (char c : rhs) perm.push_back(static_cast<int64_t>(terms[0].find(c)));
    return {transposed(n, v[0], perm)};
  }
  const std::string &ta = terms[0], &tb = terms[1];
  std::string batch, left, right, contract;
  for (char c : ta) {
    if (in_str(tb, c)) (in_str(rhs, c) ? batch : contract) += c;
    else left += c;
  }
  for (char c : tb)
    if (!in_str(ta, c)) right += c;
  auto prod = [&](const std::string& letters) {
    std::vector<int64_t> es;
    for (char c : letters) es.push_back(extent[c]);
    return checked_product(es);
  };
  auto perm_of = [](const std::string& from, const std::string& to) {
    I p;
    for (char c : to) p.push_back(static_cast<int64_t>(from.find(c)));
    return p;
  };
  const int64_t nb = prod(batch), m = prod(left), k = prod(contract), nn = prod(right);
  int a = reshape(n, transposed(n, v[0], perm_of(ta, batch + left + contract)), {nb, m, k});
  int b = reshape(n, transposed(n, v[1], perm_of(tb, batch + contract + right)), {nb, k, nn});
  int y;
  if (nb == 1) {
    int a2 = reshape(n, a, {m, k});
    y = val(b).constant
            ? add(n, "dense", {a2, constant(val(v[1]).name + ".einsum_T", transpose2d(val(b).data.reshaped({k, nn})))})
            : add(n, "matmul", {a2, reshape(n, b, {k, nn})});
  } else {
    y = add(n, "batch_matmul", {a, b});
  }
  std::string got = batch + left + right;
  I out_shape;
  for (char c : got) out_shape.push_back(extent[c]);
  y = reshape(n, y, out_shape);
  return {transposed(n, y, perm_of(got, rhs))};
}

// Resize of an NCHW tensor's H and W, by sizes or by scales (which the coordinates then
// use, as ONNX says), in every mode and coordinate transformation but
// tf_crop_and_resize.
std::vector<int> Importer::resize(const onnx::NodeProto& n) {
  int x = in(n, 0);
  const I xs = shape(x);
  if (xs.size() != 4) fail(node_desc(n) + ": only 4-D (NCHW) inputs are resized, got " + shape_str(xs));
  I axes = attr_ints(n, "axes", {0, 1, 2, 3});
  for (auto& a : axes) a = axis(n, a, 4);
  I sizes;
  std::vector<double> scales;
  const int scales_at = opset_ >= 11 ? 2 : 1;
  if (opset_ >= 11 && has_input(n, 3) && const_in(n, 3).numel() > 0) {
    sizes = const_ints(n, 3);
  } else if (has_input(n, scales_at) && const_in(n, scales_at).numel() > 0) {
    const NDArray& sc = const_in(n, scales_at);
    for (int64_t i = 0; i < sc.numel(); ++i) scales.push_back(sc.get(i));
  } else {
    fail(node_desc(n) + ": neither scales nor sizes is given");
  }
  const size_t given = sizes.empty() ? scales.size() : sizes.size();
  if (given != axes.size())
    fail(node_desc(n) + ": " + std::to_string(given) + " sizes or scales for " + std::to_string(axes.size()) + " axes");
  I out = xs;
  double scale[4] = {1, 1, 1, 1};
  for (size_t k = 0; k < axes.size(); ++k) {
    const int a = static_cast<int>(axes[k]);
    if (!sizes.empty()) {
      out[a] = sizes[k];
    } else {
      if (!(scales[k] > 0) || !std::isfinite(scales[k]))
        fail(node_desc(n) + ": scale " + std::to_string(scales[k]) + " is not positive");
      scale[a] = scales[k];
      out[a] = static_cast<int64_t>(std::floor(static_cast<double>(xs[a]) * scales[k]));
    }
    if (out[a] < 1 || out[a] > (int64_t{1} << 24))
      fail(node_desc(n) + ": output extent " + std::to_string(out[a]) + " along axis " + std::to_string(a));
  }
  if (out[0] != xs[0] || out[1] != xs[1])
    fail(node_desc(n) + ": only H and W are resized, not N or C (" + shape_str(xs) + " to " + shape_str(out) + ")");
  const std::string policy = attr_s(n, "keep_aspect_ratio_policy", "stretch");
  if (policy != "stretch" && !sizes.empty())
    fail(node_desc(n) + ": keep_aspect_ratio_policy '" + policy + "' is not supported");
  std::string mode = attr_s(n, "mode", "nearest");
  if (attr_i(n, "antialias", 0) != 0 && mode != "nearest" && (out[2] < xs[2] || out[3] < xs[3]))
    fail(node_desc(n) + ": antialiased downscaling is not supported");
  std::string coord = attr_s(n, "coordinate_transformation_mode", opset_ >= 11 ? "half_pixel" : "asymmetric");
  if (coord == "tf_crop_and_resize" || coord == "tf_half_pixel_for_nn")
    fail(node_desc(n) + ": coordinate_transformation_mode '" + coord + "' is not supported");
  std::string nearest_mode = attr_s(n, "nearest_mode", opset_ >= 11 ? "round_prefer_floor" : "floor");
  if (out == xs) return {x};
  return {add(n, "resize", {x},
              {{"out_height", out[2]},
               {"out_width", out[3]},
               {"mode", mode},
               {"coord", coord},
               {"nearest_mode", nearest_mode},
               {"cubic_a", attr_f(n, "cubic_coeff_a", -0.75)},
               {"exclude_outside", attr_i(n, "exclude_outside", 0) != 0 ? int64_t{1} : int64_t{0}},
               {"scale_h", sizes.empty() ? scale[2] : 0.0},
               {"scale_w", sizes.empty() ? scale[3] : 0.0}})};
}

// Operators evaluated only where their inputs are constant.
bool constant_only(const std::string& op) { return op == "ScatterND"; }

const std::map<std::string, Importer::Converter>& Importer::converters() {
  using C = Converter;
  auto unary = [](const char* op) -> C {
    return [op](Importer& m, const onnx::NodeProto& n) { return std::vector<int>{m.add(n, op, {m.in(n, 0)})}; };
  };
  auto binary = [](const char* op) -> C {
    return [op](Importer& m, const onnx::NodeProto& n) {
      int y = m.in(n, 0);
      for (int i = 1; i < n.input_size(); ++i) y = m.add(n, op, {y, m.in(n, i)});
      return std::vector<int>{y};
    };
  };
  auto alias = [](Importer& m, const onnx::NodeProto& n) { return std::vector<int>{m.in(n, 0)}; };
  static const std::map<std::string, C> c = {
      {"Conv", [](Importer& m, const onnx::NodeProto& n) { return m.conv(n, false); }},
      {"ConvTranspose", [](Importer& m, const onnx::NodeProto& n) { return m.conv(n, true); }},
      {"MaxPool", [](Importer& m, const onnx::NodeProto& n) { return m.pool(n, false); }},
      {"AveragePool", [](Importer& m, const onnx::NodeProto& n) { return m.pool(n, true); }},
      {"GlobalAveragePool", [](Importer& m, const onnx::NodeProto& n) {
         int x = m.in(n, 0);
         if (m.shape(x).size() == 4) return std::vector<int>{m.add(n, "global_avg_pool2d", {x})};
         I axes;
         for (size_t d = 2; d < m.shape(x).size(); ++d) axes.push_back(static_cast<int64_t>(d));
         return std::vector<int>{m.add(n, "mean", {x}, {{"axes", axes}, {"keepdims", int64_t{1}}})};
       }},
      {"GlobalMaxPool", [](Importer& m, const onnx::NodeProto& n) {
         int x = m.in(n, 0);
         if (m.shape(x).size() == 4) return std::vector<int>{m.add(n, "global_max_pool2d", {x})};
         I axes;
         for (size_t d = 2; d < m.shape(x).size(); ++d) axes.push_back(static_cast<int64_t>(d));
         return std::vector<int>{m.add(n, "max", {x}, {{"axes", axes}, {"keepdims", int64_t{1}}})};
       }},
      {"Gemm", [](Importer& m, const onnx::NodeProto& n) { return m.gemm(n); }},
      {"MatMul", [](Importer& m, const onnx::NodeProto& n) { return m.matmul(n); }},
      {"Add", binary("add")}, {"Sub", binary("sub")}, {"Mul", binary("mul")}, {"Div", binary("div")},
      {"Pow", binary("pow")}, {"Max", binary("maximum")}, {"Min", binary("minimum")}, {"Sum", binary("add")},
      {"Relu", unary("relu")}, {"Sigmoid", unary("sigmoid")}, {"Tanh", unary("tanh")}, {"Exp", unary("exp")},
      {"Log", unary("log")}, {"Sqrt", unary("sqrt")}, {"Erf", unary("erf")}, {"Neg", unary("neg")}, {"Abs", unary("abs")},
      {"HardSwish", unary("hardswish")}, {"Floor", unary("floor")}, {"Ceil", unary("ceil")}, {"Round", unary("round")}, {"Sign", unary("sign")},
      {"Softplus", unary("softplus")},
      {"Elu", [](Importer& m, const onnx::NodeProto& n) {
         return std::vector<int>{m.add(n, "elu", {m.in(n, 0)}, {{"alpha", m.attr_f(n, "alpha", 1.0)}})};
       }},
      {"Selu", [](Importer& m, const onnx::NodeProto& n) {
         return std::vector<int>{m.add(n, "selu", {m.in(n, 0)}, {{"alpha", m.attr_f(n, "alpha", 1.67326319217681884765625)},
                                                                  {"gamma", m.attr_f(n, "gamma", 1.05070102214813232421875)}})};
       }},
      {"Reciprocal", [](Importer& m, const onnx::NodeProto& n) {
         return std::vector<int>{m.add(n, "div", {m.scalar(n.name() + ".one", 1.0), m.in(n, 0)})};
       }},
      {"LeakyRelu", [](Importer& m, const onnx::NodeProto& n) {
         return std::vector<int>{m.add(n, "leaky_relu", {m.in(n, 0)}, {{"alpha", m.attr_f(n, "alpha", 0.01)}})};
       }},
      {"HardSigmoid", [](Importer& m, const onnx::NodeProto& n) {
         double alpha = m.attr_f(n, "alpha", 0.2), beta = m.attr_f(n, "beta", 0.5);
         int x = m.in(n, 0);
         if (std::abs(alpha - 1.0 / 6) < 1e-6 && std::abs(beta - 0.5) < 1e-6) return std::vector<int>{m.add(n, "hardsigmoid", {x})};
         int y = m.add(n, "add", {m.add(n, "mul", {x, m.scalar(n.name() + ".alpha", alpha)}), m.scalar(n.name() + ".beta", beta)});
         return std::vector<int>{m.add(n, "clip", {y}, {{"min", 0.0}, {"max", 1.0}})};
       }},
      {"Clip", [](Importer& m, const onnx::NodeProto& n) {
         double lo = -std::numeric_limits<float>::max(), hi = std::numeric_limits<float>::max();
         if (m.opset_ < 11) {
           lo = m.attr_f(n, "min", lo);
           hi = m.attr_f(n, "max", hi);
         } else {
           if (m.has_input(n, 1)) lo = m.const_scalar(n, 1);
           if (m.has_input(n, 2)) hi = m.const_scalar(n, 2);
         }
         return std::vector<int>{m.add(n, "clip", {m.in(n, 0)}, {{"min", lo}, {"max", hi}})};
       }},
      // Quantization: 8-bit integers are int8 and uint8 values, 16-bit ones int32 holding the type's range.
      {"QuantizeLinear", [](Importer& m, const onnx::NodeProto& n) {
         if (m.attr_i(n, "block_size", 0) != 0) m.fail(m.node_desc(n) + ": blocked quantization is not supported");
         const int scale = m.in(n, 1);
         int type = static_cast<int>(m.attr_i(n, "output_dtype", 0));
         const int zp = m.zero_point(n, 2, scale);
         if (m.has_input(n, 2)) type = m.qtype(n, zp);
         else if (type == 0) type = onnx::TensorProto::UINT8;
         if (!narrow_int_bytes(type))
           m.fail(m.node_desc(n) + ": quantizing to " + dtype_name(type) +
                  " is not supported (INT8, UINT8, INT16, UINT16)");
         return std::vector<int>{m.quantize(n, m.in(n, 0), scale, zp, m.attr_i(n, "axis", 1), type)};
       }},
      {"DequantizeLinear", [](Importer& m, const onnx::NodeProto& n) {
         if (m.attr_i(n, "block_size", 0) != 0) m.fail(m.node_desc(n) + ": blocked quantization is not supported");
         const int x = m.in(n, 0), scale = m.in(n, 1);
         if (m.val(x).dtype != DType::i32() && !m.val(x).dtype.is_byte())
           m.fail(m.node_desc(n) + ": '" + m.val(x).name + "' is not a quantized tensor (INT8, UINT8, INT16, UINT16 or INT32)");
         return std::vector<int>{m.dequantize(n, x, scale, m.zero_point(n, 2, scale), m.attr_i(n, "axis", 1))};
       }},
      {"DynamicQuantizeLinear", [](Importer& m, const onnx::NodeProto& n) { return m.dynamic_quantize(n); }},
      {"QLinearConv", [](Importer& m, const onnx::NodeProto& n) { return m.qlinear(n, true); }},
      {"QLinearMatMul", [](Importer& m, const onnx::NodeProto& n) { return m.qlinear(n, false); }},
      {"ConvInteger", [](Importer& m, const onnx::NodeProto& n) { return m.integer_product(n, true); }},
      {"MatMulInteger", [](Importer& m, const onnx::NodeProto& n) { return m.integer_product(n, false); }},
      {"Softmax", [](Importer& m, const onnx::NodeProto& n) { return m.softmax(n, false); }},
      {"LogSoftmax", [](Importer& m, const onnx::NodeProto& n) { return m.softmax(n, true); }},
      {"BatchNormalization", [](Importer& m, const onnx::NodeProto& n) {
         std::vector<int> ins;
         for (int i = 0; i < 5; ++i) ins.push_back(m.in(n, i));
         return std::vector<int>{m.add(n, "batch_norm", ins, {{"epsilon", m.attr_f(n, "epsilon", 1e-5)}})};
       }},
      // Operators of later opsets, written with basin's operators.
      {"Gelu", [](Importer& m, const onnx::NodeProto& n) {  // opset 20
         const std::string approx = m.attr_s(n, "approximate", "none");
         int x = m.in(n, 0);
         if (approx == "none") return std::vector<int>{m.add(n, "gelu", {x})};
         if (approx != "tanh") m.fail(m.node_desc(n) + ": approximate '" + approx + "' is not none or tanh");
         // x / 2 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3)))
         const std::string k = m.unique_name(n);
         int x3 = m.add(n, "mul", {m.add(n, "mul", {x, x}), x});
         int inner = m.add(n, "mul", {m.add(n, "add", {x, m.add(n, "mul", {x3, m.scalar(k + ".c", 0.044715)})}),
                                      m.scalar(k + ".s", std::sqrt(2.0 / M_PI))});
         int t = m.add(n, "add", {m.add(n, "tanh", {inner}), m.scalar(k + ".one", 1.0)});
         return std::vector<int>{m.add(n, "mul", {m.add(n, "mul", {x, m.scalar(k + ".half", 0.5)}), t})};
       }},
      {"Mish", [](Importer& m, const onnx::NodeProto& n) {  // opset 18: x tanh(log(1 + e^x))
         int x = m.in(n, 0);
         int sp = m.add(n, "log", {m.add(n, "add", {m.add(n, "exp", {x}), m.scalar(m.unique_name(n) + ".one", 1.0)})});
         return std::vector<int>{m.add(n, "mul", {x, m.add(n, "tanh", {sp})})};
       }},
      {"Swish", [](Importer& m, const onnx::NodeProto& n) {  // opset 24: x sigmoid(alpha x)
         int x = m.in(n, 0);
         const double alpha = m.attr_f(n, "alpha", 1.0);
         if (alpha == 1.0) return std::vector<int>{m.add(n, "silu", {x})};
         int ax = m.add(n, "mul", {x, m.scalar(m.unique_name(n) + ".alpha", alpha)});
         return std::vector<int>{m.add(n, "mul", {x, m.add(n, "sigmoid", {ax})})};
       }},
      {"RMSNormalization", [](Importer& m, const onnx::NodeProto& n) {  // opset 23
         return std::vector<int>{m.add(n, "rms_norm", {m.in(n, 0), m.in(n, 1)},
                                       {{"axis", m.attr_i(n, "axis", -1)}, {"epsilon", m.attr_f(n, "epsilon", 1e-5)}})};
       }},
      {"LayerNormalization", [](Importer& m, const onnx::NodeProto& n) {
         int x = m.in(n, 0), scale = m.in(n, 1);
         int b = m.has_input(n, 2) ? m.in(n, 2) : m.constant(n.name() + ".zero_bias", NDArray(DType::f32(), m.shape(scale)));
         return std::vector<int>{m.add(n, "layer_norm", {x, scale, b},
                                       {{"axis", m.attr_i(n, "axis", -1)}, {"epsilon", m.attr_f(n, "epsilon", 1e-5)}})};
       }},
      {"ReduceMean", [](Importer& m, const onnx::NodeProto& n) { return m.reduce(n, "mean"); }},
      {"ReduceSum", [](Importer& m, const onnx::NodeProto& n) { return m.reduce(n, "sum"); }},
      {"ReduceMax", [](Importer& m, const onnx::NodeProto& n) { return m.reduce(n, "max"); }},
      {"ReduceMin", [](Importer& m, const onnx::NodeProto& n) { return m.reduce(n, "min"); }},
      {"Identity", alias},
      {"Dropout", alias},
      {"Flatten", [](Importer& m, const onnx::NodeProto& n) {
         int x = m.in(n, 0);
         const I s = m.shape(x);
         // Flatten's axis lies in [-rank, rank] (rank itself: everything in the first factor).
         const int64_t r = static_cast<int64_t>(s.size()), a = m.attr_i(n, "axis", 1);
         if (a < -r || a > r)
           m.fail(m.node_desc(n) + ": axis " + std::to_string(a) + " is out of range for rank " + std::to_string(r));
         const int ax = static_cast<int>(a < 0 ? a + r : a);
         return std::vector<int>{m.reshape(n, x, {product(I(s.begin(), s.begin() + ax)), product(I(s.begin() + ax, s.end()))})};
       }},
      {"Reshape", [](Importer& m, const onnx::NodeProto& n) {
         int x = m.in(n, 0);
         const I s = m.shape(x);
         I t = m.const_ints(n, 1);
         bool allowzero = m.attr_i(n, "allowzero", 0) != 0;
         int infer = -1;
         int64_t known = 1;
         for (size_t i = 0; i < t.size(); ++i) {
           if (t[i] == 0 && !allowzero) {
             if (i >= s.size()) m.fail(m.node_desc(n) + ": shape value 0 at position " + std::to_string(i) + " has no input extent");
             t[i] = s[i];
           }
           if (t[i] == -1) {
             if (infer >= 0) m.fail(m.node_desc(n) + ": more than one -1 in the target shape");
             infer = static_cast<int>(i);
           } else {
             // Extents from the file: checked before any arithmetic on them.
             if (t[i] < 0 || (t[i] > 0 && known > std::numeric_limits<int64_t>::max() / t[i]))
               m.fail(m.node_desc(n) + ": invalid target shape " + shape_str(t));
             known *= t[i];
           }
         }
         if (infer >= 0) {
           if (known <= 0 || product(s) % known) m.fail(m.node_desc(n) + ": cannot infer the -1 extent");
           t[infer] = product(s) / known;
         }
         if (product(t) != product(s))
           m.fail(m.node_desc(n) + ": cannot reshape " + shape_str(s) + " to " + shape_str(t));
         return std::vector<int>{m.reshape(n, x, t)};
       }},
      {"Transpose", [](Importer& m, const onnx::NodeProto& n) {
         return std::vector<int>{m.add(n, "transpose", {m.in(n, 0)}, {{"perm", m.attr_ints(n, "perm", {})}})};
       }},
      {"Concat", [](Importer& m, const onnx::NodeProto& n) {
         // Empty parts add nothing (constant shape vectors such as x.shape[2:] of a
         // rank-2 tensor); all empty is the empty constant itself.
         std::vector<int> ins;
         for (int i = 0; i < n.input_size(); ++i)
           if (m.val(m.in(n, i)).numel() > 0) ins.push_back(m.in(n, i));
         if (ins.empty()) return std::vector<int>{m.in(n, 0)};
         if (ins.size() == 1) return std::vector<int>{ins[0]};
         return std::vector<int>{m.add(n, "concat", ins, {{"axis", m.attr_i(n, "axis", 0)}})};
       }},
      {"Slice", [](Importer& m, const onnx::NodeProto& n) { return m.slice(n); }},
      {"Split", [](Importer& m, const onnx::NodeProto& n) { return m.split(n); }},
      {"Squeeze", [](Importer& m, const onnx::NodeProto& n) {
         int x = m.in(n, 0);
         I axes = m.has_input(n, 1) ? m.const_ints(n, 1) : m.attr_ints(n, "axes", {});
         I s;
         std::set<int> drop;
         for (int64_t a : axes) drop.insert(m.axis(n, a, m.shape(x).size()));
         for (size_t d = 0; d < m.shape(x).size(); ++d) {
           bool gone = axes.empty() ? m.shape(x)[d] == 1 : drop.count(static_cast<int>(d)) > 0;
           if (gone && m.shape(x)[d] != 1) m.fail(m.node_desc(n) + ": axis " + std::to_string(d) + " has extent " + std::to_string(m.shape(x)[d]));
           if (!gone) s.push_back(m.shape(x)[d]);
         }
         return std::vector<int>{m.reshape(n, x, s)};
       }},
      {"Unsqueeze", [](Importer& m, const onnx::NodeProto& n) {
         int x = m.in(n, 0);
         I axes = m.has_input(n, 1) ? m.const_ints(n, 1) : m.attr_ints(n, "axes", {});
         const size_t r = m.shape(x).size() + axes.size();
         std::set<int> ins;
         for (int64_t a : axes) ins.insert(m.axis(n, a, r));
         I s;
         size_t k = 0;
         for (size_t d = 0; d < r; ++d) s.push_back(ins.count(static_cast<int>(d)) ? 1 : m.shape(x).at(k++));
         return std::vector<int>{m.reshape(n, x, s)};
       }},
      {"Gather", [](Importer& m, const onnx::NodeProto& n) {
         int x = m.in(n, 0), idx = m.in(n, 1);
         int ax = m.axis(n, m.attr_i(n, "axis", 0), m.shape(x).size());
         if (m.val(idx).constant && m.val(idx).dtype != DType::i64()) {
           NDArray a(DType::i64(), m.val(idx).shape);
           for (int64_t i = 0; i < a.numel(); ++i) a.set(i, m.val(idx).data.get(i));
           idx = m.constant(m.val(idx).name + ".i64", a);
         }
         if (m.val(idx).constant) {
           // Negative indices count from the end.
           NDArray a = m.val(idx).data.clone();
           bool changed = false;
           for (int64_t i = 0; i < a.numel(); ++i)
             if (a.get(i) < 0) {
               a.set(i, a.get(i) + static_cast<double>(m.shape(x)[ax]));
               changed = true;
             }
           if (changed) idx = m.constant(m.val(idx).name + ".wrapped", a);
         }
         return std::vector<int>{m.add(n, "gather", {x, idx}, {{"axis", int64_t{ax}}})};
       }},
      {"Expand", [](Importer& m, const onnx::NodeProto& n) {
         int x = m.in(n, 0);
         I t = m.const_ints(n, 1), s = m.shape(x);
         size_t r = std::max(t.size(), s.size());
         I out(r);
         for (size_t i = 0; i < r; ++i) {
           int64_t a = i + s.size() >= r ? s[i + s.size() - r] : 1, b = i + t.size() >= r ? t[i + t.size() - r] : 1;
           out[i] = a == 1 ? b : a;
         }
         if (out == s) return std::vector<int>{x};
         return std::vector<int>{m.add(n, "broadcast_to", {x}, {{"new_shape", out}})};
       }},
      {"Pad", [](Importer& m, const onnx::NodeProto& n) {
         I pads = m.opset_ >= 11 ? m.const_ints(n, 1) : m.attr_ints(n, "pads", {});
         double value = m.opset_ >= 11 ? (m.has_input(n, 2) ? m.const_scalar(n, 2) : 0.0) : m.attr_f(n, "value", 0);
         return std::vector<int>{m.add(n, "pad", {m.in(n, 0)}, {{"pads", pads}, {"value", value}, {"mode", m.attr_s(n, "mode", "constant")}})};
       }},
      {"Cast", [](Importer& m, const onnx::NodeProto& n) {
         int x = m.in(n, 0);
         const int to_type = static_cast<int>(m.attr_i(n, "to", 1));
         if (narrow_int_bytes(to_type))
           m.fail(m.node_desc(n) + ": casting to " + dtype_name(to_type) +
                  " is not supported (basin makes 8- and 16-bit integers by QuantizeLinear only)");
         DType to = dtype_of(to_type, m.node_desc(n));
         if (m.val(x).dtype == to) return std::vector<int>{x};
         if (!m.val(x).constant) return std::vector<int>{m.add(n, "cast", {x}, {{"to", to.str()}})};
         const NDArray& src = m.val(x).data;
         NDArray a(to, m.shape(x));
         const bool exact = !src.dtype().is_float() && !to.is_float();
         for (int64_t i = 0; i < a.numel(); ++i) {
           if (exact) a.set_int(i, src.get_int(i));
           else a.set(i, src.get(i));
         }
         return std::vector<int>{m.constant(m.val(x).name + ".cast", a)};
       }},
      {"GatherElements", [](Importer& m, const onnx::NodeProto& n) {
         int x = m.in(n, 0);
         return std::vector<int>{m.add(n, "gather_elements", {x, m.in(n, 1)},
                                       {{"axis", int64_t{m.axis(n, m.attr_i(n, "axis", 0), m.shape(x).size())}}})};
       }},
      {"GatherND", [](Importer& m, const onnx::NodeProto& n) {
         return std::vector<int>{m.add(n, "gather_nd", {m.in(n, 0), m.in(n, 1)}, {{"batch_dims", m.attr_i(n, "batch_dims", 0)}})};
       }},
      {"CumSum", [](Importer& m, const onnx::NodeProto& n) {
         int x = m.in(n, 0);
         I ax = m.const_ints(n, 1);
         if (ax.size() != 1) m.fail(m.node_desc(n) + ": axis must be one value");
         return std::vector<int>{m.add(n, "cumsum", {x},
                                       {{"axis", int64_t{m.axis(n, ax[0], m.shape(x).size())}},
                                        {"exclusive", m.attr_i(n, "exclusive", 0) != 0 ? int64_t{1} : int64_t{0}},
                                        {"reverse", m.attr_i(n, "reverse", 0) != 0 ? int64_t{1} : int64_t{0}}})};
       }},
      {"ScatterND", [](Importer& m, const onnx::NodeProto& n) { return m.scatter_nd(n); }},
      {"Einsum", [](Importer& m, const onnx::NodeProto& n) { return m.einsum(n); }},
      {"Resize", [](Importer& m, const onnx::NodeProto& n) { return m.resize(n); }},
      {"Size", [](Importer& m, const onnx::NodeProto& n) {
         NDArray a(DType::i64(), {});
         a.set_int(0, product(m.shape(m.in(n, 0))));
         return std::vector<int>{m.constant(n.output(0), a)};
       }},
      {"Equal", binary("equal")}, {"Less", binary("less")}, {"LessOrEqual", binary("less_equal")},
      {"Greater", binary("greater")}, {"GreaterOrEqual", binary("greater_equal")},
      {"And", binary("logical_and")}, {"Or", binary("logical_or")}, {"Xor", binary("logical_xor")},
      {"Not", unary("logical_not")}, {"IsNaN", unary("isnan")}, {"Sin", unary("sin")}, {"Cos", unary("cos")},
      {"IsInf", [](Importer& m, const onnx::NodeProto& n) {
         return std::vector<int>{m.add(n, "isinf", {m.in(n, 0)},
                                       {{"detect_positive", m.attr_i(n, "detect_positive", 1) != 0 ? int64_t{1} : int64_t{0}},
                                        {"detect_negative", m.attr_i(n, "detect_negative", 1) != 0 ? int64_t{1} : int64_t{0}}})};
       }},
      {"Where", [](Importer& m, const onnx::NodeProto& n) {
         return std::vector<int>{m.add(n, "where", {m.in(n, 0), m.in(n, 1), m.in(n, 2)})};
       }},
      {"Mod", [](Importer& m, const onnx::NodeProto& n) {
         int64_t f = m.attr_i(n, "fmod", 0);
         if (f != 0 && f != 1) m.fail(m.node_desc(n) + ": fmod must be 0 or 1, got " + std::to_string(f));
         return std::vector<int>{m.add(n, "mod", {m.in(n, 0), m.in(n, 1)}, {{"fmod", f}})};
       }},
      {"Shape", [](Importer& m, const onnx::NodeProto& n) {
         const I& s = m.shape(m.in(n, 0));
         int64_t r = static_cast<int64_t>(s.size());
         int64_t start = m.attr_i(n, "start", 0), end = m.attr_i(n, "end", r);
         if (start < 0) start += r;
         if (end < 0) end += r;
         start = std::clamp<int64_t>(start, 0, r);
         end = std::clamp<int64_t>(end, start, r);
         NDArray a(DType::i64(), {end - start});
         for (int64_t i = start; i < end; ++i) a.set_int(i - start, s[i]);
         return std::vector<int>{m.constant(n.output(0), a)};
       }},
      {"Constant", [](Importer& m, const onnx::NodeProto& n) {
         NDArray a;
         if (const auto* t = m.attr(n, "value", onnx::AttributeProto::TENSOR)) a = m.tensor(t->t(), m.node_desc(n));
         else if (const auto* f = m.attr(n, "value_float", onnx::AttributeProto::FLOAT)) { a = NDArray(DType::f32(), {}); a.set(0, f->f()); }
         else if (const auto* i = m.attr(n, "value_int", onnx::AttributeProto::INT)) { a = NDArray(DType::i64(), {}); a.set_int(0, i->i()); }
         else if (const auto* fs = m.attr(n, "value_floats", onnx::AttributeProto::FLOATS)) {
           a = NDArray(DType::f32(), {fs->floats_size()});
           for (int k = 0; k < fs->floats_size(); ++k) a.set(k, fs->floats(k));
         } else if (const auto* is = m.attr(n, "value_ints", onnx::AttributeProto::INTS)) {
           a = NDArray(DType::i64(), {is->ints_size()});
           for (int k = 0; k < is->ints_size(); ++k) a.set_int(k, is->ints(k));
         } else {
           m.fail(m.node_desc(n) + ": no supported value attribute");
         }
         return std::vector<int>{m.constant(n.output(0), a)};
       }},
      {"ConstantOfShape", [](Importer& m, const onnx::NodeProto& n) {
         I s = m.const_ints(n, 0);
         NDArray v;
         if (const auto* t = m.attr(n, "value", onnx::AttributeProto::TENSOR)) v = m.tensor(t->t(), m.node_desc(n));
         for (int64_t e : s)
           if (e <= 0) m.fail(m.node_desc(n) + ": extent " + std::to_string(e) + " in " + shape_str(s) + " (basin has no empty tensors)");
         NDArray a(v.defined() && v.numel() ? v.dtype() : DType::f32(), s);
         const bool f = a.dtype().is_float();
         for (int64_t i = 0; i < a.numel(); ++i) {
           if (f) a.set(i, v.defined() && v.numel() ? v.get(0) : 0.0);
           else a.set_int(i, v.defined() && v.numel() ? v.get_int(0) : 0);
         }
         return std::vector<int>{m.constant(n.output(0), a)};
       }},
      {"Range", [](Importer& m, const onnx::NodeProto& n) {
         const DType t = m.val(m.in(n, 0)).dtype;
         for (int i = 0; i < 3; ++i)
           if (m.const_in(n, i).numel() != 1) m.fail(m.node_desc(n) + ": input " + std::to_string(i) + " must be a scalar");
         int64_t count;
         NDArray a;
         if (t.is_float()) {
           double start = m.const_scalar(n, 0), limit = m.const_scalar(n, 1), delta = m.const_scalar(n, 2);
           if (delta == 0 || !std::isfinite(start) || !std::isfinite(limit) || !std::isfinite(delta))
             m.fail(m.node_desc(n) + ": start, limit and delta must be finite and delta nonzero");
           double c = std::ceil((limit - start) / delta);
           if (c > double(1 << 30)) m.fail(m.node_desc(n) + ": " + std::to_string(c) + " elements is too many");
           count = std::max<int64_t>(0, static_cast<int64_t>(c));
           a = NDArray(t, {count});
           for (int64_t i = 0; i < count; ++i) a.set(i, start + static_cast<double>(i) * delta);
         } else {
           // Integers exactly, with every step checked for overflow.
           int64_t start = m.const_in(n, 0).get_int(0), limit = m.const_in(n, 1).get_int(0), delta = m.const_in(n, 2).get_int(0);
           int64_t span = 0;
           if (delta == 0) m.fail(m.node_desc(n) + ": delta is 0");
           if (__builtin_sub_overflow(limit, start, &span) || delta == INT64_MIN)
             m.fail(m.node_desc(n) + ": the range overflows 64 bits");
           int64_t c = span / delta + ((span % delta != 0) && ((span > 0) == (delta > 0)) ? 1 : 0);
           if (c > (1 << 30)) m.fail(m.node_desc(n) + ": " + std::to_string(c) + " elements is too many");
           count = c > 0 ? c : 0;
           a = NDArray(t, {count});
           for (int64_t i = 0; i < count; ++i) a.set_int(i, start + i * delta);  // between start and limit
         }
         if (count == 0) m.fail(m.node_desc(n) + ": the range is empty (basin has no empty tensors)");
         return std::vector<int>{m.constant(n.output(0), a)};
       }},
  };
  return c;
}

// The schemas of opset 18 and later, generated from the pinned onnx package
// (scripts/onnx_schemas.py), for libonnx builds whose own stop earlier (Debian 12's at
// opset 17): each operator version's attributes and largest input count.
struct LaterSchema {
  const char* name;
  int since;
  bool deprecated;
  std::vector<std::string> attrs;
  int max_inputs;
};
const std::vector<LaterSchema>& later_schemas() {
  static const std::vector<LaterSchema> v = {
#include "core/graph/onnx_schemas.inc"
  };
  return v;
}
// The newest version of `op` at `opset` among the later schemas; null when none of its
// versions since opset 18 applies (the operator is libonnx's to describe).
const LaterSchema* later_schema(const std::string& op, int opset) {
  const LaterSchema* best = nullptr;
  for (const LaterSchema& s : later_schemas())
    if (op == s.name && s.since <= opset && (!best || s.since > best->since)) best = &s;
  return best;
}

}  // namespace

int newest_onnx_opset() {
  const auto& range = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
  auto it = range.find("");
  return std::max(it == range.end() ? 0 : it->second.second, BASIN_ONNX_SCHEMAS_OPSET);
}

namespace {

// ONNX's opset rules: an operator, attribute or input count that the model's declared
// opset does not define is an error (ONNX Runtime refuses such files too).
void Importer::check_opset(const onnx::NodeProto& n) const {
  const auto& range = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
  auto it = range.find("");
  const int known = it == range.end() ? 0 : it->second.second;
  std::set<std::string> allowed;
  int max_in = 0;
  const LaterSchema* later = opset_ > known ? later_schema(n.op_type(), opset_) : nullptr;
  if (later) {
    if (later->deprecated)
      fail(node_desc(n) + ": " + n.op_type() + " is deprecated in opset " + std::to_string(opset_));
    allowed.insert(later->attrs.begin(), later->attrs.end());
    max_in = later->max_inputs;
  } else {
    const onnx::OpSchema* schema = onnx::OpSchemaRegistry::Schema(n.op_type(), std::min(opset_, known), "");
    if (!schema) fail(node_desc(n) + ": " + n.op_type() + " is not an operator of opset " + std::to_string(opset_));
    for (const auto& kv : schema->attributes()) allowed.insert(kv.first);
    max_in = schema->max_input();
  }
  for (const auto& a : n.attribute())
    if (!allowed.count(a.name()))
      fail(node_desc(n) + ": attribute '" + a.name() + "' is not part of " + n.op_type() + " in opset " +
           std::to_string(opset_) + " (the model declares that opset)");
  if (n.input_size() > max_in)
    fail(node_desc(n) + ": " + std::to_string(n.input_size()) + " inputs; " + n.op_type() + " in opset " +
         std::to_string(opset_) + " takes at most " + std::to_string(max_in));
}

// Only nodes on the data path must be operators basin compiles: a node whose inputs
// are all constant (initializers, Constant, Shape of anything, and nodes of those) is
// evaluated at import by the same converters. Every missing operator is named at once,
// grouped by operator, in one bounded line.
void Importer::check_support(const onnx::GraphProto& gp) const {
  std::set<std::string> data;
  std::set<std::string> inits;
  for (const auto& t : gp.initializer()) inits.insert(t.name());
  for (const auto& vi : gp.input())
    if (!inits.count(vi.name())) data.insert(vi.name());
  // Data flows in file order here; a node read before its producer counts as data
  // (conservative: the real order is checked when nodes are converted).
  std::set<std::string> produced;
  for (const auto& n : gp.node())
    for (const auto& o : n.output()) produced.insert(o);
  std::set<std::string> seen;
  struct Missing {
    int count = 0;
    std::string names;
    bool on_data = false;
  };
  std::map<std::string, Missing> missing;
  for (const auto& n : gp.node()) {
    bool is_data = false;
    if (n.op_type() != "Shape" && n.op_type() != "Size")
      for (const auto& x : n.input()) is_data |= !x.empty() && (data.count(x) || (produced.count(x) && !seen.count(x)));
    for (const auto& o : n.output()) {
      seen.insert(o);
      if (is_data) data.insert(o);
    }
    bool ours = n.domain().empty() || n.domain() == "ai.onnx";
    if (ours && converters().count(n.op_type()) && !(is_data && constant_only(n.op_type()))) {
      check_opset(n);
      continue;
    }
    Missing& m = missing[ours ? n.op_type() : n.domain() + "." + n.op_type()];
    if (++m.count <= 3)
      m.names += std::string(m.names.empty() ? "" : ", ") + "'" +
                 (n.name().empty() ? (n.output_size() ? n.output(0) : "?") : n.name()) + "'";
    m.on_data |= is_data;
  }
  if (missing.empty()) return;
  std::string msg;
  for (const auto& [op, m] : missing)
    msg += (msg.empty() ? "" : "; ") + op + " (" + std::to_string(m.count) + (m.count == 1 ? " node: " : " nodes: ") +
           m.names + (m.count > 3 ? ", ..." : "") +
           (m.on_data ? (converters().count(op) ? "; basin evaluates it on constants only" : "")
                      : "; on a constant path, but basin cannot evaluate it") +
           ")";
  fail("unsupported operators: " + msg);
}

// Gives the inputs' symbolic dimensions their values (ImportOptions) in the model
// itself, so that ONNX's shape inference sees them too.
void Importer::fix_symbolic_shapes(onnx::GraphProto& gp) const {
  std::set<std::string> inits, input_names, dim_names;
  for (const auto& t : gp.initializer()) inits.insert(t.name());
  for (const auto& vi : gp.input())
    if (!inits.count(vi.name())) {
      input_names.insert(vi.name());
      if (vi.type().has_tensor_type())
        for (const auto& d : vi.type().tensor_type().shape().dim())
          if (!d.has_dim_value() && !d.dim_param().empty()) dim_names.insert(d.dim_param());
    }
  auto list = [](const std::set<std::string>& s) {
    std::string r;
    for (const auto& x : s) r += (r.empty() ? "'" : ", '") + x + "'";
    return r.empty() ? std::string("none") : r;
  };
  for (const auto& [key, dims] : options_.shapes) {
    if (!input_names.count(key) && !dim_names.count(key))
      fail("--shape " + key + ": the model has no input or symbolic dimension of that name (inputs: " +
           list(input_names) + "; symbolic dimensions: " + list(dim_names) + ")");
    if (!input_names.count(key) && dims.size() != 1)
      fail("--shape " + key + ": a symbolic dimension takes one value, got " + shape_str(dims));
    for (int64_t d : dims)
      if (d <= 0 || d > (int64_t{1} << 31))
        fail("--shape " + key + ": extent " + std::to_string(d) + " is not in 1 to 2^31");
  }
  for (auto& vi : *gp.mutable_input()) {
    if (inits.count(vi.name()) || !vi.type().has_tensor_type()) continue;
    auto* shape = vi.mutable_type()->mutable_tensor_type()->mutable_shape();
    auto whole = options_.shapes.find(vi.name());
    if (whole != options_.shapes.end()) {
      if (static_cast<int>(whole->second.size()) != shape->dim_size())
        fail("--shape " + vi.name() + ": the input has rank " + std::to_string(shape->dim_size()) + ", got " +
             shape_str(whole->second));
      for (int d = 0; d < shape->dim_size(); ++d) shape->mutable_dim(d)->set_dim_value(whole->second[d]);
      continue;
    }
    for (int d = 0; d < shape->dim_size(); ++d) {
      auto* dim = shape->mutable_dim(d);
      if (dim->has_dim_value()) continue;
      auto it = options_.shapes.find(dim->dim_param());
      if (dim->dim_param().empty() || it == options_.shapes.end())
        fail("input '" + vi.name() + "' dimension " + std::to_string(d) + " is symbolic" +
             (dim->dim_param().empty() ? std::string(" (unnamed)") : " ('" + dim->dim_param() + "')") +
             ": give its value with --shape " +
             (dim->dim_param().empty() ? vi.name() + "=DIMS" : dim->dim_param() + "=N") +
             " (or the input's whole shape with --shape " + vi.name() + "=D0,D1,...)");
      dim->set_dim_value(it->second[0]);
    }
  }
}

Graph Importer::run() {
  std::ifstream f(path_, std::ios::binary);
  if (!f) throw NotFoundError("cannot open ONNX model '" + path_ + "'");
  std::string bytes = read_rest(f);
  onnx::ModelProto model;
  if (bytes.empty() || !model.ParseFromString(bytes))
    fail("not a valid ONNX protobuf (the file is truncated or corrupt)");
  if (!model.has_graph()) fail("the model has no graph");
  // The default domain's opset.
  for (const auto& o : model.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") opset_ = static_cast<int>(o.version());
  if (opset_ == 0) fail("the model imports no opset of the default ONNX domain");
  if (opset_ < 11 || opset_ > newest_onnx_opset())
    fail("opset " + std::to_string(opset_) + " is not supported (11 to " + std::to_string(newest_onnx_opset()) + ")");
  const onnx::GraphProto& gp = model.graph();
  g_.name = gp.name().empty() ? "onnx" : gp.name();

  check_support(gp);

  fix_symbolic_shapes(*model.mutable_graph());

  // ONNX's shape inference: an inconsistent model fails here with ONNX's message.
  std::map<std::string, I> onnx_shapes;
  guard_onnx_inference();
  try {
    onnx::shape_inference::InferShapes(model, onnx::OpSchemaRegistry::Instance(),
                                       onnx::ShapeInferenceOptions(true, 1, false));
  } catch (const std::exception& e) {
    fail(std::string("ONNX shape inference failed: ") + e.what());
  }
  auto record = [&](const onnx::ValueInfoProto& vi) {
    if (!vi.type().has_tensor_type() || !vi.type().tensor_type().has_shape()) return;
    I s;
    for (const auto& d : vi.type().tensor_type().shape().dim()) {
      if (!d.has_dim_value()) return;
      s.push_back(d.dim_value());
    }
    onnx_shapes[vi.name()] = s;
  };
  for (const auto& vi : model.graph().value_info()) record(vi);
  for (const auto& vi : model.graph().output()) record(vi);

  // Initializers, then the true inputs.
  std::set<std::string> inits;
  for (const auto& t : gp.initializer()) {
    inits.insert(t.name());
    vals_[t.name()] = constant(t.name(), tensor(t, "initializer '" + t.name() + "'"));
    if (narrow_int_bytes(t.data_type())) quantized(vals_[t.name()], t.data_type());
  }
  for (const auto& vi : gp.input()) {
    if (inits.count(vi.name())) continue;
    const std::string what = "input '" + vi.name() + "'";
    if (!vi.type().has_tensor_type()) fail(what + " is not a tensor");
    if (narrow_int_bytes(vi.type().tensor_type().elem_type()))
      fail(what + " is " + dtype_name(vi.type().tensor_type().elem_type()) +
           ": basin takes 8- and 16-bit integers inside a graph only (quantize a FLOAT input in the model)");
    DType dt = dtype_of(vi.type().tensor_type().elem_type(), what);
    I s;
    for (const auto& d : vi.type().tensor_type().shape().dim()) {
      s.push_back(d.dim_value());  // fix_symbolic_shapes gave every dimension a value
    }
    try {
      vals_[vi.name()] = g_.add_input(vi.name(), s, dt);
    } catch (const GraphError& e) {
      fail(e.what());
    }
  }

  // Node order: producers first (the file's order need not be), cycles and undefined
  // inputs named.
  const int nn = gp.node_size();
  // Every name is defined once (ONNX graphs are in SSA form): a second writer of an
  // output, or a node writing an input's or initializer's name, makes the graph invalid.
  std::map<std::string, int> producer;
  for (int i = 0; i < nn; ++i)
    for (const auto& o : gp.node(i).output()) {
      if (o.empty()) continue;
      if (vals_.count(o))
        fail(node_desc(gp.node(i)) + " writes '" + o + "', which is already a graph input or initializer");
      auto [it, fresh] = producer.emplace(o, i);
      if (!fresh)
        fail(node_desc(gp.node(i)) + " writes '" + o + "', which " + node_desc(gp.node(it->second)) +
             " writes too (each name is defined once)");
    }
  std::vector<std::vector<int>> users(nn);
  std::vector<int> pending(nn, 0);
  for (int i = 0; i < nn; ++i)
    for (const auto& x : gp.node(i).input()) {
      if (x.empty() || vals_.count(x)) continue;
      auto it = producer.find(x);
      if (it == producer.end())
        fail(node_desc(gp.node(i)) + " reads '" + x +
             "', which no node, input or initializer defines (a missing initializer?)");
      users[it->second].push_back(i);
      ++pending[i];
    }
  std::vector<int> order, ready;
  for (int i = nn - 1; i >= 0; --i)
    if (pending[i] == 0) ready.push_back(i);
  while (!ready.empty()) {
    int i = ready.back();
    ready.pop_back();
    order.push_back(i);
    for (int u : users[i])
      if (--pending[u] == 0) ready.push_back(u);
  }
  if (static_cast<int>(order.size()) != nn) {
    std::string cyc;
    for (int i = 0; i < nn; ++i)
      if (pending[i] > 0) cyc += (cyc.empty() ? "" : ", ") + node_desc(gp.node(i));
    fail("the graph has a cycle through " + cyc);
  }

  // The operators that read INT8 activations held plus 128 (shifted_) as they are: the
  // quantization operators (through quant_params, which shifts the zero point too) and
  // views, whose outputs are held so as well.
  static const std::set<std::string> kShiftAware = {"DequantizeLinear", "QLinearConv", "QLinearMatMul"};
  static const std::set<std::string> kViews = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Identity"};
  for (int i : order) {
    const onnx::NodeProto& n = gp.node(i);
    std::vector<int> outs;
    const bool aware = kShiftAware.count(n.op_type()) != 0, view = kViews.count(n.op_type()) != 0;
    bool view_of_shifted = false;
    std::vector<std::pair<std::string, int>> restore;  // inputs seen converted back, restored after
    try {
      for (int k = 0; k < n.input_size(); ++k) {
        auto it = vals_.find(n.input(k));
        if (it == vals_.end() || !shifted_.count(it->second)) continue;
        if (view && k == 0) {
          view_of_shifted = true;
        } else if (!aware) {
          restore.push_back(*it);
          it->second = unshift(n, it->second);
        }
      }
      outs = converters().at(n.op_type())(*this, n);
    } catch (const GraphError&) {
      throw;
    } catch (const Error& e) {
      fail(node_desc(n) + ": " + e.what());
    }
    for (const auto& [name, v] : restore) vals_[name] = v;
    if (view_of_shifted)
      for (int v : outs) {
        shifted_.insert(v);
        quantized(v, onnx::TensorProto::INT8);
      }
    for (int k = 0; k < n.output_size() && k < static_cast<int>(outs.size()); ++k) {
      const std::string& name = n.output(k);
      if (name.empty()) continue;
      vals_[name] = outs[k];
      auto it = onnx_shapes.find(name);
      if (it != onnx_shapes.end() && it->second != shape(outs[k]))
        fail(node_desc(n) + ": output '" + name + "' has shape " + shape_str(shape(outs[k])) + " in basin but " +
             shape_str(it->second) + " by ONNX shape inference");
    }
  }
  for (const auto& o : gp.output()) {
    auto it = vals_.find(o.name());
    if (it == vals_.end()) fail("graph output '" + o.name() + "' is computed by no node");
    if (qtype_.count(it->second))
      fail("graph output '" + o.name() + "' is " + dtype_name(qtype_.at(it->second)) +
           ": basin gives 8- and 16-bit integers inside a graph only (dequantize it in the model)");
    g_.add_output(it->second, o.name());
  }
  if (g_.outputs().empty()) fail("the graph has no outputs");
  return std::move(g_);
}

}  // namespace

Graph import_onnx(const std::string& path, const ImportOptions& options) {
  try {
    return Importer(path, options).run();
  } catch (const GraphError&) {
    throw;
  } catch (const NotFoundError&) {
    throw;
  } catch (const Error& e) {
    throw GraphError("ONNX model '" + path + "': " + e.what());
  } catch (const std::exception& e) {
    // Protobuf or ONNX internals: still one clear error, never a crash.
    throw GraphError("ONNX model '" + path + "': " + e.what());
  }
}

}  // namespace basin::graph
